"""What the thread keeps of a tool result: up to `settings.max_thread_result_chars` (default
1 MB), cut with a note saying how much was left out. A 50 MB result is not stored whole (the
model only ever sees its first `max_tool_result_chars`; `plan freeze` reads the thread)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

THREAD_CUT_NOTE = (
    "[Note: graphchat kept the first {kept:,} of {total:,} characters of this result in the thread.]"
)


def cut_result_event(event: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """A `tool_result` event with its content cut to `max_chars` (other events as they are)."""
    if event.get("kind") != "tool_result" or max_chars <= 0:
        return event
    content = event.get("content")
    if not isinstance(content, str) or len(content) <= max_chars:
        return event
    note = THREAD_CUT_NOTE.format(kept=max_chars, total=len(content))
    return {**event, "content": f"{content[:max_chars]}\n\n{note}", "cut_from": len(content)}


def capped_recorder(
    append: Callable[[dict[str, Any]], None], max_chars: int
) -> Callable[[dict[str, Any]], None]:
    """`append` (a thread's) that cuts every tool result to `max_chars` first."""

    def record(event: dict[str, Any]) -> None:
        append(cut_result_event(event, max_chars))

    return record
