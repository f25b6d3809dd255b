"""Assemble a streamed reply: text deltas and tool-call fragments keyed by index (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphchat.llm.types import ToolCall


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


class StreamAssembler:
    """Feed it chunks (litellm objects or plain dicts); read `content`, `tool_calls()`, `usage`.

    Tool calls are keyed by their `index`; the id and name come from the first fragment that has
    them and the argument fragments are concatenated. A fragment that brings a *different* id for
    an index whose call already has one starts a new call (some providers reuse index 0).
    """

    def __init__(self, on_text: Callable[[str], None] | None = None) -> None:
        self.on_text = on_text
        self.parts: list[str] = []
        self._slots: list[dict[str, Any]] = []  # calls in order of first appearance
        self._by_index: dict[int, int] = {}  # provider index -> slot
        self.usage: Any = None
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.size = 0  # characters of text and tool-call arguments so far (the output cap)

    @property
    def started(self) -> bool:
        """Whether any text or tool call has arrived yet."""
        return bool(self.parts or self._slots)

    @property
    def content(self) -> str:
        return "".join(self.parts)

    def feed(self, chunk: Any) -> None:
        usage = _get(chunk, "usage")
        if usage and (_get(usage, "prompt_tokens") or _get(usage, "completion_tokens")):
            self.usage = usage
        self.model = _get(chunk, "model") or self.model
        for choice in _get(chunk, "choices") or []:
            if _get(choice, "finish_reason"):
                self.finish_reason = _get(choice, "finish_reason")
            delta = _get(choice, "delta")
            if delta is None:
                continue
            text = _get(delta, "content")
            if text:
                self.size += len(text)
                self.parts.append(text)
                if self.on_text is not None:
                    self.on_text(text)
            for position, fragment in enumerate(_get(delta, "tool_calls") or []):
                self._add_fragment(position, fragment)

    def _add_fragment(self, position: int, fragment: Any) -> None:
        index = _get(fragment, "index")
        if not isinstance(index, int):
            index = position
        call_id = _get(fragment, "id")
        slot = self._by_index.get(index)
        if slot is not None and call_id and self._slots[slot]["id"] and call_id != self._slots[slot]["id"]:
            slot = None  # a new call reusing the index: give it its own slot
        if slot is None:
            slot = len(self._slots)
            self._slots.append({"id": "", "name": "", "arguments": ""})
            self._by_index[index] = slot
        current = self._slots[slot]
        function = _get(fragment, "function")
        if call_id and not current["id"]:
            current["id"] = call_id
        name = _get(function, "name")
        if name and not current["name"]:
            current["name"] = name
        arguments = _get(function, "arguments")
        if arguments:
            part = arguments if isinstance(arguments, str) else _dump(arguments)
            self.size += len(part)
            current["arguments"] += part

    def text_so_far(self) -> str:
        """The text and every tool call's arguments so far (what the output cap counts)."""
        return "".join([*self.parts, *(slot["arguments"] for slot in self._slots)])

    def tool_calls(self) -> list[ToolCall]:
        """The assembled calls in order; calls without a name are dropped, missing ids filled in."""
        out = []
        for n, call in enumerate(self._slots):
            if not call["name"]:
                continue
            out.append(ToolCall(call["id"] or f"call_{n}", call["name"], call["arguments"] or "{}"))
        return out


def _dump(value: Any) -> str:
    import orjson

    return orjson.dumps(value).decode()
