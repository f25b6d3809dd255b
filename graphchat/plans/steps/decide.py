"""`decide`: evaluate a gate, run `then` or `else` (only the chosen branch is rendered)."""

from __future__ import annotations

from typing import Any

from graphchat.plans.grammar import Results, Schema, Site, closed, or_null
from graphchat.plans.model import Step
from graphchat.plans.runtime import Frame, StepRunner

FIELDS = ("if", "infer", "model", "then", "else")
BODIES: tuple[str, ...] = ("then", "else")
ONLY_IN: str | None = None
PER_ITEM: tuple[str, ...] = ()
PER_ITEM_FIELDS: tuple[str, ...] = ()


def result(step: Step, known: Results) -> Schema:
    """`{branch, verdict, reason, result}`: `result` is the chosen branch's result, or null."""
    then, other = known.body("then"), known.body("else")
    branch_result: Schema = {} if "else" in step.bodies and other != then else or_null(then)
    return closed(
        {
            "branch": {"type": ["string", "null"]},
            "verdict": {"type": "boolean"},
            "reason": {"type": ["string", "null"]},
            "result": branch_result,
        }
    )


def tools(step: Step) -> tuple[str, ...] | None:
    """No tool: the step calls none itself (its bodies' steps are steps of their own)."""
    return ()


def sometimes(step: Step) -> tuple[str, ...]:
    """Its branches: only the chosen one runs."""
    return BODIES


def load(site: Site) -> None:
    """`if` (a logical gate) or `infer`; a `then` body and an optional `else` body, which
    see the plan's scope."""
    site.one_of("if", "infer", required=True)
    if "if" in site.spec:
        site.gate("if")
    site.infer()
    site.model()
    site.body("then", site.scope)
    site.body("else", site.scope, required=False)


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    data = step.input
    # the verdict is remembered (a parked run resumes down the same branch, its judge not asked again)
    verdict, reason = await runner.once(
        f"{runner.base}{frame.path}{step.label}#gate",
        lambda: runner.gate(step, data.get("if"), data.get("infer"), data.get("model"), scope),
    )
    branch = "then" if verdict else "else"
    body = step.bodies.get(branch)
    if body is None:
        return {"branch": None, "verdict": verdict, "reason": reason, "result": None}
    # Branch steps see the plan's scope; their own ids stay inside the branch.
    inner = Frame(
        f"{frame.prefix}{step.label}/{branch}/",
        frame.index,
        frame.turn,
        frame.ctx,
        f"{frame.path}{step.label}/{branch}/",
    )
    result = await runner.run_body(step, body, dict(scope), inner, branch)
    return {"branch": branch, "verdict": verdict, "reason": reason, "result": result}
