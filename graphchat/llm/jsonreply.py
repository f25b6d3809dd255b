"""Pull a JSON value out of a model's text reply, and the instruction that asks for one (pure)."""

from __future__ import annotations

import json
from typing import Any


def schema_instruction(schema: dict[str, Any]) -> str:
    return (
        "Reply with only a JSON value (no prose, no code fence) that matches this JSON schema:\n"
        + json.dumps(schema, ensure_ascii=False)
    )


def parse_json_reply(text: str) -> Any:
    """The JSON in `text`: the whole text, a ```json fence, or the outermost {...}/[...]; else ValueError."""
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply was empty")
    candidates = [stripped]
    if "```" in stripped:
        inner = stripped.split("```", 2)[1]
        if inner.lstrip().lower().startswith("json"):
            inner = inner.lstrip()[4:]
        candidates.append(inner.strip())
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = stripped.find(opener), stripped.rfind(closer)
        if 0 <= start < end:
            candidates.append(stripped[start : end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    try:
        json.loads(stripped)
    except ValueError as exc:
        raise ValueError(f"the reply is not JSON ({exc})") from None
    raise ValueError("the reply is not JSON")  # pragma: no cover
