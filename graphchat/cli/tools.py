"""`graphchat tools list|show|call|test`: the catalog, seen and probed from the command line."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from graphchat.catalog.base import similar_tools
from graphchat.catalog.mcp.status import fresh_log
from graphchat.cli.output import (
    apply_input_flags,
    note,
    print_json,
    read_document_arg,
    report_error,
    warn,
)
from graphchat.display import safe
from graphchat.errors import GraphchatError
from graphchat.events import TerminalSink, sink_for_environment
from graphchat.host import open_host
from graphchat.plans.listing import (
    CONTROL_SOURCE,
    control_entries,
    control_show,
    is_control_step,
    read_only,
    source_of,
    tool_listing,
)
from graphchat.shapes import ShapeStore
from graphchat.workspace import load_settings

NO_TOOLS = "no tools (configure MCP servers in catalog/servers.yaml)"


def _catalog(settings: Any) -> Any:
    """The catalog of `tools list` / `tools show`, from the one host (its warnings said there);
    nothing recorded, nothing started."""
    return open_host(settings, record_shapes=False).catalog


def _warn(message: str) -> None:
    warn(message)


async def _fill_cache(catalog: Any, settings: Any, *, refresh: bool) -> None:
    """Start the MCP servers whose tools are unknown (all with --refresh), concurrently."""
    names = catalog.groups() if refresh else catalog.unprepared()
    if not names:
        return

    note(f"starting {len(names)} MCP server(s) to read their tools: {', '.join(names)}")
    started = time.time()
    errors = await catalog.prepare(names, refresh=refresh)
    for server, error in errors.items():
        # Point at the log only when this start wrote to it (not for an unset ${VAR}).
        log = fresh_log(settings, server, started)
        _warn(f"MCP server '{server}': {error}" + (f" (log: {log})" if log else ""))


def _collisions(catalog: Any) -> dict[str, list[str]]:
    """catalog name -> the real `server/tool` pairs that wanted it."""
    return {name: [f"{s}/{t}" for s, t in pairs] for name, pairs in catalog.collisions}


def _first_line(text: str, limit: int = 90) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def run_list(args: argparse.Namespace) -> int:
    settings = _settings(args)
    catalog = _catalog(settings)
    said = set(catalog.warnings)  # the host said these
    remembered = {} if args.refresh else catalog.failed()  # not retried: said, not started

    async def main() -> None:
        try:
            await _fill_cache(catalog, settings, refresh=args.refresh)
        finally:
            await catalog.aclose()

    if (args.refresh and catalog.groups()) or catalog.unprepared():
        import asyncio

        asyncio.run(main())  # only then: a warm cache starts nothing and needs no event loop
    for server, error in remembered.items():
        _warn(
            f"MCP server '{server}': its last start failed ({error}); not retried until its "
            "configuration changes or `graphchat tools list --refresh`"
        )
    collisions = _collisions(catalog)
    for name, pairs in collisions.items():
        _warn(f"tool name {name} is wanted by {' and '.join(pairs)}; each got a distinct name")
    for message in catalog.warnings:  # what the servers just started added
        if message not in said:
            _warn(message)

    specs = catalog.list()
    if args.json:
        envelope = tool_listing(specs, collisions)
        if not specs:
            envelope["note"] = NO_TOOLS
        print_json(envelope)  # graph's {tools, count, sources}: the control steps included
        return 0
    rows = [
        {"name": s.name, "source": s.source, "family": s.family, "description": s.description} for s in specs
    ]
    if not rows:
        print(NO_TOOLS, file=sys.stderr)

    rows += [  # step vocabulary, listed as graph lists it: never offered to a model, never callable
        {"name": c["name"], "source": CONTROL_SOURCE, "family": "control", "description": c["description"]}
        for c in control_entries()
    ]
    width = min(max(len(r["name"]) for r in rows), 64)
    src_width = min(max(len(r["source"]) for r in rows), 24)

    lines = [
        safe(
            f"{r['name']:<{width}}  {r['source']:<{src_width}}  {r['family']:<11}  {_first_line(r['description'])}",
            newlines=False,
        )
        for r in rows
    ]
    if sys.stdout.isatty():  # a terminal: one row a tool, cut to its width
        import shutil

        columns = shutil.get_terminal_size((100, 24)).columns
        lines = [line if len(line) <= columns else line[: columns - 1] + "…" for line in lines]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


async def _afind(catalog: Any, settings: Any, name: str) -> Any:
    """The spec of `name`, starting uncached MCP servers if that is the only way to know it."""
    spec = catalog.get(name)
    if spec is not None:
        return spec
    if catalog.unprepared():
        await _fill_cache(catalog, settings, refresh=False)
        spec = catalog.get(name)
        if spec is not None:
            return spec
    server = next((g for g in catalog.groups() if name.startswith(g + "__")), None)
    if server is not None and catalog.unavailable(name) is not None:
        # a server whose last start failed: asked for by name, it is tried again (the cause
        # may be fixed by now); still failing, the error says why, not "unknown tool"
        await catalog.prepare([server])
        spec = catalog.get(name)
        if spec is not None:
            return spec
        raise GraphchatError(catalog.unavailable(name) or f"unknown tool: {name}", 1)

    close = similar_tools(name, [s.name for s in catalog.list()])
    hint = f"did you mean: {', '.join(close)}?" if close else "see `graphchat tools list`"
    raise GraphchatError(f"unknown tool: {name}", 1, hint=hint)


def _find(catalog: Any, settings: Any, name: str) -> Any:
    """`_afind` for commands that call nothing afterwards (servers it starts are stopped)."""
    import asyncio

    spec = catalog.get(name)
    if spec is not None:
        return spec

    async def main() -> Any:
        try:
            return await _afind(catalog, settings, name)
        finally:
            await catalog.aclose()

    return asyncio.run(main())


def describe_tool(catalog: Any, spec: Any, settings_dir: Any) -> dict[str, Any]:
    """Everything `tools show` says about a tool, as JSON."""
    # graph's keys, every one always present (null when absent; `outputSchema` and
    # `outputExample` are what the tool declares), then graphchat's beside them.
    doc: dict[str, Any] = {
        "name": spec.name,
        "source": source_of(spec.name),
        "description": spec.description,
        "readOnly": read_only(spec),
        "inputSchema": spec.input_schema,
        "outputSchema": spec.output_schema,
        "outputExample": spec.meta.get("output_example"),
        "origin": spec.source,
        "family": spec.family,
        "input_schema": spec.input_schema,
    }
    if spec.meta.get("server"):
        doc["server"] = spec.meta["server"]
        doc["tool"] = spec.meta["tool"]
        if spec.meta.get("annotations"):
            doc["annotations"] = spec.meta["annotations"]
    shape = ShapeStore(settings_dir / "shapes").get(spec.name)
    if spec.output_schema:
        doc["output_schema"] = spec.output_schema
        doc["output_schema_source"] = "declared"
        if shape and isinstance(shape.get("observed_schema"), dict):
            # The declared schema wins, but what the tool really returned is worth seeing too.
            doc["observed_schema"] = shape["observed_schema"]
            doc["observed_calls"] = shape.get("seen_count", 0)
    elif shape and shape.get("schema"):
        doc["output_schema"] = shape["schema"]
        doc["output_schema_source"] = f"observed ({shape.get('seen_count', 0)} calls)"
    if "output_example" in spec.meta:
        doc["example"] = spec.meta["output_example"]
    elif shape and "example" in shape:
        doc["example"] = shape["example"]
    return doc


def run_show(args: argparse.Namespace) -> int:
    import json

    settings = _settings(args)
    catalog = _catalog(settings)

    if is_control_step(args.name):
        doc = control_show(args.name)
        if args.json:
            print_json(doc)
            return 0
        text = [f"{doc['name']}  (control step: evaluated by the plan executor, not callable)", ""]
        text += [doc["description"], "", "input fields:", json.dumps(doc["inputSchema"], indent=2)]
        sys.stdout.write("\n".join(text) + "\n")
        return 0
    spec = _find(catalog, settings, args.name)
    settings_dir = settings.catalog_dir
    doc = describe_tool(catalog, spec, settings_dir)
    if args.json:
        print_json(doc)
        return 0
    out = [f"{doc['name']}  ({doc['origin']}, {doc['family']})"]
    if doc.get("server"):
        out.append(f"MCP tool: {doc['tool']} on server {doc['server']}")
    if doc["description"]:
        out += ["", doc["description"].strip()]
    out += ["", "input schema:", json.dumps(doc["input_schema"], indent=2)]
    if "output_schema" in doc:
        out += [
            "",
            f"output schema ({doc['output_schema_source']}):",
            json.dumps(doc["output_schema"], indent=2),
        ]
    else:
        out += ["", "output schema: unknown yet (call the tool once: graphchat tools call NAME …)"]
    if "observed_schema" in doc:
        out += [
            "",
            f"observed output shape ({doc['observed_calls']} calls):",
            json.dumps(doc["observed_schema"], indent=2),
        ]
    if "example" in doc:
        out += ["", "example:", json.dumps(doc["example"], indent=2, ensure_ascii=False)]

    sys.stdout.write(safe("\n".join(out)) + "\n")  # names and descriptions come from servers
    return 0


def _settings(args: argparse.Namespace) -> Any:
    return load_settings(getattr(args, "home", None))


def _refuse_control_step(name: str) -> None:
    if is_control_step(name):  # listed like a tool, so a caller will try: say what it is
        raise GraphchatError(
            f"'{name}' is a control step, not a callable tool: the plan executor evaluates it",
            1,
            hint=f"put it in a plan and run the plan; `graphchat tools show {name}` describes its input",
        )


def run_test(args: argparse.Namespace) -> int:
    """graph's `tools test`: the call completed, so a tool that reports an error still exits 0;
    `isError` carries the difference to a machine caller."""
    result = _invoke(args)
    if args.json:
        print_json({"tool": args.name, "isError": result.is_error, "result": result.value})
        return 0
    if result.is_error:
        print("tool returned an error:", file=sys.stderr)
    if isinstance(result.value, str):
        text = safe(result.value) if sys.stdout.isatty() else result.value  # a pipe: byte-exact
        sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))
    else:
        print_json(result.value)
    return 0


def _invoke(args: argparse.Namespace) -> Any:
    """Run the one call of `tools call` / `tools test` and return its ToolResult."""
    import asyncio

    _refuse_control_step(args.name)

    arguments = apply_input_flags(read_document_arg(args.input, what="tool input"), args.pairs)
    settings = load_settings(getattr(args, "home", None))

    events = sink_for_environment()
    if isinstance(events, TerminalSink):
        events.error_details = False  # the error line below says it in full
    host = open_host(settings, events=events, record_shapes=True)
    ctx = host.context(surface="cli", assume_yes=args.yes)

    async def main() -> Any:
        try:
            spec = await _afind(host.catalog, settings, args.name)
            return await host.catalog.call(spec.name, arguments if arguments is not None else {}, ctx)
        finally:
            await host.aclose()

    return asyncio.run(main())


def run_call(args: argparse.Namespace) -> int:
    result = _invoke(args)
    if args.json:
        print_json({"value": result.value, "is_error": result.is_error, "ms": round(result.ms, 1)})
        return 1 if result.is_error else 0
    if result.is_error:
        report_error(result.error_message)  # the `✗ tool` line left it out: said once, in full
        return 1
    if isinstance(result.value, str):
        text = safe(result.value) if sys.stdout.isatty() else result.value  # a pipe: byte-exact
        sys.stdout.write(text + ("" if text.endswith("\n") else "\n"))
    else:
        print_json(result.value)
    return 0
