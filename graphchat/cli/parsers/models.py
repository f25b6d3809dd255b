"""`graphchat models`: its arguments (its code: `cli/models.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "models",
        help="the chat models litellm knows; ✓ marks those whose provider's key is set here",
        description="List the chat models of litellm's model map (offline: the copy installed with "
        "litellm), one a line: ✓ when the environment holds the key its provider needs (? when "
        "litellm does not say which variable that is), its provider and its context window.",
    )
    p.add_argument("--provider", metavar="P", help="only this provider's models (e.g. openai, anthropic)")
    p.add_argument("--json", action="store_true", help="print a JSON object")
    p.set_defaults(func=Command("graphchat.cli.models:run_models"))
