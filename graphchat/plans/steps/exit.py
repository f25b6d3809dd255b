"""`exit`: end the plan early with success or error when its gate holds (no gate = always)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphchat.plans.grammar import Results, Schema, Site, closed, yaml_kind
from graphchat.plans.model import Step
from graphchat.plans.runtime import ExitFired, Frame, StepRunner, render, render_text

FIELDS = ("when", "infer", "model", "status", "message", "output")
BODIES: tuple[str, ...] = ()
ONLY_IN: str | None = "decide"
PER_ITEM: tuple[str, ...] = ()
PER_ITEM_FIELDS: tuple[str, ...] = ()
DEFAULT_MESSAGES = {"success": "plan exited early", "error": "plan asserted failure"}


def result(step: Step, known: Results) -> Schema:
    """When it does not fire: `{passed: true, verdict: false, reason}`."""
    return closed(
        {
            "passed": {"type": "boolean"},
            "verdict": {"type": "boolean"},
            "reason": {"type": ["string", "null"]},
        }
    )


def tools(step: Step) -> tuple[str, ...] | None:
    """No tool: the step calls none itself (its bodies' steps are steps of their own)."""
    return ()


def sometimes(step: Step) -> tuple[str, ...]:
    """`message` and `output` behind a gate: rendered only when it fires."""
    return ("message", "output") if "when" in step.input or "infer" in step.input else ()


def load(site: Site) -> None:
    """`when` (a logical gate) or `infer` (a question for the judge), or neither; `status`;
    an optional `message` and `output` map."""
    spec, report = site.spec, site.report
    site.one_of("when", "infer", required=False)
    if "when" in spec:
        site.gate("when")
    site.infer()
    site.model()
    status = spec.get("status")
    if status is None:
        report("status", "required: success or error")
    elif status not in ("success", "error"):
        report("status", f"must be success or error, got {status!r}")
    site.string("message", required=False)
    if "output" in spec and spec["output"] is not None:
        if not isinstance(spec["output"], Mapping):
            report("output", f"must be a template map (a mapping), got {yaml_kind(spec['output'])}")
        else:
            site.templates(spec["output"], "output")


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
