"""Tool activity shown live in the chat: `→ tool {args}` when a call starts, `✓ tool 0.8s` /
`✗ tool message` when it ends, and the calls still running side by side in the live region."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.display import safe
from graphchat.events import EventSink, _short

if TYPE_CHECKING:
    from graphchat.chat.ui import ChatUI


def started_line(tool: str, args: Any) -> str:
    return f"→ {tool} {_short(args or {})}"


def finished_line(tool: str, ms: float, is_error: bool, message: str | None) -> str:
    secs = f"{ms / 1000:.1f}s"
    if is_error:
        return f"✗ {tool} {secs} {_short(message or 'failed', 160)}"
    return f"✓ {tool} {secs}"


class ChatSink(EventSink):
    """Routes run events to the chat UI (on the event loop's thread, like every event)."""

    human = True

    def __init__(self, ui: ChatUI) -> None:
        self.ui = ui

    def waiting(self, what: str | None) -> None:
        self.ui.set_waiting(what)

    def emit(self, event: str, **f: Any) -> None:
        # What models, servers and plans named or said is escaped before it reaches the screen.
        keep_lines = event in ("warning", "info")
        f = {k: safe(v, newlines=keep_lines) if isinstance(v, str) else v for k, v in f.items()}
        ui = self.ui
        if event == "tool_started":
            ui.activity(started_line(f["tool"], f.get("args")), "dim")
            ui.tool_started(f["tool"])
        elif event == "tool_finished":
            ui.tool_finished(f["tool"])
            style = "red" if f.get("is_error") else "green"
            ui.activity(
                finished_line(f["tool"], f.get("ms") or 0.0, bool(f.get("is_error")), f.get("message")), style
            )
        elif event == "step_started":
            ui.set_status(f"step {f['step']} ({f['tool']})")
        elif event == "progress":
            ui.set_status(f"{f['step']}: {f['done']}/{f['total']}")
        elif event == "warning":
            ui.activity(f"warning: {f['message']}", "yellow")
        elif event == "info":
            ui.activity(str(f["message"]), "dim")
