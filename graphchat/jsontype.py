"""What JSON type a Python value is: JSON Schema's name for it, the one ladder behind every
message and schema that names a value's type (the shapes learned, the freezer's schemas, the
planner's summaries, the template renderer's and the plan loader's messages)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_EXACT: dict[type, str] = {
    type(None): "null",
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    dict: "object",
    list: "array",
}


def json_type(value: Any) -> str | None:
    """`null`, `boolean`, `integer`, `number`, `string`, `array` (a list or tuple) or `object`
    (a mapping); None when the value is none of these."""
    name = _EXACT.get(type(value))
    if name is not None:
        return name
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return None
