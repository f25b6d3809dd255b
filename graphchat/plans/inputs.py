"""Input keys a plan's `input_schema` does not name, with the closest one it does; and the input
keys a plan reads at all.

graph passes such keys through to the run; graphchat does too, and says so: `plan run --input`
(a person typing) refuses them, a document or a plan tool call's arguments get a warning. A key
the plan never reads (`input_keys_read`) is a warning too (`plan run --strict`: exit 3).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from graphchat.plans.grammar import template_strings
from graphchat.template import TemplateError, parse
from graphchat.template.parser import DATA, Path, Section


def unknown_input_keys(schema: Mapping[str, Any] | None, keys: Iterable[str]) -> list[tuple[str, str | None]]:
    """(key, closest known property or None) for each key the schema's `properties` do not name.
    Nothing is unknown when the schema names no properties (any object is accepted then)."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping) or not props:
        return []
    known = [str(name) for name in props]
    out: list[tuple[str, str | None]] = []
    for key in keys:
        if key not in props:
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            out.append((key, close[0] if close else None))
    return out


def input_keys_read(plan: Any) -> set[str] | None:
    """The top-level input keys the plan's templates read (`{{input.x…}}`, sections included),
    anywhere: steps, bodies, the finish. None when some template reads the whole `{{input}}`."""
    keys: set[str] = set()
    whole = False

    def visit(nodes: Any) -> None:
        nonlocal whole
        for node in nodes:
            path = node.path if isinstance(node, Section) else node
            if isinstance(path, Path) and path.kind == DATA and path.segs and path.segs[0] == "input":
                if len(path.segs) == 1:
                    whole = True
                else:
                    keys.add(path.segs[1])
            if isinstance(node, Section):
                visit(node.body)

    values: list[Any] = [plan.output]
    if plan.solver is not None:
        values += [plan.solver.query_to_answer, plan.solver.data]
    for step in plan.all_steps():
        values.append(step.input)
    for value in values:
        for text, _ in template_strings(value, ""):
            try:
                visit(parse(text).nodes)
            except TemplateError:
                continue
    return None if whole else keys
