"""`ask`: put a question to the person through the host's asker (serialized, in item order);
every answer is validated against the schema; `when_unanswered` decides the rest."""

from __future__ import annotations

from typing import Any

from graphchat.asks import Question, UnavailableAsker
from graphchat.plans.model import Step
from graphchat.plans.runtime import Frame, StepFailed, StepRunner, render, render_text


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    from graphchat.jsonschema_util import errors

    data = step.input
    prompt = render_text(step, data.get("prompt"), scope)
    schema = data.get("output_schema") or {"type": "object", "properties": {}}
    ctx = frame.ctx or runner.ctx
    asker = ctx.asker or UnavailableAsker()
    question = Question(
        prompt, schema=schema, key=step.id, context={"plan": runner.plan.identifier, "step": step.label}
    )
    if frame.turn is not None and frame.index is not None:
        await frame.turn.wait(frame.index)
    try:
        answer = await asker.ask(question)
    finally:
        if frame.turn is not None and frame.index is not None:
            await frame.turn.release(frame.index)
    if answer.answered:
        problems = errors(schema, answer.value)
        if problems:
            raise StepFailed(step.label, "ask", "the answer does not fit the schema: " + "; ".join(problems))
        return {"answer": answer.value, "answered": True}
    reason = answer.reason or "unavailable"
    if data.get("when_unanswered", "fail") == "default":
        default = render(step, data.get("default"), scope)
        problems = errors(schema, default)
        if problems:
            raise StepFailed(
                step.label, "ask", "the default answer does not fit the schema: " + "; ".join(problems)
            )
        return {"answer": default, "answered": False, "reason": reason}
    raise StepFailed(step.label, "ask", f"the question was not answered ({reason}): {prompt}")
