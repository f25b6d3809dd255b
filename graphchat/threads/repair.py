"""Crash repair and replay: a thread's events as the OpenAI-format messages a model is sent.

Pure functions. Repairs what an interruption left, so a provider never sees an orphaned tool call:
- a turn (a `user` event up to its `turn_end`/`turn_failed`) that failed is left out entirely;
- a turn that was interrupted (Ctrl-C, SIGTERM, SIGHUP: `turn_failed` with `interrupted`) is
  kept: the user's message, what the model said, the results that completed and the calls
  cancelled; so is a turn with no closing event (process killed), with repairs;
- a turn followed by `turn_retracted` (the chat's /retry and /edit) is left out entirely;
- an assistant tool call with no result gets a synthetic "interrupted" error result.

Results are recorded as their calls finish, in any order, so they are matched to the calls of
the assistant message before them BY CALL ID (provider call ids repeat across turns, so never
beyond that message). A result whose id matches no open call — threads written before results
carried reliable ids, or calls without ids — answers the first open call, by position, as
threads were once replayed.
"""

from __future__ import annotations

from typing import Any

import orjson

from graphchat.media import described_text
from graphchat.threads import lines as ev

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


def answered_call(call_ids: list[str], answered: list[bool], result_call_id: Any) -> int | None:
    """The index of the open call a result answers (see the module docstring), or None when every
    call is answered already. `call_ids` are the ids of one assistant message's calls, in order;
    `answered[k]` says whether call k has its result."""
    fallback = None
    for k, call_id in enumerate(call_ids):
        if answered[k]:
            continue
        if call_id == result_call_id:
            return k
        if fallback is None:
            fallback = k
    return fallback


def is_interrupted(event: dict[str, Any]) -> bool:
    """Whether a `turn_failed` event records an interruption (kept in the replay) rather than a
    failure. Threads written before the `interrupted` flag said so in the error text."""
    if event.get("interrupted") is True:
        return True
    error = event.get("error")
    return isinstance(error, str) and error.startswith("interrupted")


class _TurnBuilder:
    """Messages of one turn, with tool results paired to calls by call id (see module doc)."""

    def __init__(self, turn_no: int, max_tool_result_chars: int) -> None:
        self.turn_no = turn_no
        self.max_chars = max_tool_result_chars
        self.messages: list[dict[str, Any]] = []
        self.pending_ids: list[str] = []  # call ids of the open assistant message, in order
        self.replies: list[str | None] = []  # the tool message content answering each of them
        self.assistant_no = 0

    def _close_calls(self) -> None:
        # The open assistant message's results, in call order (as providers expect them); calls
        # that never got a result are answered as interrupted.
        for call_id, content in zip(self.pending_ids, self.replies, strict=True):
            self.messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": INTERRUPTED_CONTENT if content is None else content,
                }
            )
        self.pending_ids, self.replies = [], []

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
        self.replies = [None] * len(calls)

    def tool_result(self, event: dict[str, Any]) -> None:
        k = answered_call(self.pending_ids, [r is not None for r in self.replies], event.get("tool_call_id"))
        if k is None:
            return  # a result with no call to answer would be rejected by the provider
        text = described_text(_content_str(event.get("content")))  # images are sent in their round only
        self.replies[k] = shorten_tool_result(text, self.max_chars)

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
    last_start: int | None = None  # where the latest turn's messages begin in `out`

    def start_turn() -> _TurnBuilder:
        nonlocal turn_no
        turn_no += 1
        return _TurnBuilder(turn_no, max_tool_result_chars)

    for event in events:
        kind = event.get("kind")
        if kind == ev.USER:
            if turn is not None:  # the previous turn never closed: keep it, repaired
                out.extend(turn.finish())
            last_start = len(out)
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
            if turn is not None and is_interrupted(event):
                out.extend(turn.finish())  # what happened before the interruption stays known
            turn = None  # a failed turn is kept on disk for the record, never sent
        elif kind == ev.TURN_RETRACTED:
            if turn is not None:
                out.extend(turn.finish())
                turn = None
            if last_start is not None:  # the latest turn is taken back; a second retraction
                del out[last_start:]  # in a row takes back nothing more
                last_start = None
    if turn is not None:  # unfinished trailing turn (process killed): kept, repaired
        out.extend(turn.finish())
    return out
