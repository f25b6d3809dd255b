"""MCP results and tool lists as graphchat sees them (pure mapping, no I/O).

- `map_result`: a `CallToolResult` → ToolResult: structured content, else JSON text, else
  `{text}`; images, audio and resources as typed entries (images and audio beside structured
  content, in `ToolResult.media`); structured content kept on errors.
- `tool_record`: what the tool-list cache keeps of one MCP tool (JSON, snake_case).
"""

from __future__ import annotations

import base64
import re
from typing import Any

from graphchat.catalog.base import ToolResult


def _content_entry(block: Any) -> dict[str, Any] | None:
    """A non-text content block as a typed JSON entry (images and resources are not dropped)."""
    kind = getattr(block, "type", None)
    if kind in ("image", "audio"):
        return {"type": kind, "mime_type": block.mime_type, "data": block.data}
    if kind == "resource_link":
        entry = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
        if getattr(block, "mime_type", None):
            entry["mime_type"] = block.mime_type
        if getattr(block, "description", None):
            entry["description"] = block.description
        return entry
    if kind == "resource":
        res = block.resource
        entry = {"type": "resource", "uri": str(res.uri)}
        if getattr(res, "mime_type", None):
            entry["mime_type"] = res.mime_type
        if getattr(res, "text", None) is not None:
            entry["text"] = res.text
        if getattr(res, "blob", None) is not None:
            entry["blob"] = res.blob
        return entry
    if kind is None:
        return None
    try:
        return block.model_dump(mode="json", exclude_none=True)
    except Exception:
        return {"type": str(kind)}


# An integer of 20 digits or more may be beyond 64 bits: orjson would read it as a float.
_BIG_INT = re.compile(r"(?<![\d.eE+-])-?\d{20,}(?![\d.eE])")


def _parse_json(text: str) -> tuple[bool, Any]:
    """(True, value) when `text` is JSON graphchat can keep exactly: integers beyond 64 bits
    (orjson would turn them into floats) and nesting beyond what can be stored again leave
    it text."""
    import orjson

    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        value = orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return False, None
    if _BIG_INT.search(stripped) is not None and _has_big_int(stripped):
        return False, None
    return (True, value) if storable(value) is None else (False, None)


def _has_big_int(text: str) -> bool:
    import json

    found = False

    def parse_int(digits: str) -> int:
        nonlocal found
        number = int(digits)
        if not -(2**63) <= number < 2**64:
            found = True
        return 0

    try:
        json.loads(text, parse_int=parse_int)
    except (ValueError, RecursionError):
        return True
    return found


def storable(value: Any) -> str | None:
    """None when `value` can be written as JSON (thread, cache, the model's message); else why
    not (orjson refuses nesting over 255 levels and integers beyond 64 bits)."""
    import orjson

    try:
        orjson.dumps(value)
    except TypeError as exc:
        return str(exc)
    return None


def map_result(result: Any) -> ToolResult:
    """`CallToolResult` → ToolResult: structured_content, else JSON text, else `{text}`;
    other content as typed entries; structured content kept on error results."""
    texts: list[str] = []
    entries: list[dict[str, Any]] = []
    for block in result.content or []:
        if getattr(block, "type", None) == "text":
            texts.append(block.text)
        else:
            entry = _content_entry(block)
            if entry is not None:
                entries.append(entry)
    structured = result.structured_content
    if structured is not None and storable(structured) is not None:
        # Nested too deep or holding integers beyond 64 bits: the text content stands in (it
        # is the same result, as text), or the call fails — never the turn.
        problem = storable(structured)
        structured = None
        if not texts and not result.is_error:
            return ToolResult.error(f"the tool's structured result cannot be stored: {problem}")
    if result.is_error:
        extra: dict[str, Any] = {}
        if structured is not None:
            extra["structured_content"] = structured
        if entries:
            extra["content"] = entries
        return ToolResult.error("\n".join(texts).strip() or "the tool reported an error", **extra)
    if structured is not None:  # the preferred result; images and the like are kept beside it
        return ToolResult(structured, media=[e for e in entries if e.get("type") in ("image", "audio")])
    value: Any
    if len(texts) == 1:
        ok, parsed = _parse_json(texts[0])
        value = parsed if ok else {"text": texts[0]}
    elif texts:
        parsed_all = [_parse_json(t) for t in texts]
        if all(ok for ok, _ in parsed_all):
            value = [v for _, v in parsed_all]
        else:
            value = {"text": "\n".join(texts)}
    else:
        value = None
    if entries:
        if value is None:
            value = {"content": entries}
        elif isinstance(value, dict) and "content" not in value:
            value = {**value, "content": entries}
        else:
            value = {"result": value, "content": entries}
    return ToolResult({} if value is None else value)


def tool_record(tool: Any) -> dict[str, Any]:
    """What the cache keeps of one MCP tool (JSON, snake_case)."""
    record: dict[str, Any] = {"name": tool.name, "input_schema": tool.input_schema or {}}
    if tool.description:
        record["description"] = tool.description
    if getattr(tool, "title", None):
        record["title"] = tool.title
    if tool.output_schema:
        record["output_schema"] = tool.output_schema
    if tool.annotations is not None:
        record["annotations"] = tool.annotations.model_dump(mode="json", exclude_none=True)
    return record


# --- content beyond a tool's result: prompts' messages, resources, sampling replies --------------


def content_value(content: Any) -> Any:
    kind = getattr(content, "type", None)
    if kind == "text":
        return content.text
    if kind == "image" or kind == "audio":
        size = len(base64.b64decode(content.data or "", validate=False)) if content.data else 0
        return {"type": kind, "mime_type": content.mime_type, "bytes": size}
    if kind == "resource":
        return resource_contents([content.resource])[0]
    if kind == "resource_link":
        return {"type": "resource_link", "uri": str(content.uri), "name": getattr(content, "name", None)}
    return {"type": kind}


def resource_contents(contents: list[Any], max_chars: int | None = None) -> list[dict[str, Any]]:
    """Each content of a read: text inline (cut at `max_chars` with a note); a blob is always
    binary — its type and size, never its bytes — whatever its MIME type says."""
    out = []
    for item in contents:
        entry: dict[str, Any] = {"uri": str(item.uri), "mime_type": item.mime_type}
        blob = getattr(item, "blob", None)
        if blob is not None:
            entry["binary"] = True
            entry["bytes"] = len(base64.b64decode(blob, validate=False))
        else:
            text = getattr(item, "text", "") or ""
            if max_chars is not None and len(text) > max_chars:
                entry["truncated"] = f"showing {max_chars:,} of {len(text):,} characters"
                text = text[:max_chars]
            entry["text"] = text
        out.append(entry)
    return out
