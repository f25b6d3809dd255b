"""Images and audio in tool results: what a model is sent of them (pure functions).

A tool result's value keeps an MCP image or audio block as `{"type", "mime_type", "data"}`
(base64), so plans can use the data. A model is sent the value with each such entry described
(`{"type", "mime_type", "bytes"}`: base64 text is no use to it, and would be cut); a model that
accepts images also gets the images themselves, as image parts of a user message right after
the tool round (tool messages take only text). Entries kept beside a structured result
(`ToolResult.media`) are treated alike. A thread keeps the result as it came; its replay
describes the images (they are sent in the round they arrive).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from graphchat.catalog.base import ToolResult

MEDIA_TYPES = ("image", "audio")


def _is_media(value: Any) -> bool:
    return isinstance(value, dict) and value.get("type") in MEDIA_TYPES and isinstance(value.get("data"), str)


def size_of(data: str) -> int:
    """Bytes of base64 `data` (its length's estimate when it is not valid base64)."""
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4


def describe(entry: dict[str, Any]) -> dict[str, Any]:
    """An image or audio entry as its type and size, without its data."""
    out = {k: v for k, v in entry.items() if k != "data"}
    out["bytes"] = size_of(entry["data"])
    return out


def split_media(value: Any) -> tuple[Any, list[dict[str, Any]]]:
    """`value` with every image/audio entry described, and those entries (with their data)."""
    found: list[dict[str, Any]] = []

    def walk(item: Any) -> Any:
        if _is_media(item):
            found.append(item)
            return describe(item)
        if isinstance(item, dict):
            return {key: walk(inner) for key, inner in item.items()}
        if isinstance(item, list):
            return [walk(inner) for inner in item]
        return item

    return walk(value), found


def model_text(result: ToolResult) -> tuple[str, list[dict[str, Any]]]:
    """The text of the tool message for `result`, and the image/audio entries it held."""
    value, found = split_media(result.value)
    text = orjson.dumps(value, default=str).decode() if found else result.to_text()
    if result.media:
        beside, more = split_media(result.media)
        found += more
        text += f"\n[content beside this structured result: {orjson.dumps(beside, default=str).decode()}]"
    return text, found


def described_text(text: str) -> str:
    """A stored tool result's text with its images and audio described (for a thread's replay)."""
    if '"data"' not in text or not any(f'"type":"{kind}"' in text for kind in MEDIA_TYPES):
        return text
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return text
    described, found = split_media(value)
    return orjson.dumps(described, default=str).decode() if found else text


def image_message(images: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The user message that shows a model the images of a tool round: (tool name, entry) each."""
    names = ", ".join(dict.fromkeys(name for name, _ in images))
    parts: list[dict[str, Any]] = [
        {
            "type": "text",
            "text": f"The {'image' if len(images) == 1 else f'{len(images)} images'} returned by "
            f"the tool call(s) above ({names}), in order:",
        }
    ]
    for _, entry in images:
        url = f"data:{entry.get('mime_type') or 'image/png'};base64,{entry['data']}"
        parts.append({"type": "image_url", "image_url": {"url": url}})
    return {"role": "user", "content": parts}
