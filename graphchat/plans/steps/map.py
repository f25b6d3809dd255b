"""`map`: run the `do` body once per item of `over`, up to `concurrency` at once; results in
input order. Body calls count in steps_executed; progress shows `done/total`."""

from __future__ import annotations

from typing import Any

from graphchat.asks import Parked
from graphchat.llm.budget import MAX_MAP_ITEMS
from graphchat.plans.grammar import Results, Schema, Site, array_of, closed
from graphchat.plans.model import Step
from graphchat.plans.runtime import (
    AskTurn,
    Frame,
    Progress,
    StepFailed,
    StepRunner,
    describe,
    render,
    render_over,
)
from graphchat.plans.steps.pool import run_pool

FIELDS = ("over", "do", "concurrency")
BODIES: tuple[str, ...] = ("do",)
ONLY_IN: str | None = None
PER_ITEM: tuple[str, ...] = ("item", "index")
PER_ITEM_FIELDS: tuple[str, ...] = ("do",)


def result(step: Step, known: Results) -> Schema:
    """`{count, results}`: the `do` body's results, in input order."""
    return closed({"count": {"type": "integer"}, "results": array_of(known.body("do"))})


def tools(step: Step) -> tuple[str, ...] | None:
    """No tool: the step calls none itself (its bodies' steps are steps of their own)."""
    return ()


def sometimes(step: Step) -> tuple[str, ...]:
    """None: every field is rendered whenever the step runs."""
    return ()


def load(site: Site) -> None:
    """`over`; a `do` body run per item with `{{item}}`/`{{index}}`; `concurrency`."""
    site.positive_int("concurrency")
    site.over("over", ("item", "index", "accumulator"))
    site.body("do", site.scope.child(pseudo=PER_ITEM))


def concurrency_of(runner: StepRunner, step: Step, scope: dict[str, Any]) -> int:
    value = step.input.get("concurrency", 1)
    if isinstance(value, str):
        value = render(step, value, scope)
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise StepFailed(
            step.label, step.tool_name, f"`concurrency` must be an integer ≥ 1, got {describe(value)}"
        )
    return value


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    over = render_over(step, scope)
    total = len(over)
    limit = _max_items(runner)
    if total > limit:
        raise StepFailed(
            step.label,
            step.tool_name,
            f"`over` has {total:,} items, more than settings.max_map_items ({limit:,}); no item was run",
        )
    concurrency = concurrency_of(runner, step, scope)
    body = step.bodies["do"]
    progress = Progress(runner.events, step.label, total)
    # Questions keep item order even when items run concurrently.
    turn = AskTurn() if concurrency > 1 and total > 1 else None
    ctx = runner.quiet_ctx() if total > 1 else frame.ctx
    prefix = f"{frame.prefix}{step.label}/do/"
    # Parking (issues 9, 19): an item whose question waits parks; the others go on. What
    # finished — whole items and the body steps of an item in flight — is remembered by the
    # runner under each step's address, so a resumed map runs only what had not finished.
    waiting: list[Any] = []

    async def one(index: int, item: Any) -> Any:
        if runner.parking is None:
            return await item_run(index, item)
        try:
            return await item_run(index, item)
        except Parked as parked:
            waiting.extend(parked.requests)
            return PARKED

    async def item_run(index: int, item: Any) -> Any:
        item_scope = dict(scope)
        item_scope["item"] = item
        item_scope["index"] = index
        try:
            return await runner.run_body(
                step,
                body,
                item_scope,
                Frame(prefix, index, turn, ctx, f"{frame.path}{step.label}[{index}]/"),
                f"do item {index}",
            )
        finally:
            if turn is not None:
                await turn.release(index)

    results = await run_pool(over, one, concurrency, progress.tick)
    if waiting:
        raise Parked(waiting)
    return {"count": total, "results": results}


def _max_items(runner: StepRunner) -> int:
    """settings.max_map_items (its default when the run has no settings)."""
    limit = getattr(runner.settings, "max_map_items", None)
    if isinstance(limit, int):
        return limit

    return MAX_MAP_ITEMS


PARKED: Any = object()  # an item that waits for a person
