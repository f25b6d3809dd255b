"""`reduce`: fold `over` through the `do` body; each result is the next `{{accumulator}}`."""

from __future__ import annotations

from typing import Any

from graphchat.plans.grammar import Results, Schema, Site, closed, or_null
from graphchat.plans.model import Step
from graphchat.plans.runtime import Frame, Progress, StepRunner, render, render_over

FIELDS = ("over", "do", "initial")
BODIES: tuple[str, ...] = ("do",)
ONLY_IN: str | None = None
PER_ITEM: tuple[str, ...] = ("item", "index", "accumulator")
PER_ITEM_FIELDS: tuple[str, ...] = ("do",)


def result(step: Step, known: Results) -> Schema:
    """`{count, result}`: the last body result (`initial` when `over` is empty: then its
    shape is not known here, unless there is none — null)."""
    body = known.body("do")
    return closed({"count": {"type": "integer"}, "result": {} if "initial" in step.input else or_null(body)})


def tools(step: Step) -> tuple[str, ...] | None:
    """No tool: the step calls none itself (its bodies' steps are steps of their own)."""
    return ()


def sometimes(step: Step) -> tuple[str, ...]:
    """None: every field is rendered whenever the step runs."""
    return ()


def load(site: Site) -> None:
    """`over`, `initial`; a `do` body run per item with `{{item}}`/`{{index}}`/`{{accumulator}}`."""
    site.over("over", ("item", "index", "accumulator"))
    site.over("initial", ("item", "index", "accumulator"))
    site.body("do", site.scope.child(pseudo=PER_ITEM))


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    over = render_over(step, scope)
    initial = step.input.get("initial")
    accumulator = render(step, initial, scope) if initial is not None else None
    body = step.bodies["do"]
    progress = Progress(runner.events, step.label, len(over))
    ctx = runner.quiet_ctx() if len(over) > 1 else frame.ctx
    prefix = f"{frame.prefix}{step.label}/do/"
    for index, item in enumerate(over):
        item_scope = dict(scope)
        item_scope["item"] = item
        item_scope["index"] = index
        item_scope["accumulator"] = accumulator
        accumulator = await runner.run_body(
            step,
            body,
            item_scope,
            Frame(prefix, index, frame.turn, ctx, f"{frame.path}{step.label}[{index}]/"),
            f"do item {index}",
        )
        progress.tick()
    return {"count": len(over), "result": accumulator}
