"""`exit`: end the plan early with success or error when its gate holds (no gate = always)."""

from __future__ import annotations

from typing import Any

from graphchat.plans.model import Step
from graphchat.plans.runtime import ExitFired, Frame, StepRunner, render, render_text

DEFAULT_MESSAGES = {"success": "plan exited early", "error": "plan asserted failure"}


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    data = step.input
    when, infer = data.get("when"), data.get("infer")
    reason: str | None = None
    if when is None and infer is None:
        fired = True
    else:
        fired, reason = await runner.gate(step, when, infer, data.get("model"), scope)
    if not fired:
        return {"passed": True, "verdict": False, "reason": reason}
    status = data.get("status", "success")
    message = data.get("message")
    message = render_text(step, message, scope) if message is not None else DEFAULT_MESSAGES[status]
    if reason:
        message = f"{message} ({reason})"
    output = render(step, data["output"], scope) if data.get("output") is not None else None
    raise ExitFired(status, message, frame.prefix + step.label, reason, output)
