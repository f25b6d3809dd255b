"""A thread as a Markdown document (`graphchat threads export ID --format md`). Pure.

The export is the record, so tool results are written whole (only `threads show` shortens them).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from graphchat.threads import lines as ev
from graphchat.threads.store import ThreadInfo


def _fence(text: str, lang: str = "") -> str:
    # A fence longer than any backtick run inside, so the content can never close it early.
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def pretty_arguments(arguments: Any) -> str:
    """Tool-call arguments (a JSON string, normally) indented for reading; left as is when not JSON."""
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments)
        except orjson.JSONDecodeError:
            return arguments
    return orjson.dumps(arguments, option=orjson.OPT_INDENT_2).decode()


def usage_line(event: dict[str, Any]) -> str:
    """`in 120 · out 40 · $0.0012 · model` from a turn_end event."""
    usage = event.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    parts = []
    if "input_tokens" in usage:
        parts.append(f"in {usage['input_tokens']}")
    if "output_tokens" in usage:
        parts.append(f"out {usage['output_tokens']}")
    if isinstance(usage.get("cost_usd"), int | float):
        parts.append(f"${usage['cost_usd']:.4f}")
    if event.get("model"):
        parts.append(str(event["model"]))
    return " · ".join(parts)


def to_markdown(info: ThreadInfo, events: list[dict[str, Any]]) -> str:
    """The whole thread as Markdown: user and assistant messages, tool calls and their full results."""
    out = [f"# {info.title or 'Untitled thread'}", ""]
    out += [f"Thread `{info.id}` · created {info.created_at} · updated {info.updated_at}", ""]
    for event in events:
        kind = event.get("kind")
        if kind == ev.USER:
            out += ["## You", "", ev.text_of(event.get("content")), ""]
        elif kind == ev.ASSISTANT:
            out += ["## Assistant", ""]
            if event.get("content"):
                out += [str(event["content"]), ""]
            for call in event.get("tool_calls") or []:
                if isinstance(call, dict):
                    out += [f"**Tool call** `{call.get('name', '')}`", ""]
                    out += [_fence(pretty_arguments(call.get("arguments")), "json"), ""]
        elif kind == ev.TOOL_RESULT:
            details = [f"`{event.get('name', '')}`"]
            if isinstance(event.get("ms"), int | float):
                details.append(f"{event['ms'] / 1000:.1f} s")
            if event.get("is_error"):
                details.append("error")
            out += [f"**Tool result** ({', '.join(details)})", ""]
            out += [_fence(str(event.get("content", ""))), ""]
        elif kind == ev.TURN_END:
            line = usage_line(event)
            if line:
                out += [f"*{line}*", ""]
        elif kind == ev.TURN_FAILED:
            out += [f"> **Turn failed:** {event.get('error', '')}", ""]
        elif kind == ev.TURN_RETRACTED:
            out += ["> *The turn above was taken back (/retry or /edit); the model no longer sees it.*", ""]
    return "\n".join(out).rstrip() + "\n"
