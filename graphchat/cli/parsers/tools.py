"""`graphchat tools`: its arguments (its code: `cli/tools.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "tools",
        help="list, show or call the tools of the catalog",
        description="Every tool in one namespace: MCP servers (server__tool), plans (plan__name), natives.",
    )
    commands = parser.add_subparsers(dest="tools_command", metavar="SUBCOMMAND")

    p = commands.add_parser("list", help="every tool: name, source, family, description")
    p.add_argument("--json", action="store_true", help="print graph's {tools, count, sources}")
    p.add_argument("--refresh", action="store_true", help="start every MCP server to refresh its tool list")
    p.set_defaults(func=Command("graphchat.cli.tools:run_list"))

    p = commands.add_parser("show", help="one tool: input schema, output shape, example")
    p.add_argument("name", metavar="NAME")
    p.add_argument(
        "--json",
        action="store_true",
        help="print graph's {name, source, description, readOnly, inputSchema, outputSchema, outputExample}",
    )
    p.set_defaults(func=Command("graphchat.cli.tools:run_show"))

    p = commands.add_parser("call", help="call one tool and print its result")
    p.add_argument("name", metavar="NAME")
    p.add_argument("input", nargs="?", metavar="JSON|@file|-", help="the arguments (a JSON object)")
    p.add_argument(
        "--input", dest="pairs", action="append", metavar="k=v", help="set one argument (v parsed as JSON)"
    )
    p.add_argument("--json", action="store_true", help="print {value, is_error, ms}")
    p.add_argument("--yes", action="store_true", help="approve the call without asking")
    p.set_defaults(func=Command("graphchat.cli.tools:run_call"))

    p = commands.add_parser(
        "test", help="call one tool as graph's `tools test` does: a tool's error is its result (exit 0)"
    )
    p.add_argument("name", metavar="NAME")
    p.add_argument("input", nargs="?", metavar="JSON|@file|-", help="the arguments (a JSON object)")
    p.add_argument(
        "--input", dest="pairs", action="append", metavar="k=v", help="set one argument (v parsed as JSON)"
    )
    p.add_argument("--json", action="store_true", help="print graph's {tool, isError, result}")
    p.add_argument("--yes", action="store_true", help="approve the call without asking")
    p.set_defaults(func=Command("graphchat.cli.tools:run_test"))
