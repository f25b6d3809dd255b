"""Input keys a plan's `input_schema` does not name, with the closest one it does.

graph passes such keys through to the run; graphchat does too, and says so: `plan run --input`
(a person typing) refuses them, a document or a plan tool call's arguments get a warning.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any


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


def input_keys_read(plan: Any) -> set[str]:
    """The `{{input.<key>}}` keys the plan's templates read (steps, bodies and finish); `*` when a
    template reads the whole input."""
    from graphchat.plans.grammar import template_strings
    from graphchat.plans.template import TemplateError, parse
    from graphchat.plans.template.parser import Path, Section

    trees: list[Any] = [step.input for step in plan.all_steps()]
    trees.append(plan.output)
    if plan.solver is not None:
        trees.extend([plan.solver.query_to_answer, plan.solver.data, plan.solver.system_prompt])
    keys: set[str] = set()

    def visit(nodes: Any) -> None:
        for node in nodes:
            if isinstance(node, Section):
                visit([node.path])
                visit(node.body)
            elif isinstance(node, Path) and node.segs and node.segs[0] == "input":
                keys.add(str(node.segs[1]) if len(node.segs) > 1 else "*")

    for tree in trees:
        for text, _ in template_strings(tree, ""):
            try:
                visit(parse(text).nodes)
            except TemplateError:
                pass
    return keys
