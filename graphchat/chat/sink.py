"""Tool activity shown live in the chat: `→ tool {args}` when a call starts, `✓ tool 0.8s` /
`✗ tool message` when it ends, and the calls still running side by side in the live region.

While `plan_and_execute` runs, the plan it runs is a step list with live status in the live
region (`○` waiting, `◐` running, `✓` done, `✗` failed, `–` skipped); a replan is an activity
line, and the final list stays in the scrollback when the call ends."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.display import safe
from graphchat.events import CallLabels, EventSink, _short, progress_text, replan_line

if TYPE_CHECKING:
    from graphchat.chat.ui import ChatUI


def started_line(tool: str, args: Any) -> str:
    return f"→ {tool} {_short(args or {})}"


def finished_line(tool: str, ms: float, is_error: bool, message: str | None) -> str:
    secs = f"{ms / 1000:.1f}s"
    if is_error:
        return f"✗ {tool} {secs} {_short(message or 'failed', 160)}"
    if message:  # done but not a success: a question nobody answered
        return f"– {tool} {secs} {_short(message, 160)}"
    return f"✓ {tool} {secs}"


GLYPHS = {"waiting": "○", "running": "◐", "done": "✓", "failed": "✗", "skipped": "–"}


class StepList:
    """The steps of the plan a `plan_and_execute` call is running, with their status."""

    def __init__(self, plan: str, steps: list[dict[str, Any]]) -> None:
        self.plan = plan
        self.steps = [[str(s["id"]), str(s["tool"]), "done" if s.get("reused") else "waiting"] for s in steps]

    def mark(self, step: str, state: str) -> bool:
        for entry in self.steps:
            if entry[0] == step and entry[2] != "done":
                entry[2] = state
                return True
        return False

    def finish(self) -> None:
        for entry in self.steps:
            if entry[2] in ("waiting", "running"):
                entry[2] = "skipped"

    def text(self) -> str:
        return f"plan {self.plan}: " + " · ".join(
            f"{GLYPHS[st]} {sid} {tool}" for sid, tool, st in self.steps
        )


class ChatSink(EventSink):
    """Routes run events to the chat UI (on the event loop's thread, like every event)."""

    human = True

    def __init__(self, ui: ChatUI) -> None:
        self.ui = ui
        self.plan: StepList | None = None
        self.labels = CallLabels()

    def waiting(self, what: str | None) -> None:
        self.ui.set_waiting(what)

    def emit(self, event: str, **f: Any) -> None:
        # What models, servers and plans named or said is escaped before it reaches the screen.
        keep_lines = event in ("warning", "info")
        f = {k: safe(v, newlines=keep_lines) if isinstance(v, str) else v for k, v in f.items()}
        ui = self.ui
        if event == "tool_started":
            label = self.labels.started(f["tool"], f.get("call"))
            ui.activity(started_line(label, f.get("args")), "dim")
            ui.tool_started(label)
        elif event == "tool_finished":
            label = self.labels.finished(f["tool"], f.get("call"))
            ui.tool_finished(label)
            if f["tool"] == "plan_and_execute" and self.plan is not None:
                self.plan.finish()
                ui.activity(self.plan.text(), "dim")
                self.plan = None
            elif self.plan is not None:
                ui.set_status(self.plan.text())  # the list stays while the plan runs
            style = "red" if f.get("is_error") else "yellow" if f.get("message") else "green"
            ui.activity(
                finished_line(label, f.get("ms") or 0.0, bool(f.get("is_error")), f.get("message")), style
            )
        elif event == "planned":
            if self.plan is not None:  # a replan: the old list, as it ended, stays in the scrollback
                self.plan.finish()
                ui.activity(self.plan.text(), "dim")
            self.plan = StepList(str(f.get("plan")), list(f.get("steps") or []))
            ui.set_status(self.plan.text())
        elif event == "replan":
            ui.activity(replan_line(f), "yellow")
        elif event in ("step_started", "step_finished") and self.plan is not None:
            state = "running" if event == "step_started" else "failed" if f.get("is_error") else "done"
            self.plan.mark(str(f["step"]), state)
            ui.set_status(self.plan.text())
        elif event == "step_started":
            ui.set_status(f"step {f['step']} ({f['tool']})")
        elif event == "tool_progress":
            ui.tool_progress(self.labels.label(f["tool"], f.get("call")), progress_text(f))
        elif event == "progress":
            ui.set_status(f"{f['step']}: {f['done']}/{f['total']}")
        elif event == "warning":
            ui.activity(f"warning: {f['message']}", "yellow")
        elif event == "info":
            ui.activity(str(f["message"]), "dim")
