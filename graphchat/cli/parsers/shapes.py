"""`graphchat shapes`: its arguments (its code: `cli/shapes.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "shapes",
        help="the learned output shapes of tools",
        description="After every successful call a tool's output shape is merged into catalog/shapes/.",
    )
    commands = parser.add_subparsers(dest="shapes_command", metavar="SUBCOMMAND")

    p = commands.add_parser("list", help="tools with a recorded shape")
    p.add_argument("--json", action="store_true", help="print graph's {shapes, count}")
    p.set_defaults(func=Command("graphchat.cli.shapes:run_list"))

    p = commands.add_parser("show", help="one tool's merged schema and example")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--json", action="store_true", help="print the stored document")
    p.set_defaults(func=Command("graphchat.cli.shapes:run_show"))
