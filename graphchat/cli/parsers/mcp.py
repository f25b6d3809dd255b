"""`graphchat mcp`: its arguments (its code: `cli/mcp.py`, `cli/mcp_tools.py`, imported
when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mcp",
        help="list the configured MCP servers; serve plans over MCP",
        description="MCP servers are configured in the workspace's catalog/servers.yaml (mcpServers).",
    )
    commands = parser.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND")

    p = commands.add_parser("list", help="servers: transport, state, tool count, last error")
    p.add_argument("--json", action="store_true", help="print graph's {servers, count}")
    p.add_argument("--check", action="store_true", help="start every server now and report what happens")
    p.set_defaults(func=Command("graphchat.cli.mcp:run_list"))

    p = commands.add_parser("prompts", help="the prompts MCP servers offer (all servers, or SERVER's)")
    p.add_argument("server", nargs="?", metavar="SERVER")
    p.add_argument("--json", action="store_true", help="print {prompts, count}")
    p.set_defaults(func=Command("graphchat.cli.mcp:run_prompts"))

    p = commands.add_parser("prompt", help="get one prompt of a server and print its messages")
    p.add_argument("server", metavar="SERVER")
    p.add_argument("name", metavar="NAME")
    p.add_argument("--arg", action="append", metavar="k=v", help="one prompt argument (repeatable)")
    p.add_argument("--json", action="store_true", help="print {server, prompt, description, messages}")
    p.set_defaults(func=Command("graphchat.cli.mcp:run_prompt"))

    p = commands.add_parser("resources", help="the resources and resource templates MCP servers offer")
    p.add_argument("server", nargs="?", metavar="SERVER")
    p.add_argument("--json", action="store_true", help="print {resources, templates, count}")
    p.set_defaults(func=Command("graphchat.cli.mcp:run_resources"))

    p = commands.add_parser("read", help="read one resource of a server")
    p.add_argument("server", metavar="SERVER")
    p.add_argument("uri", metavar="URI")
    p.add_argument("--json", action="store_true", help="print {server, contents}")
    p.set_defaults(func=Command("graphchat.cli.mcp:run_read"))

    register_tools(commands)  # mcp tools / test / probe

    p = commands.add_parser(
        "serve",
        help="serve the workspace's plans over MCP stdio (plan_<identifier> tools)",
        description="An MCP stdio server: stdout is the JSON-RPC wire; logs and events go to stderr.",
    )
    p.set_defaults(func=Command("graphchat.cli.mcp:run_serve"))


def register_tools(commands: argparse._SubParsersAction) -> None:
    p = commands.add_parser(
        "tools", help="the tools MCP servers offer (all servers, or SERVER's, listed now)"
    )
    p.add_argument("server", nargs="?", metavar="SERVER")
    p.add_argument("--json", action="store_true", help="print graph's {tools, count, sources}")
    p.set_defaults(func=Command("graphchat.cli.mcp_tools:run_tools"))

    p = commands.add_parser("test", help="start SERVER, list its tools, report the time taken or the error")
    p.add_argument("server", metavar="SERVER")
    p.add_argument(
        "--json", action="store_true", help="print {server, ok, tools, declareOutputSchema, elapsedMs}"
    )
    p.set_defaults(func=Command("graphchat.cli.mcp_tools:run_test"))

    p = commands.add_parser(
        "probe", help="learn result shapes: call each read-only tool that needs no argument once"
    )
    p.add_argument("server", nargs="?", metavar="SERVER")
    p.add_argument("--json", action="store_true", help="print {probed, skipped, learned, count}")
    p.set_defaults(func=Command("graphchat.cli.mcp_tools:run_probe"))
