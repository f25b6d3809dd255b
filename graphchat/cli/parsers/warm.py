"""`graphchat warm`: its arguments (its code: `cli/warm.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "warm",
        help="keep a helper running so that `ask` answers at once",
        description="Start this workspace's warm helper: it keeps the model library imported and the "
        "MCP servers running, and `graphchat ask` hands its questions to it. Returns once it is ready "
        "and prints its pid. It leaves after settings.warm_idle (default 15m) without a question, when "
        "the configuration changes, or on --stop. GRAPHCHAT_WARM=0 turns it off; `settings.warm: auto` "
        "starts it after the first ask.",
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--status", action="store_true", help="show the helper: pid, uptime, servers, idle time left"
    )
    what.add_argument("--stop", action="store_true", help="stop the helper(s) of this workspace")
    parser.add_argument("--json", action="store_true", help="with --status: print it as JSON")
    parser.set_defaults(func=Command("graphchat.cli.warm:run"))
