"""Catalog-level validation: does every tool a plan names resolve here, and does the data flow
(`graphchat.plans.check`: every path, argument and default against what is known)?

Runs after the loader (structure is already sound). It never starts an MCP server: a
`server__tool` is checked against the server's cached tool list when there is one, else at
the server level only (the server must be configured). Problems read
`step <id>: <field>: <what is wrong>`; body steps are labelled `E1/do`, `E1/then/E10`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import unknown_tool
from graphchat.plans.check import ERROR, EVIDENCE, check_plan
from graphchat.plans.model import Plan, Step
from graphchat.plans.splice_types import Shapes
from graphchat.plans.steps import CONTROL
from graphchat.yamlfile import parse_yaml

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog


@dataclass
class Servers:
    """What the workspace knows of MCP servers without starting any."""

    configured: set[str] = field(default_factory=set)
    # server -> catalog names of its tools, for servers whose tool list is cached
    cached: dict[str, set[str]] = field(default_factory=dict)


def known_servers(catalog: Catalog, servers_file: Path | None = None) -> Servers:
    """Configured servers (from the MCP source, else catalog/servers.yaml) and cached tool lists."""
    info = Servers()
    for spec in catalog.list():
        if spec.source.startswith("mcp:"):
            server = spec.source[4:]
            info.cached.setdefault(server, set()).add(spec.name)
            info.configured.add(server)
    for source in catalog.sources:
        names = getattr(source, "server_names", None)
        if names is None:
            continue
        try:
            found = names() if callable(names) else names
            info.configured |= {str(n) for n in found}
        except Exception:  # a broken servers file is reported by its owner, not here
            pass
    if servers_file is not None and servers_file.is_file():
        info.configured |= _servers_in_file(servers_file)
    return info


def _servers_in_file(path: Path) -> set[str]:
    import yaml

    try:
        _, data = parse_yaml(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return set()
    servers = data.get("mcpServers") if isinstance(data, Mapping) else None
    return {str(k) for k in servers} if isinstance(servers, Mapping) else set()


def step_labels(plan: Plan) -> list[tuple[str, Step]]:
    """(label, step) for every step, body steps included, in file order."""
    out: list[tuple[str, Step]] = []

    def walk_top() -> None:
        for step in plan.steps:
            out.append((step.label, step))
            for name, body in step.bodies.items():
                for sub in body.steps:
                    label = f"{step.label}/{name}" if body.single else f"{step.label}/{name}/{sub.label}"
                    out.append((label, sub))

    walk_top()  # bodies never nest (decide/map/reduce are not allowed in a body)
    return out


def validate_against_catalog(
    plan: Plan,
    catalog: Catalog,
    *,
    servers: Servers | None = None,
    plans: Mapping[str, Plan] | None = None,
    soft_required_servers: bool = False,
    shapes: Shapes | None = None,
    at_run: bool = False,
    notes: list[str] | None = None,
    skip: Iterable[str] = (),
) -> list[str]:
    """Every tool-resolution problem of a loaded plan (empty = runnable here), then every
    data-flow problem (`graphchat.plans.check`; `shapes`: the shape cache's documents).

    A finding that depends on evidence (a learned shape, an open declared schema) is a problem
    for authoring and, `at_run` (before `plan run`'s first step), a note; notes go to `notes`
    when given. `skip`: labels of steps whose tool name the loader already refused.

    `plans` is the workspace's plan index (a `plan__x` that loads is accepted even when the
    catalog hides it, with the reason). `soft_required_servers`: when validating a plan *file*,
    servers declared in `requires_servers` but not configured are not problems (see
    `Plan.missing_servers` for the note); by name they are.
    """
    info = servers if servers is not None else known_servers(catalog)
    problems: list[str] = []
    missing = plan.missing_servers(info.configured)
    if missing and not soft_required_servers:
        problems.append(
            f"requires_servers: MCP server(s) {', '.join(repr(s) for s in missing)} not configured "
            "(add them to catalog/servers.yaml)"
        )
    excused = set(missing) if soft_required_servers else set()
    labelled = step_labels(plan)
    skipped = set(skip)
    settings = next(
        (getattr(src, "settings", None) for src in catalog.sources if hasattr(src, "settings")), None
    )
    for label, step in labelled:
        tool = step.tool_name
        if label in skipped or not tool:
            continue
        problem = _model_problem(step.input.get("model"), settings)
        if problem:
            problems.append(f"step {label}: model: {problem}")
        control = CONTROL.get(tool)
        if control is not None:
            for pattern in control.tools(step) or ():
                problem = _pattern_problem(pattern, catalog, info, excused)
                if problem:
                    problems.append(f"step {label}: input.tools: {problem}")
            continue
        problem = tool_problem(tool, catalog, info, plans=plans, excused=excused, self_id=plan.identifier)
        if problem:
            problems.append(f"step {label}: tool_name: {problem}")

    for finding in check_plan(plan, catalog, shapes):
        if finding.tier == ERROR or (finding.tier == EVIDENCE and not at_run):
            problems.append(finding.text)
        elif notes is not None:
            notes.append(finding.text)
    return problems


def _model_problem(name: Any, settings: Any) -> str | None:
    """A step's literal `model:` that names no role, named model (models.named) nor litellm
    `provider/model` here; a template is known only at run time."""
    if not isinstance(name, str) or not name or "{{" in name or settings is None:
        return None
    problem: str | None = settings.model_name_problem(name)
    return problem


def partial_problems(
    err: Any,
    catalog: Catalog,
    *,
    servers: Servers | None = None,
    plans: Mapping[str, Plan] | None = None,
    shapes: Shapes | None = None,
) -> list[str]:
    """The problems after loading (tools, data flow) of what did load of a plan that does not
    load (`PlanLoadError.partial`), so one pass reports every problem of every tier."""
    plan = getattr(err, "partial", None)
    if plan is None or not plan.steps:
        return []
    try:
        return validate_against_catalog(
            plan,
            catalog,
            servers=servers,
            plans=plans,
            soft_required_servers=True,
            shapes=shapes,
            skip=getattr(err, "refused", ()),
        )
    except Exception:  # a half-loaded plan must never take the report of its problems down
        return []


def tool_problem(
    tool: str,
    catalog: Catalog,
    info: Servers,
    *,
    plans: Mapping[str, Plan] | None = None,
    excused: Iterable[str] = (),
    self_id: str | None = None,
) -> str | None:
    """Why `tool` does not resolve, or None."""
    spec = catalog.get(tool)
    if spec is not None:
        return None
    if tool == "ask_user":
        return "`ask_user` is not allowed in plans: use an `ask` step"
    if tool == "plan_and_execute":
        return "`plan_and_execute` (a core tool) is not in this catalog"
    prefix, _, rest = tool.partition("__")
    if not rest:  # a bare name: tools are `server__tool`
        return f"{unknown_tool(tool, (s.name for s in catalog.list()))}; tool names are server__tool"
    if prefix == "plan":
        known = plans or {}
        if rest in known or rest == self_id:
            target = known.get(rest)
            if target is not None and target.requires_servers:
                gone = target.missing_servers(info.configured)
                if gone:
                    return f"plan '{rest}' needs MCP server(s) {', '.join(gone)}, which are not configured"
            return None
        names = ", ".join(sorted(known)) or "none"
        return f"unknown plan tool {tool!r} (plans here: {names})"
    if prefix == "builtin":
        builtins = sorted(s.name for s in catalog.list() if s.name.startswith("builtin__"))
        return f"unknown builtin tool {tool!r} (builtins: {', '.join(builtins) or 'none'})"
    if prefix in excused:
        return None
    if prefix not in info.configured:
        return f"MCP server {prefix!r} is not configured (catalog/servers.yaml), so {tool!r} cannot resolve"
    cached = info.cached.get(prefix)
    if cached:
        import difflib

        near = difflib.get_close_matches(tool, sorted(cached), n=1, cutoff=0.6)
        hint = f": did you mean {near[0]!r}?" if near else ""
        close = sorted(cached)[:12]
        return f"server {prefix!r} has no tool {tool!r}{hint} (its tools: {', '.join(close)})"
    return None  # configured, tool list not cached: the tool itself is checked at dispatch


def _pattern_problem(pattern: str, catalog: Catalog, info: Servers, excused: set[str]) -> str | None:
    names = [s.name for s in catalog.list()]
    if any(fnmatchcase(name, pattern) for name in names):
        return None
    if "*" not in pattern:
        return tool_problem(pattern, catalog, info, excused=excused)
    prefix, sep, _ = pattern.partition("__")
    if sep and "*" not in prefix and prefix not in ("plan", "builtin"):
        if prefix in excused:
            return None
        if prefix not in info.configured:
            return f"pattern {pattern!r} needs MCP server {prefix!r}, which is not configured"
        if prefix not in info.cached:
            return None  # resolved at the server level; the list is not cached
        return f"pattern {pattern!r} matches none of server {prefix!r}'s tools"
    if any(server not in info.cached for server in info.configured - excused):
        return None  # an uncached server may hold a match
    return f"pattern {pattern!r} matches no tool in the catalog"
