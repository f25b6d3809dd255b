"""`graphchat mcp list|serve`: the configured MCP servers and their state."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "mcp",
        help="list the configured MCP servers; serve plans over MCP",
        description="MCP servers are configured in the workspace's catalog/servers.yaml (mcpServers).",
    )
    commands = parser.add_subparsers(dest="mcp_command", metavar="SUBCOMMAND")

    p = commands.add_parser("list", help="servers: transport, state, tool count, last error")
    p.add_argument("--json", action="store_true", help="print a JSON array of servers")
    p.add_argument("--check", action="store_true", help="start every server now and report what happens")
    p.set_defaults(func=run_list)

    p = commands.add_parser(
        "serve",
        help="serve the workspace's plans over MCP stdio (plan_<identifier> tools)",
        description="An MCP stdio server: stdout is the JSON-RPC wire; logs and events go to stderr.",
    )
    p.set_defaults(func=run_serve)


def run_list(args: argparse.Namespace) -> int:
    from graphchat.catalog.mcp_status import server_rows
    from graphchat.workspace import load_settings

    settings = load_settings(getattr(args, "home", None))
    skipped: list[str] = []
    rows = server_rows(settings, check=args.check, warnings=skipped)
    from graphchat.cli.output import warn

    for message in skipped:
        warn(message)
    failed = 1 if args.check and any(r["state"] == "failed" for r in rows) else 0
    if args.json:
        from graphchat.cli.output import print_json

        print_json(rows)
        return failed
    if not rows:
        print(f"no MCP servers configured ({settings.catalog_dir / 'servers.yaml'})", file=sys.stderr)
        return 0
    from graphchat.display import safe

    rows = [
        {k: safe(v, newlines=False) if isinstance(v, str) else v for k, v in r.items()} for r in rows
    ]  # names, targets and errors come from servers.yaml and the servers: escaped
    width = max(len(r["name"]) for r in rows)
    lines = []
    for r in rows:
        count = "?" if r["tools"] is None else str(r["tools"])
        if r["tools_total"] is not None and r["tools_total"] != r["tools"]:
            count += f"/{r['tools_total']}"
        line = f"{r['name']:<{width}}  {r['transport']:<5}  {r['state']:<15}  {count:>7} tools  {r['expanded'] or r['target']}"
        if r["last_error"]:
            line += f"\n{'':<{width}}  last error ({r['last_error_at'] or 'now'}): {r['last_error']}"
            if not r.get("retried", True):
                line += f"\n{'':<{width}}  not retried until its configuration changes or `graphchat tools list --refresh`"
        lines.append(line)
    sys.stdout.write("\n".join(lines) + "\n")
    return failed


def run_serve(args: argparse.Namespace) -> int:
    from graphchat.mcp_server import serve

    return serve(getattr(args, "home", None))
