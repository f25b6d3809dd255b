"""`graphchat threads`: its arguments (its code: `cli/threads.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "threads",
        help="list, show, export or remove conversation threads",
        description="Every ask and chat turn is kept as a thread in the workspace's threads/ folder.",
    )
    commands = parser.add_subparsers(dest="threads_command", metavar="SUBCOMMAND")

    p = commands.add_parser("list", help="threads, newest first")
    p.add_argument("--json", action="store_true", help="print {threads: [...], count}")
    p.set_defaults(func=Command("graphchat.cli.threads:run_list"))

    p = commands.add_parser("show", help="a thread's messages, tool calls and results")
    p.add_argument("id", metavar="ID", help="thread id (or a unique prefix of at least 6 characters)")
    p.add_argument("--json", action="store_true", help="print the events as a JSON array")
    p.set_defaults(func=Command("graphchat.cli.threads:run_show"))

    p = commands.add_parser("rm", help="delete a thread")
    p.add_argument("id", metavar="ID", help="thread id (or a unique prefix of at least 6 characters)")
    p.set_defaults(func=Command("graphchat.cli.threads:run_rm"))

    p = commands.add_parser("export", help="a thread as Markdown or JSON, on stdout")
    p.add_argument("id", metavar="ID", help="thread id (or a unique prefix of at least 6 characters)")
    p.add_argument("--format", choices=("md", "json"), default="md", help="output format (default: md)")
    p.set_defaults(func=Command("graphchat.cli.threads:run_export"))
