"""Typed splices: a whole-value template (`"{{E0.count}}"`) keeps its value's type, so when the
value's shape is known and the tool's input schema wants another type, the call would be
refused at run time. The data-flow checker (`graphchat.plans.check`) says so up front, with
what it knows of the spliced path (the plan's `input_schema`, a tool's declared or learned
shape, a control step's result as its step module declares it); this module holds the type
rules it applies and the reader of the shape cache.

Only when both types are known: the wanted type is the argument's `type` in the tool's input
schema. Anything else — a union, an unknown shape — is never a problem.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from graphchat.shapes import ShapeStore

# tool name -> its stored shape document ({schema, seen_count, source, ...}), None when unknown
Shapes = Callable[[str], "dict[str, Any] | None"]


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
    store = ShapeStore(directory)

    def doc_of(tool: str) -> dict[str, Any] | None:
        doc = store.get(tool)
        return doc if doc and isinstance(doc.get("schema"), dict) else None

    return doc_of
