"""A plan's picture: its step tree for the terminal (graph's glyphs) and a Mermaid flowchart
of its data flow. Pure functions of a loaded plan; `plan show --tree` / `--mermaid` print them.
"""

from __future__ import annotations

import re
from typing import Any

from graphchat.events import EventSink
from graphchat.plans.model import Body, Plan, Step

ICONS = {
    "decide": "⑂",
    "filter": "▽",
    "map": "⟳",
    "reduce": "∑",
    "exit": "⎋",
    "agent": "✻",
    "ask": "?",
    "plan_and_execute": "ƒ",
}
_ROOT = re.compile(r"\{\{[#^/&]?\s*([A-Za-z_][A-Za-z0-9_]*)(\.[A-Za-z0-9_-]+)?")
_LOCAL = {"item", "index", "accumulator", "length"}


def icon(tool: str) -> str | None:
    if tool.startswith("plan__"):
        return "ƒ"
    return ICONS.get(tool)


def reads(value: Any, known: set[str] | None = None) -> list[str]:
    """What a value's templates read: `input.x` for inputs, step ids for results (in order);
    with `known` (the plan's step ids), names local to a section (`{{#E1.items}}{{name}}`) drop out."""
    found: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, str):
            for match in _ROOT.finditer(item):
                root, field = match.group(1), match.group(2)
                name = f"input{field}" if root == "input" and field else root
                local = root in _LOCAL or (known is not None and root != "input" and root not in known)
                if not local and name not in found:
                    found.append(name)
        elif isinstance(item, dict):
            for sub in item.values():
                walk(sub)
        elif isinstance(item, list):
            for sub in item:
                walk(sub)

    walk(value)
    return found


def _label(step: Step, known: set[str]) -> str:
    head = step.id or ""
    what = step.tool_name
    sources = reads(step.input, known)
    text = f"{head}  {what}" if head else what
    return f"{text}  ← {', '.join(sources)}" if sources else text


class StepTimes(EventSink):
    """Passes a run's events on and keeps each top-level step's status and time (`plan run --tree`)."""

    def __init__(self, inner: EventSink) -> None:
        self.inner = inner
        self.status: dict[str, str] = {}

    def emit(self, event: str, **fields: Any) -> None:
        if event == "step_started":
            self.status[fields["step"]] = "… started"
        elif event == "step_finished":
            mark = "✗" if fields.get("is_error") else "✓"
            self.status[fields["step"]] = f"{mark} {_duration(float(fields.get('ms') or 0))}"
        self.inner.emit(event, **fields)

    def waiting(self, what: str | None) -> None:
        self.inner.waiting(what)

    def __getattr__(self, name: str) -> Any:  # the inner sink's own helpers (warning, usage, …)
        return getattr(self.inner, name)


def _duration(ms: float) -> str:
    return f"{ms:.0f}ms" if ms < 1000 else f"{ms / 1000:.1f}s"


def tree(plan: Plan, status: dict[str, str] | None = None) -> list[str]:
    """The step tree, `tree`-style, control steps with their icon in the junction; with
    `status` (from StepTimes), each top-level step's outcome and time, `·` for one not run."""
    lines = [f"{plan.tool_name} — {plan.name} ({plan.finish} finish)"]
    known = {s.id for s in plan.all_steps() if s.id}
    finish = _finish_row(plan, known)
    rows: list[tuple[Step | None, str]] = [(s, "") for s in plan.steps]
    if finish is not None:
        rows.append((None, finish))
    for index, (step, text) in enumerate(rows):
        last = index == len(rows) - 1
        elbow = "└─" if last else "├─"
        if step is None:
            lines.append(f"{elbow}─ {text}")
            continue
        glyph = icon(step.tool_name)
        shown = f"{elbow}{glyph or '─'} {_label(step, known)}"
        if status is not None:
            shown += f"   {status.get(step.label, '· not run')}"
        lines.append(shown)
        lines.extend(_bodies(step, "   " if last else "│  ", known))
    return lines


def _bodies(step: Step, indent: str, known: set[str]) -> list[str]:
    out: list[str] = []
    items = list(step.bodies.items())
    for index, (name, body) in enumerate(items):
        last = index == len(items) - 1
        if step.tool_name == "decide":
            elbow = "└──" if last else "├──"
            if body.single:
                out.append(f"{indent}{elbow} {name}: {_label(body.steps[0], known)}")
                continue
            out.append(f"{indent}{elbow} {name}")
            out.extend(_steps(body, indent + ("    " if last else "│   "), known))
        else:
            out.extend(_steps(body, indent, known))
    return out


def _steps(body: Body, indent: str, known: set[str]) -> list[str]:
    out: list[str] = []
    for index, sub in enumerate(body.steps):
        last = index == len(body.steps) - 1
        elbow = "└─" if last else "├─"
        out.append(f"{indent}{elbow}{icon(sub.tool_name) or '─'} {_label(sub, known)}")
        out.extend(_bodies(sub, indent + ("   " if last else "│  "), known))
    return out


def _finish_row(plan: Plan, known: set[str]) -> str | None:
    if plan.solver is not None:
        sources = reads([plan.solver.query_to_answer, plan.solver.data], known)
        return "solver" + (f"  ← {', '.join(sources)}" if sources else "")
    if plan.output is not None:
        sources = reads(plan.output, known)
        return "output" + (f"  ← {', '.join(sources)}" if sources else "")
    return None


def _body_reads(step: Step) -> list[str]:
    found = reads(step.input)
    for body in step.bodies.values():
        for sub in body.steps:
            found += [r for r in _body_reads(sub) if r not in found]
    return found


def mermaid(plan: Plan) -> str:
    """A Mermaid flowchart of which step reads which (bodies folded into their step)."""
    out = ["flowchart TD"]
    ids = {step.label for step in plan.steps}
    body_ids = {
        sub.id for step in plan.steps for body in step.bodies.values() for sub in body.steps if sub.id
    }
    inputs: list[str] = []
    edges: list[str] = []
    for step in plan.steps:
        node = _node(step.label)
        text = f"{step.label}<br/>{step.tool_name}"
        out.append(f'  {node}{{"{text}"}}' if step.tool_name == "decide" else f'  {node}["{text}"]')
        for source in _body_reads(step):
            if source.startswith("input"):
                if source not in inputs:
                    inputs.append(source)
                edges.append(f"  {_node(source)} --> {node}")
            elif source in ids and source != step.label:
                edges.append(f"  {_node(source)} --> {node}")
            elif source in body_ids:
                continue
    if plan.finish != "silent":
        sources = (
            reads([plan.solver.query_to_answer, plan.solver.data])
            if plan.solver is not None
            else reads(plan.output)
        )
        out.append(f"  finish([{plan.finish}])")
        for source in sources:
            if source.startswith("input"):
                if source not in inputs:
                    inputs.append(source)
            elif source not in ids:
                continue
            edges.append(f"  {_node(source)} --> finish")
    for source in inputs:
        out.append(f"  {_node(source)}[/{source}/]")
    seen: set[str] = set()
    for edge in edges:
        if edge not in seen:
            seen.add(edge)
            out.append(edge)
    return "\n".join(out) + "\n"


def _node(name: str) -> str:
    return "n_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
