"""Typed splices checked before a run: a whole-value template (`"{{E0.count}}"`) keeps its
value's type, so when the value's shape is known and the tool's input schema wants another
type, the call would be refused at run time. `plan validate` (and `plan run`, before the
first step) says so up front.

Only when both types are known: the spliced path's type comes from the plan's `input_schema`
(`{{input.x}}`), a tool step's declared `output_schema` or its learned shape (the shape cache),
or a control step's fixed outputs (`count` of map/filter/reduce, an ask step's `answer`);
the wanted type from the argument's `type` in the tool's input schema. Anything else — an
item, a union, an unknown shape — is never a problem. Pure over the plan, catalog and shapes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.plans.model import Plan, Step
from graphchat.plans.steps import CONTROL

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog

# tool name -> its learned output schema (the shape cache), None when unknown
Shapes = Callable[[str], "dict[str, Any] | None"]

_COUNT = {"type": "object", "properties": {"count": {"type": "integer"}}}
_CONTROL_OUTPUTS: dict[str, dict[str, Any]] = {
    "map": {"type": "object", "properties": {"count": {"type": "integer"}, "results": {"type": "array"}}},
    "filter": {
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "items": {"type": "array"},
            "dropped": {"type": "array"},
            "dropped_count": {"type": "integer"},
        },
    },
    "reduce": _COUNT,
}


def splice_problems(
    plan: Plan, catalog: Catalog, steps: list[tuple[str, Step]], shapes: Shapes | None = None
) -> list[str]:
    """`step <label>: input.<field>: "{{path}}" is <type> (<whence>), but <tool> wants <type>`
    for every whole-value splice whose type the argument's schema cannot take."""
    from graphchat.plans.template import TemplateSyntaxError, parse

    by_id: dict[str, Step] = {step.id: step for _, step in steps if step.id}
    problems: list[str] = []
    for label, step in steps:
        if step.tool_name in CONTROL:
            continue
        spec = catalog.get(step.tool_name)
        if spec is None or not isinstance(step.input, Mapping):
            continue
        for field, value, wanted in _arguments(step.input, spec.input_schema or {}, "input"):
            if not isinstance(value, str) or "{{" not in value:
                continue
            try:
                splice = parse(value).splice
            except TemplateSyntaxError:
                continue  # reported by the loader
            if splice is None or not splice.segs:
                continue
            found = _path_type(splice.segs, plan, catalog, by_id, shapes)
            want = _types(wanted)
            if found is None or want is None:
                continue
            have, whence = found
            if not _fits(have, want):
                problems.append(
                    f"step {label}: {field}: {value!r} is {_say(have)} ({whence}), "
                    f"but {step.tool_name} wants {_say(want)}"
                )
    return problems


def _arguments(args: Mapping[str, Any], schema: Any, where: str) -> list[tuple[str, Any, Any]]:
    """(field, value, property schema) of every argument the schema describes, nested objects
    included."""
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(props, Mapping):
        return []
    out: list[tuple[str, Any, Any]] = []
    for key, value in args.items():
        prop = props.get(key)
        if not isinstance(prop, Mapping):
            continue
        out.append((f"{where}.{key}", value, prop))
        if isinstance(value, Mapping):
            out.extend(_arguments(value, prop, f"{where}.{key}"))
    return out


def _path_type(
    segs: tuple[str, ...],
    plan: Plan,
    catalog: Catalog,
    by_id: Mapping[str, Step],
    shapes: Shapes | None,
) -> tuple[frozenset[str], str] | None:
    """The JSON types a path's value can have, and where that is known from; None: unknown."""
    root, rest = segs[0], segs[1:]
    if root == "input":
        schema: Any = plan.input_schema
        whence = "per the plan's input_schema"
    elif root in by_id:
        step = by_id[root]
        schema, whence = _step_output(step, catalog, shapes)
    else:
        return None
    if rest and rest[-1] == "length":
        return (frozenset({"integer"}), whence) if schema is not None else None
    for seg in rest:
        schema = _child(schema, seg)
        if schema is None:
            return None
    types = _types(schema)
    return (types, whence) if types is not None else None


def _step_output(step: Step, catalog: Catalog, shapes: Shapes | None) -> tuple[Any, str]:
    tool = step.tool_name
    if tool == "ask":
        answer = step.input.get("output_schema")
        schema = {"type": "object", "properties": {"answer": answer, "answered": {"type": "boolean"}}}
        return schema, f"{step.label}'s ask output"
    if tool in CONTROL:
        return _CONTROL_OUTPUTS.get(tool), f"{step.label}'s {tool} output"
    spec = catalog.get(tool)
    if spec is not None and spec.output_schema:
        return spec.output_schema, f"{step.label}'s declared output_schema"
    learned = shapes(tool) if shapes is not None else None
    return learned, f"{step.label}'s learned shape of {tool}"


def _child(schema: Any, seg: str) -> Any:
    if not isinstance(schema, Mapping) or _types(schema) is None:
        return None
    kind = schema.get("type")
    if kind == "object" and isinstance(schema.get("properties"), Mapping):
        return schema["properties"].get(seg)
    if kind == "array" and seg.isdigit() and isinstance(schema.get("items"), Mapping):
        return schema["items"]
    return None


def _types(schema: Any) -> frozenset[str] | None:
    """The types a schema allows, when it says so plainly (a `type`, no combinators)."""
    if not isinstance(schema, Mapping):
        return None
    if any(k in schema for k in ("anyOf", "oneOf", "allOf", "not", "$ref", "if")):
        return None
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list) and kind and all(isinstance(k, str) for k in kind):
        return frozenset(kind)
    return None


def _fits(have: frozenset[str], want: frozenset[str]) -> bool:
    accepted = set(want) | ({"integer"} if "number" in want else set())
    return bool(set(have) & accepted)


def _say(types: frozenset[str]) -> str:
    names = sorted(types)
    return names[0] if len(names) == 1 else " or ".join(names)


def learned_shapes(directory: Path) -> Shapes:
    """The shape cache under `directory` (the workspace's `catalog/shapes`) as a `Shapes`."""
    from graphchat.shapes import ShapeStore

    store = ShapeStore(directory)

    def schema_of(tool: str) -> dict[str, Any] | None:
        doc = store.get(tool)
        schema = doc.get("schema") if doc else None
        return schema if isinstance(schema, dict) else None

    return schema_of
