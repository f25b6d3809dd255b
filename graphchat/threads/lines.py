"""Thread lines: the kinds of line a thread file holds (`user`, `assistant`, …), and helpers to build them.

Every line is one JSON object with `kind` and `ts` (ISO 8601, UTC, microseconds, so plain
string order is time order).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, NotRequired, TypedDict

USER = "user"
ASSISTANT = "assistant"
TOOL_RESULT = "tool_result"
TURN_END = "turn_end"
TURN_FAILED = "turn_failed"
TURN_PARKED = "turn_parked"
TURN_RESUMED = "turn_resumed"
TURN_RETRACTED = "turn_retracted"
META = "meta"

# Kinds that become a model message (and count as a message in `threads list`).
MESSAGE_KINDS = frozenset({USER, ASSISTANT, TOOL_RESULT})
# Kinds that close a turn.
TURN_CLOSERS = frozenset({TURN_END, TURN_FAILED})

INTERRUPTED_ERROR = "interrupted before it finished"
TITLE_CHARS = 60


class ToolCallRecord(TypedDict):
    id: str
    name: str
    arguments: str  # a JSON string, as OpenAI sends it


class UserEvent(TypedDict):
    kind: Literal["user"]
    ts: str
    content: Any  # a string, or a list of content parts


class AssistantEvent(TypedDict):
    kind: Literal["assistant"]
    ts: str
    content: str | None
    tool_calls: list[ToolCallRecord]


class ToolResultEvent(TypedDict):
    kind: Literal["tool_result"]
    ts: str
    tool_call_id: str
    name: str
    content: str  # the whole result; only what is sent to the model is shortened
    is_error: bool
    ms: NotRequired[float]


class TurnEndEvent(TypedDict):
    kind: Literal["turn_end"]
    ts: str
    usage: dict[str, Any]
    model: str | None


class TurnFailedEvent(TypedDict):
    kind: Literal["turn_failed"]
    ts: str
    error: str
    interrupted: NotRequired[bool]  # Ctrl-C or a signal: the replay keeps the turn (failures it drops)


class MetaEvent(TypedDict):
    kind: Literal["meta"]
    ts: str
    title: NotRequired[str]
    model: NotRequired[str]


def now_ts() -> str:
    """The current time as an event timestamp."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def user(content: Any) -> UserEvent:
    return {"kind": "user", "ts": now_ts(), "content": content}


def assistant(content: str | None, tool_calls: list[ToolCallRecord] | None = None) -> AssistantEvent:
    return {"kind": "assistant", "ts": now_ts(), "content": content, "tool_calls": list(tool_calls or [])}


def tool_result(
    tool_call_id: str, name: str, content: str, *, is_error: bool = False, ms: float | None = None
) -> ToolResultEvent:
    event: ToolResultEvent = {
        "kind": "tool_result",
        "ts": now_ts(),
        "tool_call_id": tool_call_id,
        "name": name,
        "content": content,
        "is_error": is_error,
    }
    if ms is not None:
        event["ms"] = ms
    return event


def turn_end(usage: dict[str, Any], model: str | None) -> TurnEndEvent:
    return {"kind": "turn_end", "ts": now_ts(), "usage": usage, "model": model}


def turn_failed(error: str, *, interrupted: bool = False) -> TurnFailedEvent:
    event: TurnFailedEvent = {"kind": "turn_failed", "ts": now_ts(), "error": error}
    if interrupted:
        event["interrupted"] = True
    return event


def turn_parked(requests: list[str]) -> dict[str, Any]:
    """The turn waits for a person on `requests` (issue 9): it stays open, and crash repair
    leaves it alone until `turn_resumed` (then the waited-on calls' results follow)."""
    return {"kind": TURN_PARKED, "ts": now_ts(), "requests": requests}


def turn_resumed() -> dict[str, Any]:
    return {"kind": TURN_RESUMED, "ts": now_ts()}


def turn_retracted() -> dict[str, Any]:
    """The turn before this line is taken back (the chat's /retry and /edit): kept on disk for
    the record, left out of what the model is sent and of what `/freeze` reads."""
    return {"kind": TURN_RETRACTED, "ts": now_ts()}


def meta(*, title: str | None = None, model: str | None = None) -> MetaEvent:
    event: MetaEvent = {"kind": "meta", "ts": now_ts()}
    if title is not None:
        event["title"] = title
    if model is not None:
        event["model"] = model
    return event


def text_of(content: Any) -> str:
    """The text of a message content: a string as is, or the text parts of a content list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        return "\n".join(p for p in parts if isinstance(p, str))
    return "" if content is None else str(content)


def title_from(content: Any) -> str:
    """A thread title: the first non-blank line of the first user message, cut to 60 characters."""
    for line in text_of(content).splitlines():
        line = line.strip()
        if line:
            return line[:TITLE_CHARS].rstrip()
    return ""
