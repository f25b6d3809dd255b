"""`graphchat mcp list|serve|prompts|prompt|resources|read`: the configured MCP servers, their
state, their prompts and resources; and graphchat as a server."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from graphchat.catalog.base import CallContext
from graphchat.catalog.mcp.connection import ServerUnavailable, describe
from graphchat.catalog.mcp.features import prompt_messages, prompt_rows, read_resource, resource_rows
from graphchat.catalog.mcp.pool import McpSource
from graphchat.catalog.mcp.status import server_rows
from graphchat.cli.output import print_json, warn
from graphchat.display import safe
from graphchat.errors import GraphchatError, did_you_mean
from graphchat.mcp_server.server import serve
from graphchat.workspace import load_settings


def run_list(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "home", None))
    skipped: list[str] = []
    rows = server_rows(settings, check=args.check, warnings=skipped)

    for message in skipped:
        warn(message)
    failed = 1 if args.check and any(r["state"] == "failed" for r in rows) else 0
    empty = f"no MCP servers configured ({settings.catalog_dir / 'servers.yaml'})"
    if args.json:
        # graph's {servers: [{name, transport, target, …}], count} (its mcp_cmd.rs), a note when empty
        envelope: dict[str, Any] = {"servers": rows, "count": len(rows)}
        if not rows:
            envelope["note"] = empty
        print_json(envelope)
        return failed
    if not rows:
        print(empty, file=sys.stderr)
        return 0

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
    return serve(getattr(args, "home", None))


# --- prompts and resources ---------------------------------------------------------------------


def _with_servers(args: argparse.Namespace, work: Any) -> Any:
    """Run `work(source, names)` against the configured servers (SERVER, or every one)."""
    import asyncio

    settings = load_settings(getattr(args, "home", None))
    source = McpSource(settings)
    names = [s.name for s in source.servers]
    wanted = getattr(args, "server", None)
    if wanted is not None:
        if source.server(wanted) is None:
            guess = did_you_mean(wanted, names)
            hint = f" ({guess})" if guess else f" (servers: {', '.join(names) or 'none'})"
            raise GraphchatError(f"no MCP server '{wanted}' is configured{hint}")
        names = [wanted]

    async def go() -> Any:
        try:
            return await work(source, names)
        finally:
            await source.aclose()

    return asyncio.run(go())


def _failure(server: str, exc: BaseException) -> str:
    why = str(exc) if isinstance(exc, ServerUnavailable) else describe(exc)
    return f"MCP server '{server}': {why}"


async def _each(source: Any, names: list[str], method: str, *args: Any) -> dict[str, Any]:
    """{server: result or the exception} for servers that offer the capability."""
    import asyncio

    results = await asyncio.gather(*(source.request(n, method, *args) for n in names), return_exceptions=True)
    return dict(zip(names, results, strict=True))


def _offers(exc: BaseException) -> bool:
    """False when the server simply has no such capability (-32601 method not found)."""
    return getattr(exc, "code", None) != -32601


def run_prompts(args: argparse.Namespace) -> int:
    async def work(source: Any, names: list[str]) -> tuple[list[dict[str, Any]], int]:
        rows: list[dict[str, Any]] = []
        failed = 0
        for server, result in (await _each(source, names, "list_prompts")).items():
            if isinstance(result, BaseException):
                if _offers(result):
                    warn(_failure(server, result))
                    failed = 1
                continue
            rows += prompt_rows(server, result)
        return rows, failed

    rows, failed = _with_servers(args, work)
    if args.json:
        print_json({"prompts": rows, "count": len(rows)})
        return failed
    if not rows:
        sys.stderr.write("no prompts\n")
        return failed

    for row in rows:
        arguments = " ".join(a["name"] + ("" if a["required"] else "?") for a in row["arguments"])
        line = f"{row['server']}:{row['name']}" + (f" {arguments}" if arguments else "")
        if row["description"]:
            line += f"  — {row['description']}"
        sys.stdout.write(safe(line, newlines=False) + "\n")
    return failed


def run_prompt(args: argparse.Namespace) -> int:
    arguments: dict[str, str] = {}
    for pair in args.arg or []:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise GraphchatError(f"--arg must be key=value, got: {pair}", 2)
        arguments[key] = value

    async def work(source: Any, names: list[str]) -> Any:
        try:
            return await source.request(args.server, "get_prompt", args.name, arguments or None)
        except GraphchatError:
            raise
        except BaseException as exc:
            raise GraphchatError(_failure(args.server, exc)) from None

    result = _with_servers(args, work)
    messages = prompt_messages(result)
    if args.json:
        print_json(
            {
                "server": args.server,
                "prompt": args.name,
                "description": result.description,
                "messages": messages,
            }
        )
        return 0

    for message in messages:
        content = message["content"]
        text = content if isinstance(content, str) else json.dumps(content)
        sys.stdout.write(f"{message['role']}: {safe(text)}\n")
    return 0


def run_resources(args: argparse.Namespace) -> int:
    async def work(source: Any, names: list[str]) -> tuple[dict[str, list[Any]], int]:
        out: dict[str, list[Any]] = {"resources": [], "templates": []}
        failed = 0
        listed = await _each(source, names, "list_resources")
        templates = await _each(source, names, "list_resource_templates")
        for server in names:
            one, many = listed[server], templates[server]
            if isinstance(one, BaseException):
                if _offers(one):
                    warn(_failure(server, one))
                    failed = 1
                continue
            if isinstance(many, BaseException):
                from mcp.types import ListResourceTemplatesResult

                many = ListResourceTemplatesResult(resource_templates=[])
            rows = resource_rows(server, one, many)
            out["resources"] += rows["resources"]
            out["templates"] += rows["templates"]
        return out, failed

    found, failed = _with_servers(args, work)
    if args.json:
        print_json({**found, "count": len(found["resources"])})
        return failed

    for row in found["resources"]:
        line = f"{row['server']}:{row['uri']}  {row['name']}" + (
            f" ({row['mime_type']})" if row["mime_type"] else ""
        )
        sys.stdout.write(safe(line, newlines=False) + "\n")
    for row in found["templates"]:
        line = f"{row['server']}:{row['uri_template']}  {row['name']} (template)"
        sys.stdout.write(safe(line, newlines=False) + "\n")
    if not found["resources"] and not found["templates"]:
        sys.stderr.write("no resources\n")
    return failed


def run_read(args: argparse.Namespace) -> int:
    async def work(source: Any, names: list[str]) -> Any:
        limit = source.settings.max_tool_result_chars
        return await read_resource(source, {"server": args.server, "uri": args.uri}, CallContext(), limit)

    result = _with_servers(args, work)
    if result.is_error:
        raise GraphchatError(result.error_message)
    if args.json:
        print_json(result.value)
        return 0

    for item in result.value["contents"]:
        if item.get("binary"):
            sys.stderr.write(
                f"{item['uri']}: binary, {item.get('mime_type') or 'unknown type'}, {item['bytes']:,} bytes\n"
            )
            continue
        text = item["text"]
        shown = safe(text) if sys.stdout.isatty() else text
        sys.stdout.write(shown if shown.endswith("\n") else shown + "\n")
        if item.get("truncated"):
            sys.stderr.write(f"{item['uri']}: {item['truncated']}\n")
    return 0
