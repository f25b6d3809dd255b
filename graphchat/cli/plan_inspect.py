"""`graphchat plan list|show|validate`: look at plans without running them.

Cheap on purpose (`plan validate` ≤ 0.25 s): no model library, no MCP SDK, no server start.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.cli.output import print_json, warn
from graphchat.errors import GraphchatError
from graphchat.host import open_host
from graphchat.plans.discovery import (
    _looks_like_path,
    discover,
    find_plan,
    load_cached,
    located_problems,
    relative_problems,
    summary,
)
from graphchat.plans.loader import locate, plan_to_dict
from graphchat.plans.model import PlanLoadError, plan_identifier
from graphchat.plans.picture import mermaid, tree
from graphchat.plans.plan_tools import configured_servers
from graphchat.plans.splice_types import learned_shapes
from graphchat.plans.validate import known_servers, partial_problems, step_labels, validate_against_catalog
from graphchat.workspace import load_settings
from graphchat.yamlfile import yaml12_dumper

# --- helpers -----------------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Any:
    return load_settings(getattr(args, "home", None))


def _catalog(settings: Any) -> Any:
    """The catalog for resolution checks, from the one host (its warnings said there): cheap
    (no server start, nothing recorded)."""
    return open_host(settings, record_shapes=False).catalog


def _plan_summary(plan: Any) -> dict[str, Any]:
    return {
        "identifier": plan.identifier,
        "name": plan.name,
        "description": plan.description,
        "finish": plan.finish,
        "tool_name": plan.tool_name,
        "path": str(plan.path) if plan.path else None,
        "requires_servers": list(plan.requires_servers),
    }


def input_schema_of(plan: Any) -> dict[str, Any]:
    return plan.input_schema if plan.input_schema is not None else {"type": "object", "properties": {}}


def _one_line(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --- list --------------------------------------------------------------------------------------


def _columns() -> int | None:
    """The terminal's width when stdout is one (rows are fitted to it), else None (no cut)."""
    if not sys.stdout.isatty():
        return None
    import shutil

    return shutil.get_terminal_size((100, 24)).columns


def run_list(args: argparse.Namespace) -> int:
    settings = _settings(args)
    index = discover(settings.plans_dir)
    plans = sorted(index.plans.values(), key=lambda p: p.identifier)
    failed = [
        {"path": str(path), "problems": relative_problems(err)} for path, err in sorted(index.errors.items())
    ]
    duplicates = [
        {"path": str(path), "identifier": ident} for path, ident in sorted(index.duplicates.items())
    ]
    if args.json:
        # graph's envelope (plan_edit.rs `list_as_json`): `plans` (the catalog), `skipped`
        # ({path, reason}), `hidden` ({identifier, missingServers}); `count` as graph's other
        # listings; `failed` and `duplicates` are graphchat's additions.

        configured = configured_servers(settings)
        hidden = []
        shown = []
        for plan in plans:
            gone = plan.missing_servers(configured)
            if gone:
                hidden.append({"identifier": plan.identifier, "missingServers": gone})
            else:
                shown.append({**_plan_summary(plan), "steps": len(plan.steps)})
        skipped = [
            {"path": str(path), "reason": summary(err)} for path, err in sorted(index.errors.items())
        ] + [
            {
                "path": d["path"],
                "reason": f"duplicate plan identifier '{d['identifier']}' — the earlier file wins",
            }
            for d in duplicates
        ]
        print_json(
            {
                "plans": shown,
                "skipped": skipped,
                "hidden": hidden,
                "count": len(shown),
                "failed": failed,
                "duplicates": duplicates,
            }
        )
        return 0
    if not plans and not failed:
        sys.stderr.write(f"no plans in {settings.plans_dir}\n")
        return 0
    width = max((len(p.identifier) for p in plans), default=0)
    columns = _columns()
    for plan in plans:
        # the file only when its name is not the identifier (the folder is plans/, always)
        where = "" if plan.path is None or plan.path.stem == plan.identifier else f"  ({plan.path.name})"
        line = (
            f"{plan.identifier:<{width}}  {plan.finish:<6}  {plan.name} — {_one_line(plan.description, 200)}"
        )
        if columns is not None and len(line) + len(where) > columns:  # a terminal: one row a plan
            line = line[: max(columns - len(where) - 1, width + 10)] + "…"
        sys.stdout.write(line + where + "\n")
    # Skipped files are warnings (stderr): stdout stays the list of plans a script can read.
    for entry in failed:
        count = len(entry["problems"])
        sys.stderr.write(
            f"✗ {entry['path']}: does not load ({count} problem{'s' if count != 1 else ''}): "
            f"{entry['problems'][0] if entry['problems'] else ''}\n"
        )
    for dup in duplicates:
        sys.stderr.write(f"✗ {dup['path']}: skipped, duplicate identifier '{dup['identifier']}'\n")
    return 0


# --- show --------------------------------------------------------------------------------------


def run_show(args: argparse.Namespace) -> int:
    settings = _settings(args)
    plan = find_plan(args.plan, settings.plans_dir, warn=warn)
    if getattr(args, "tree", False) or getattr(args, "mermaid", False):
        sys.stdout.write(mermaid(plan) if args.mermaid else "\n".join(tree(plan)) + "\n")
        return 0
    data = plan_to_dict(plan)
    if args.json:
        print_json(
            {
                **_plan_summary(plan),
                "input_schema": input_schema_of(plan),
                "plan": data,
            }
        )
        return 0
    import yaml

    out = sys.stdout
    out.write(f"# {plan.tool_name} — {plan.name} ({plan.finish} finish)\n")
    if plan.path:
        out.write(f"# {plan.path}\n")
    out.write(yaml.dump(data, Dumper=yaml12_dumper(), sort_keys=False, allow_unicode=True, width=100))
    if plan.input_schema is None:
        out.write("# input_schema (default): {type: object, properties: {}}\n")
    return 0


# --- validate ----------------------------------------------------------------------------------


def _validate_one(
    plan: Any,
    catalog: Any,
    servers: Any,
    plans: Any,
    *,
    by_path: bool,
    shapes: Any = None,
    strict: bool = False,
) -> tuple[list[str], list[str]]:
    found: list[str] = []  # the data-flow checker's notes
    problems = validate_against_catalog(
        plan, catalog, servers=servers, plans=plans, soft_required_servers=by_path, shapes=shapes, notes=found
    )
    if strict:  # --strict: a note is a failure
        problems += found
        found = []
    elif found and plan.path is not None:
        found = locate(plan.path, found)
    notes = list(plan.warnings) + found  # fields the loader ignored, as graph does: not fatal
    if by_path:
        gone = plan.missing_servers(servers.configured)
        if gone:
            notes.append(
                f"requires_servers: {', '.join(gone)} not configured here; the plan is hidden from the catalog"
            )
    return problems, notes


def run_validate(args: argparse.Namespace) -> int:
    settings = _settings(args)
    index = discover(settings.plans_dir)
    reports: list[dict[str, Any]] = []
    targets: list[tuple[str, Any, PlanLoadError | None, bool]] = []  # (path, plan, error, by_path)
    if args.plan is None:
        for path, err in sorted(index.errors.items()):
            targets.append((str(path), None, err, False))
        for plan in index.plans.values():
            targets.append((str(plan.path), plan, None, False))
        for path, ident in sorted(index.duplicates.items()):
            reports.append(
                {
                    "plan": ident,
                    "steps": None,
                    "path": str(path),
                    "identifier": ident,
                    "ok": False,
                    "problems": [
                        f"identifier: duplicate '{ident}' (first defined in {index.plans[ident].path}); this file is skipped"
                    ],
                    "notes": [],
                }
            )
        targets.sort(key=lambda t: t[0])
    elif _looks_like_path(args.plan):
        from pathlib import Path

        path = Path(args.plan).expanduser()
        if not path.is_file():
            raise GraphchatError(f"no plan file {args.plan}")
        try:
            targets.append((str(path), load_cached(path), None, True))
        except PlanLoadError as err:
            targets.append((str(path), None, err, True))
    else:
        name = args.plan
        ident = name if name in index.plans else plan_identifier(name) or name
        broken = [(p, e) for p, e in index.errors.items() if p.stem == ident or index.raw_ids.get(p) == ident]
        if ident in index.plans:
            plan = index.plans[ident]
            targets.append((str(plan.path), plan, None, False))
        elif broken:
            targets.append((str(broken[0][0]), None, broken[0][1], False))
        else:
            index.get(name)  # raises "unknown plan" listing the known ones
    catalog = servers = None
    start_errors: dict[str, str] = {}
    if any(plan is not None for _, plan, _, _ in targets):
        catalog = _catalog(settings)
        if not args.offline:
            wanted = sorted(
                {p for _, plan, _, _ in targets if plan is not None for p in _server_prefixes(plan)}
                & set(catalog.unprepared())
            )
            if wanted:
                start_errors = _read_tool_lists(catalog, wanted, quiet=args.json)
        servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")
    shapes = learned_shapes(settings.catalog_dir / "shapes")
    for where, plan, failure, by_path in targets:
        if failure is not None:
            raw_id = index.raw_ids.get(_as_path(where))
            later: list[str] = []  # the tiers after loading, over what did load
            if failure.partial is not None:
                if catalog is None:
                    catalog = _catalog(settings)
                    servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")
                later = partial_problems(failure, catalog, servers=servers, plans=index.plans, shapes=shapes)
            reports.append(
                {
                    "plan": raw_id or _as_path(where).stem,
                    "steps": None,  # the file does not load: its steps are not known
                    "ok": False,
                    "problems": relative_problems(failure) + later,
                    "notes": [],
                    "path": where,
                    "identifier": raw_id,
                    # text output: `<file>:<line>: …`
                    "shown": located_problems(failure) + locate(where, later),
                }
            )
            continue
        assert servers is not None  # read above whenever a target has a plan
        problems, notes = _validate_one(
            plan,
            catalog,
            servers,
            index.plans,
            by_path=by_path,
            shapes=shapes,
            strict=args.strict,
        )
        for server in sorted(_server_prefixes(plan)):
            if server not in servers.configured or servers.cached.get(server):
                continue
            cannot = catalog.start_problem(server) if catalog is not None else None
            if cannot is not None:  # the server, why it cannot start, its log
                unchecked = f"{cannot}; the plan's tool names of it could not be checked"
            else:
                why = (
                    f"its start failed: {start_errors[server]}"
                    if server in start_errors
                    else (
                        "its tool list is not known (--offline)"
                        if args.offline
                        else "its tool list is not known"
                    )
                )
                unchecked = f"tool names of MCP server '{server}' could not be checked: {why}"
            (problems if args.strict else notes).append(unchecked)
        reports.append(
            {
                "plan": plan.identifier,
                "steps": len(plan.steps),
                "ok": not problems,
                "problems": problems,
                "notes": notes,
                "path": where,
                "identifier": plan.identifier,
                "shown": locate(where, problems),
            }
        )
    ok = all(r["ok"] for r in reports)
    if args.json:
        # graph's envelope (plan_cmd.rs `validate`): {plan, steps, ok, problems, notes} for one
        # plan; over every plan {plans: [that envelope…], ok}. `path`/`identifier` are additions.
        for report in reports:
            report.pop("shown", None)
        if args.plan is not None and len(reports) == 1:
            print_json(reports[0])
        else:
            print_json({"plans": reports, "ok": ok})
        return 0 if ok else 1
    if not reports:
        sys.stderr.write(f"no plans in {settings.plans_dir}\n")
        return 0
    err_out = sys.stderr
    for report in reports:
        label = f"'{report['identifier']}' ({report['path']})" if report["identifier"] else report["path"]
        if report["ok"]:
            err_out.write(f"✓ plan {label} is valid\n")
        else:
            count = len(report["problems"])
            err_out.write(f"✗ plan {label}: {count} problem{'s' if count != 1 else ''}\n")
            for problem in report.pop("shown", None) or report["problems"]:
                err_out.write(f"{problem}\n")
        for note in report["notes"]:
            err_out.write(f"note: {note}\n")
    err_out.flush()
    return 0 if ok else 1


def _server_prefixes(plan: Any) -> set[str]:
    """The MCP servers a plan's tool steps name (`server__tool`), bodies included."""
    out = set()
    for _, step in step_labels(plan):
        prefix, sep, _ = step.tool_name.partition("__")
        if sep and prefix not in ("plan", "builtin", "user"):
            out.add(prefix)
    return out


def _read_tool_lists(catalog: Any, servers: list[str], *, quiet: bool) -> dict[str, str]:
    """Start the servers whose tool lists were never cached (as `tools list` does), then stop them."""
    import asyncio

    if not quiet:
        sys.stderr.write(f"starting {len(servers)} MCP server(s) to read their tools: {', '.join(servers)}\n")

    async def read() -> dict[str, str]:
        try:
            return await catalog.prepare(servers)
        finally:
            await catalog.aclose()

    return asyncio.run(read())


def _as_path(text: str) -> Any:
    from pathlib import Path

    return Path(text)
