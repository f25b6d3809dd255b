"""The workbench's events as short lines: a tool call, a step, a warning, one line each, written
to a pane of the screen or a log file."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from graphchat.events import EventSink


class LineSink(EventSink):
    """Events as short lines to `out` (a pane of the screen, a log file)."""

    human = True

    def __init__(self, out: Callable[[str], None]) -> None:
        self.out = out

    def emit(self, event: str, **fields: Any) -> None:
        if event == "tool_started":
            args = json.dumps(fields.get("args"), ensure_ascii=False, default=str)
            self.out(f"→ {fields.get('tool')} {args[:200]}")
        elif event == "tool_finished":
            mark = "✗" if fields.get("is_error") else "✓"
            message = f" {fields['message']}" if fields.get("message") else ""
            self.out(f"{mark} {fields.get('tool')} {fields.get('ms', 0) / 1000:.1f}s{message[:300]}")
        elif event == "step_started":
            self.out(f"◐ {fields.get('step')} {fields.get('tool')}")
        elif event == "step_finished":
            mark = "✗" if fields.get("is_error") else "✓"
            self.out(f"{mark} {fields.get('step')} {fields.get('tool')}")
        elif event in ("warning", "info"):
            self.out(str(fields.get("message")))
