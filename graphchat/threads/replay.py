"""Replay a thread's events as the OpenAI-format messages a model is sent.

Pure functions. Repairs what an interruption left, so a provider never sees an orphaned tool call:
- a turn (a `user` event up to its `turn_end`/`turn_failed`) that failed is left out entirely;
- a turn with no closing event (process killed) is kept, with repairs;
- an assistant tool call with no result gets a synthetic error result. Results are matched BY
  POSITION (the k-th result after an assistant message answers its k-th call), because provider
  call ids repeat across turns.
"""

from __future__ import annotations

from typing import Any

import orjson

from graphchat.threads import events as ev

INTERRUPTED_CONTENT = orjson.dumps({"error": ev.INTERRUPTED_ERROR}).decode()


def shorten_tool_result(content: str, max_chars: int) -> str:
    """`content` cut to `max_chars` with a note saying how much was left out (no cut when it fits)."""
    if max_chars <= 0 or len(content) <= max_chars:
        return content
    cut = len(content) - max_chars
    return (
        content[:max_chars]
        + f"\n\n[Note: this tool result was shortened for the model: {cut:,} of {len(content):,} "
        "characters were cut.]"
    )


def _content_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return orjson.dumps(value).decode()


class _TurnBuilder:
    """Messages of one turn, with tool results paired to calls by position."""

    def __init__(self, turn_no: int, max_tool_result_chars: int) -> None:
        self.turn_no = turn_no
        self.max_chars = max_tool_result_chars
        self.messages: list[dict[str, Any]] = []
        self.pending_ids: list[str] = []  # call ids of the open assistant message, in order
        self.answered = 0
        self.assistant_no = 0

    def _close_calls(self) -> None:
        # Calls of the last assistant message that never got a result: answer them now, right after
        # the results that did arrive.
        for call_id in self.pending_ids[self.answered :]:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED_CONTENT})
        self.pending_ids, self.answered = [], 0

    def user(self, event: dict[str, Any]) -> None:
        self._close_calls()
        content = event.get("content")
        self.messages.append({"role": "user", "content": content if content is not None else ""})

    def assistant(self, event: dict[str, Any]) -> None:
        self._close_calls()
        self.assistant_no += 1
        calls: list[dict[str, Any]] = []
        for k, call in enumerate(event.get("tool_calls") or []):
            if not isinstance(call, dict):
                continue
            call_id = call.get("id") or f"call_{self.turn_no}_{self.assistant_no}_{k}"
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": call.get("name") or "",
                        "arguments": _arguments_str(call.get("arguments")),
                    },
                }
            )
        content = event.get("content")
        if not calls and not content:
            return  # an empty reply carries nothing, and some providers reject it
        message: dict[str, Any] = {"role": "assistant", "content": _content_str(content) or None}
        if calls:
            message["tool_calls"] = calls  # never an empty list: OpenAI rejects `tool_calls: []`
        else:
            message["content"] = _content_str(content)
        self.messages.append(message)
        self.pending_ids = [c["id"] for c in calls]

    def tool_result(self, event: dict[str, Any]) -> None:
        if self.answered >= len(self.pending_ids):
            return  # a result with no call to answer would be rejected by the provider
        call_id = self.pending_ids[self.answered]
        self.answered += 1
        content = shorten_tool_result(_content_str(event.get("content")), self.max_chars)
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def finish(self) -> list[dict[str, Any]]:
        self._close_calls()
        return self.messages


def _arguments_str(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments or "{}"
    if arguments is None:
        return "{}"
    return orjson.dumps(arguments).decode()


def to_model_messages(
    events: list[dict[str, Any]], *, max_tool_result_chars: int = 20000
) -> list[dict[str, Any]]:
    """The OpenAI chat messages for a thread's events (see the module docstring for the repairs)."""
    out: list[dict[str, Any]] = []
    turn: _TurnBuilder | None = None
    turn_no = 0

    def start_turn() -> _TurnBuilder:
        nonlocal turn_no
        turn_no += 1
        return _TurnBuilder(turn_no, max_tool_result_chars)

    for event in events:
        kind = event.get("kind")
        if kind == ev.USER:
            if turn is not None:  # the previous turn never closed: keep it, repaired
                out.extend(turn.finish())
            turn = start_turn()
            turn.user(event)
        elif kind == ev.ASSISTANT:
            if turn is None:  # an assistant line before any user line: treat it as its own turn
                turn = start_turn()
            turn.assistant(event)
        elif kind == ev.TOOL_RESULT:
            if turn is not None:
                turn.tool_result(event)
        elif kind == ev.TURN_END:
            if turn is not None:
                out.extend(turn.finish())
                turn = None
        elif kind == ev.TURN_FAILED:
            turn = None  # kept on disk for the record, never sent
    if turn is not None:  # unfinished trailing turn (process killed): kept, repaired
        out.extend(turn.finish())
    return out
