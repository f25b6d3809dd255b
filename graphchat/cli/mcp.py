"""`graphchat mcp list|serve`: the configured MCP servers and their state."""

from __future__ import annotations

import argparse
import sys
from typing import Any


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


def server_rows(source: Any, live: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One row per configured server. `live` = {server: error} of a --check (None: not checked)."""
    rows = []
    for config in source.servers:
        cached = source.cached(config)
        status = source.status(config.name)
        tools = cached["tools"] if cached else None
        shown = [t for t in tools if config.wants_tool(str(t.get("name")))] if tools is not None else None
        if live is not None:
            state = "failed" if config.name in live else "running"
        elif cached is not None:
            state = "cached"
        elif status.get("last_error_at") and status.get("last_error_at", "") >= (
            status.get("last_started_at") or ""
        ):
            state = "failed"  # its last start failed: say so, not "not started yet"
        else:
            state = "not started yet"
        row: dict[str, Any] = {
            "name": config.name,
            "transport": config.transport,
            "target": config.where,
            "state": state,
            "tools": len(shown) if shown is not None else None,
            "tools_total": len(tools) if tools is not None else None,
            "tools_fetched_at": cached.get("fetched_at") if cached else None,
            "last_started_at": status.get("last_started_at"),
            "last_error": status.get("last_error"),
            "last_error_at": status.get("last_error_at"),
        }
        if live is not None and config.name in live:
            row["last_error"] = live[config.name]
        rows.append(row)
    return rows


def run_list(args: argparse.Namespace) -> int:
    import asyncio

    from graphchat.catalog.mcp_pool import McpSource
    from graphchat.workspace import load_settings

    settings = load_settings(getattr(args, "home", None))
    source = McpSource(settings)
    from graphchat.cli.output import warn

    for message in source.warnings():
        warn(message)
    live = None
    if args.check and source.servers:

        async def check() -> dict[str, str]:
            try:
                return await source.prepare(refresh=True)
            finally:
                await source.aclose()

        live = asyncio.run(check())
    rows = server_rows(source, live)
    if args.json:
        from graphchat.cli.output import print_json

        print_json(rows)
        return 1 if live else 0
    if not rows:
        print(f"no MCP servers configured ({settings.catalog_dir / 'servers.yaml'})", file=sys.stderr)
        return 0
    width = max(len(r["name"]) for r in rows)
    lines = []
    for r in rows:
        count = "?" if r["tools"] is None else str(r["tools"])
        if r["tools_total"] is not None and r["tools_total"] != r["tools"]:
            count += f"/{r['tools_total']}"
        line = f"{r['name']:<{width}}  {r['transport']:<5}  {r['state']:<15}  {count:>7} tools  {r['target']}"
        if r["last_error"]:
            line += f"\n{'':<{width}}  last error ({r['last_error_at'] or 'now'}): {r['last_error']}"
        lines.append(line)
    sys.stdout.write("\n".join(lines) + "\n")
    return 1 if live else 0


def run_serve(args: argparse.Namespace) -> int:
    from graphchat.mcp_server import serve

    return serve(getattr(args, "home", None))
