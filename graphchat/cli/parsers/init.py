"""`graphchat init`: its arguments (its code: `cli/init.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="create a workspace: graphchat.yaml, catalog/servers.yaml and an example plan",
        description="Create a commented workspace in DIR (default: the current folder). "
        "Existing files are left alone unless --force is given.",
    )
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the workspace folder (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.add_argument(
        "--from-graph",
        action="store_true",
        help="DIR is a graph project (.graph/config.toml): carry its configuration over, and read "
        "its plans and tools in place",
    )
    p.set_defaults(func=Command("graphchat.cli.init:run_init"))
    w = sub.add_parser(
        "where",
        help="which workspace, models (API base, keys) and servers are in use",
        description="Print the workspace in use, its configuration file, the model of each role "
        "with its API base and whether the key its provider needs is set, and the configured MCP "
        "servers.",
    )
    w.add_argument("--json", action="store_true", help="print a JSON object")
    w.set_defaults(func=Command("graphchat.cli.init:run_where"))
