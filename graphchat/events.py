"""Events of a run (tool calls, rounds, model calls, plan steps, questions) and where they go.

Every layer reports through an EventSink; the host picks the sink: a terminal one (human
lines on stderr), the JSONL one (`GRAPHCHAT_EVENTS=jsonl`), the chat UI's, or none.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, TextIO


class EventSink:
    """Base sink: named helpers all funnel into `emit`. Silent by default."""

    # A person reads this sink's output (terminal lines, the chat): per-item noise is trimmed.
    human = False

    def emit(self, event: str, **fields: Any) -> None:
        pass

    def tool_started(self, tool: str, args: Any) -> None:
        self.emit("tool_started", tool=tool, args=args)

    def tool_finished(self, tool: str, ms: float, is_error: bool, message: str | None = None) -> None:
        self.emit("tool_finished", tool=tool, ms=round(ms, 1), is_error=is_error, message=message)

    def agent_round(self, n: int) -> None:
        self.emit("agent_round", n=n)

    def llm_call(self, site: str, model: str, input_tokens: int, output_tokens: int, ms: float) -> None:
        self.emit(
            "llm_call",
            site=site,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            ms=round(ms, 1),
        )

    def step_started(self, step: str, tool: str) -> None:
        self.emit("step_started", step=step, tool=tool)

    def step_finished(self, step: str, tool: str, ms: float = 0.0, is_error: bool = False) -> None:
        self.emit("step_finished", step=step, tool=tool, ms=round(ms, 1), is_error=is_error)

    def progress(self, step: str, done: int, total: int) -> None:
        self.emit("progress", step=step, done=done, total=total)

    def ask(self, prompt: str, answered: bool, reason: str | None = None) -> None:
        fields: dict[str, Any] = {"prompt": prompt, "answered": answered}
        if reason:
            fields["reason"] = reason
        self.emit("ask", **fields)

    def usage_summary(self, usage: dict[str, Any]) -> None:
        self.emit("usage_summary", usage=usage)

    def warning(self, message: str) -> None:
        self.emit("warning", message=message)

    def info(self, message: str) -> None:
        self.emit("info", message=message)


class JsonlSink(EventSink):
    """`GRAPHCHAT_EVENTS=jsonl`: one JSON object a line on stderr."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        import orjson

        line = orjson.dumps(
            {"event": event, **{k: v for k, v in fields.items() if v is not None}}, default=str
        )
        with self._lock:
            self.stream.write(line.decode() + "\n")
            self.stream.flush()


def _short(value: Any, limit: int = 80) -> str:
    import orjson

    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


class TerminalSink(EventSink):
    """Human-readable activity lines on stderr: `→ tool {args}`, `✓ tool 0.8s`, `✗ tool msg`."""

    human = True

    def __init__(
        self, stream: TextIO | None = None, *, color: bool | None = None, quiet: bool = False
    ) -> None:
        self.stream = stream or sys.stderr
        if color is None:
            color = self.stream.isatty() and "NO_COLOR" not in os.environ
        self.color = color
        self.quiet = quiet
        self._lock = threading.Lock()

    def _paint(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.color else text

    def _line(self, text: str) -> None:
        with self._lock:
            self.stream.write(text + "\n")
            self.stream.flush()

    def emit(self, event: str, **f: Any) -> None:
        if event == "tool_started" and not self.quiet:
            self._line(self._paint(f"→ {f['tool']} {_short(f.get('args') or {})}", "2"))
        elif event == "tool_finished" and not self.quiet:
            secs = f"{f['ms'] / 1000:.1f}s"
            if f.get("is_error"):
                self._line(
                    self._paint(f"✗ {f['tool']} {secs} {_short(f.get('message') or 'failed', 160)}", "31")
                )
            else:
                self._line(self._paint(f"✓ {f['tool']} {secs}", "32"))
        elif event == "step_started" and not self.quiet:
            self._line(self._paint(f"▸ step {f['step']} ({f['tool']})", "2"))
        elif event == "progress" and not self.quiet:
            self._line(self._paint(f"  {f['step']}: {f['done']}/{f['total']}", "2"))
        elif event == "warning":
            self._line(self._paint(f"warning: {f['message']}", "33"))
        elif event == "info" and not self.quiet:
            self._line(f["message"])
        elif event == "usage_summary" and not self.quiet and self.stream.isatty():
            usage = f.get("usage") or {}
            if usage.get("calls"):  # one dim line after the answer, for a person only
                self._line(self._paint(usage_text(usage), "2"))


def format_cost(usd: float) -> str:
    """Dollars with enough digits to mean something: `$0.0012`, `$0.0000135`, `$1.25`."""
    if usd == 0:
        return "$0"
    if abs(usd) >= 0.01:
        return f"${usd:,.4f}".rstrip("0").rstrip(".") if abs(usd) < 1 else f"${usd:,.2f}"
    return f"${usd:.3g}" if "e" not in f"{usd:.3g}" else "$" + f"{usd:.12f}".rstrip("0")


def usage_text(usage: Any) -> str:
    """`calls 3 · input 1,234 tokens · output 56 tokens · $0.0012` from a dict or a Usage object."""
    if usage is None:
        return "no model calls yet"
    data = usage if isinstance(usage, dict) else getattr(usage, "__dict__", {})
    if hasattr(usage, "to_json"):
        data = usage.to_json()
    parts = [
        f"calls {int(data.get('calls') or 0):,}",
        f"input {int(data.get('input_tokens') or 0):,} tokens",
        f"output {int(data.get('output_tokens') or 0):,} tokens",
    ]
    if data.get("cost_usd") is not None:
        parts.append(format_cost(float(data["cost_usd"])))
    return " · ".join(parts)


def sink_for_environment(*, quiet: bool = False) -> EventSink:
    """JSONL when GRAPHCHAT_EVENTS=jsonl, else terminal lines on stderr."""
    if os.environ.get("GRAPHCHAT_EVENTS", "").lower() == "jsonl":
        return JsonlSink()
    return TerminalSink(quiet=quiet)
