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
