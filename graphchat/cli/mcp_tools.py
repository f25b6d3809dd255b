"""`graphchat mcp tools [SERVER]`, `mcp test SERVER`, `mcp probe [SERVER]`: what MCP servers
offer, whether one starts, and learning their result shapes ahead of use.

- `tools`: graph's listing (`{tools, count, sources}`, no control steps), grouped by server;
  SERVER: that server is started and asked for its list now (graph connects), else the
  cached lists, starting only the servers whose list is unknown.
- `test`: start SERVER, list its tools, and report how long that took (graph's `{server, ok,
  tools, declareOutputSchema, elapsedMs}`); a server that cannot start is `ok: false` with its
  `error`, exit 1.
- `probe`: graph has the verb as a stub; here it warms the shape cache: every read-only tool
  with no required argument is called once with `{}`, through the catalog (the one call path:
  validation, approvals, events, shape recording); what each call taught is reported. A tool
  that is not read-only is never called, whatever its arguments.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from graphchat.catalog.base import CallContext
from graphchat.ci import memory_storage
from graphchat.cli.output import note, print_json, report_error, warn
from graphchat.display import safe
from graphchat.errors import GraphchatError, did_you_mean
from graphchat.events import sink_for_environment
from graphchat.host import open_host
from graphchat.plans.listing import read_only, source_of, tool_listing
from graphchat.shapes import ShapeStore
from graphchat.workspace import load_settings


def _catalog(args: argparse.Namespace) -> tuple[Any, Any, list[str]]:
    """(settings, the catalog without plans, the servers meant: SERVER or every one)."""
    settings = load_settings(getattr(args, "home", None))
    # the one host: the catalog's warnings (skipped servers, names wanted twice) said there
    catalog = open_host(settings, include_plans=False).catalog
    source = catalog.mcp_source()
    names = [s.name for s in source.servers]
    wanted = getattr(args, "server", None)
    if wanted is not None:
        if source.server(wanted) is None:
            guess = did_you_mean(wanted, names)
            hint = f" ({guess})" if guess else f" (servers: {', '.join(names) or 'none'})"
            raise GraphchatError(f"no MCP server '{wanted}' is configured{hint}")
        names = [wanted]
    return settings, catalog, names


def _server_specs(catalog: Any, names: list[str]) -> list[Any]:
    return [s for s in catalog.list() if s.meta.get("server") in names]


def _run(catalog: Any, work: Any) -> Any:
    import asyncio

    async def go() -> Any:
        try:
            return await work()
        finally:
            await catalog.aclose()

    return asyncio.run(go())


def _warn_failed(errors: dict[str, str]) -> None:
    for server, error in errors.items():
        warn(f"MCP server '{server}' cannot start: {error}")


# --- tools ---------------------------------------------------------------------------------------


def run_tools(args: argparse.Namespace) -> int:
    _, catalog, names = _catalog(args)
    one = args.server is not None

    async def work() -> dict[str, str]:
        return await catalog.prepare(names if one else None, refresh=one)

    errors = _run(catalog, work)
    _warn_failed(errors)
    specs = _server_specs(catalog, names)
    if args.json:
        body = tool_listing(specs, controls=False)
        if not specs:
            body["note"] = "no tools exposed"
        print_json(body)
    elif not specs:
        print("no tools exposed", file=sys.stderr)
    else:
        sys.stdout.write(render(specs))
    return 1 if one and errors else 0


def render(specs: list[Any]) -> str:
    """graph's grouped listing (listing.rs `render_tool_listing`): one section a server, its
    header with the count, each tool's bare name (`[read-only]` marked) over its first line."""
    groups: dict[str, list[Any]] = {}
    for spec in specs:
        groups.setdefault(source_of(spec.name), []).append(spec)
    out: list[str] = []
    for i, (source, tools) in enumerate(groups.items()):
        if i:
            out.append("")
        out.append(f"{source} — {len(tools)} tool{'s' if len(tools) != 1 else ''}")
        for spec in tools:
            bare = spec.name.partition("__")[2] or spec.name
            out.append(f"  {bare}" + (" [read-only]" if read_only(spec) else ""))
            first = (spec.description or "").strip().splitlines()[:1]
            if first and first[0].strip():
                out.append(f"  {first[0].strip()}")
    return safe("\n".join(out), newlines=True) + "\n"


# --- test ----------------------------------------------------------------------------------------


def run_test(args: argparse.Namespace) -> int:
    _, catalog, names = _catalog(args)
    server = names[0]
    started = time.perf_counter()

    async def work() -> dict[str, str]:
        return await catalog.prepare([server], refresh=True)

    errors = _run(catalog, work)
    elapsed_ms = round((time.perf_counter() - started) * 1000)
    specs = _server_specs(catalog, names)
    declared = sum(1 for s in specs if s.output_schema is not None)
    body: dict[str, Any] = {
        "server": server,
        "ok": not errors,
        "tools": len(specs) if not errors else 0,
        "declareOutputSchema": declared if not errors else 0,
        "elapsedMs": elapsed_ms,
    }
    if errors:
        body["error"] = errors[server]
    if args.json:
        print_json(body)
    elif errors:
        report_error(f"MCP server '{server}' failed after {elapsed_ms / 1000:.2f}s: {errors[server]}")
    else:
        sys.stdout.write(
            f"ok: '{server}' initialized in {elapsed_ms / 1000:.2f}s — {len(specs)} tools "
            f"({declared} declare output schemas)\n"
        )
    return 1 if errors else 0


# --- probe ---------------------------------------------------------------------------------------


def probe_skip_reason(spec: Any) -> str | None:
    """Why `mcp probe` does not call this tool, or None: only read-only tools whose input
    schema requires nothing are called."""
    if not read_only(spec):
        return f"not read-only ({spec.family})"
    required = (spec.input_schema or {}).get("required") or []
    if required:
        return "needs arguments: " + ", ".join(str(r) for r in required)
    return None


def run_probe(args: argparse.Namespace) -> int:
    settings, catalog, names = _catalog(args)

    shapes = ShapeStore(settings.catalog_dir / "shapes")
    events = sink_for_environment(quiet=args.json)

    async def work() -> tuple[dict[str, str], list[dict[str, Any]], list[dict[str, Any]]]:
        errors = await catalog.prepare(names)
        probed: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        for spec in _server_specs(catalog, names):
            reason = probe_skip_reason(spec)
            if reason is not None:
                skipped.append({"tool": spec.name, "reason": reason})
                continue
            result = await catalog.call(spec.name, {}, CallContext(events=events, surface="cli"))
            row: dict[str, Any] = {"tool": spec.name, "ok": not result.is_error, "ms": round(result.ms)}
            if result.is_error:
                row["error"] = result.error_message
            probed.append(row)
        return errors, probed, skipped

    errors, probed, skipped = _run(catalog, work)  # closing the catalog writes what was recorded
    _warn_failed(errors)
    learned = 0
    for row in probed:
        doc = shapes.get(row["tool"]) if row["ok"] else None
        if doc is not None:
            row["schema"] = doc.get("schema")
            row["seen_count"] = doc.get("seen_count")
            learned += 1
    body = {"probed": probed, "skipped": skipped, "learned": learned, "count": len(probed) + len(skipped)}
    if memory_storage():
        body["note"] = "GRAPHCHAT_STORAGE=memory: nothing was kept"
    if args.json:
        print_json(body)
    else:
        for row in probed:
            if row["ok"]:
                top = _shape_summary(row.get("schema"))
                note(f"✓ {row['tool']}: learned {top}" if top else f"✓ {row['tool']}: called")
            else:
                note(f"✗ {row['tool']}: {row['error']}")
        for row in skipped:
            note(f"– {row['tool']}: skipped, {row['reason']}")
        note(
            f"probed {len(probed)} tool{'s' if len(probed) != 1 else ''}, learned {learned} shape"
            f"{'s' if learned != 1 else ''}, skipped {len(skipped)}"
            + (" (GRAPHCHAT_STORAGE=memory: nothing was kept)" if memory_storage() else "")
        )
    return 1 if errors else 0


def _shape_summary(schema: Any) -> str:
    """`object {a, b, c}`, `array`, `string` — one line of what a shape is."""
    if not isinstance(schema, dict):
        return ""
    kind = schema.get("type")
    if kind == "object" and isinstance(schema.get("properties"), dict):
        keys = list(schema["properties"])
        shown = ", ".join(keys[:6]) + (", …" if len(keys) > 6 else "")
        return f"object {{{shown}}}"
    return str(kind) if kind else "a shape"
