"""`filter`: keep the items of `over` whose gate holds; both halves in input order."""

from __future__ import annotations

from typing import Any

from graphchat.plans.gates import GateError, evaluate
from graphchat.plans.grammar import Results, Schema, Site, array_of, closed
from graphchat.plans.model import Step
from graphchat.plans.runtime import (
    Frame,
    StepFailed,
    StepRunner,
    checkpoint,
    describe,
    render_over,
    template_message,
)
from graphchat.plans.steps.pool import run_pool
from graphchat.template import EmptyData, TemplateError

FIELDS = ("over", "where", "infer", "model", "concurrency")
BODIES: tuple[str, ...] = ()
ONLY_IN: str | None = None
PER_ITEM: tuple[str, ...] = ("item", "index")
PER_ITEM_FIELDS: tuple[str, ...] = ("where", "infer")


def result(step: Step, known: Results) -> Schema:
    """`{count, items, dropped, dropped_count}`: both halves are elements of `over`."""
    item = known.over_item()
    return closed(
        {
            "count": {"type": "integer"},
            "items": array_of(item),
            "dropped": array_of(item),
            "dropped_count": {"type": "integer"},
        }
    )


def tools(step: Step) -> tuple[str, ...] | None:
    """No tool: the step calls none itself (its bodies' steps are steps of their own)."""
    return ()


def sometimes(step: Step) -> tuple[str, ...]:
    """None: every field is rendered whenever the step runs."""
    return ()


def load(site: Site) -> None:
    """`over`; `where` (a logical gate over `{{item}}`/`{{index}}`) or `infer`; `concurrency`."""
    site.one_of("where", "infer", required=True)
    gate_scope = site.scope.child(pseudo=PER_ITEM)
    if "where" in site.spec:
        site.gate("where", gate_scope)
    site.infer(gate_scope)
    site.model()
    site.positive_int("concurrency")
    site.over("over", ("item", "index"))


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    data = step.input
    over = render_over(step, scope)
    verdicts: list[bool]
    if data.get("infer") is not None:
        verdicts = await _inferred(runner, step, scope, over)
    else:
        verdicts = await _logical(step, scope, over, data.get("where"))
    items = [x for x, keep in zip(over, verdicts, strict=True) if keep]
    dropped = [x for x, keep in zip(over, verdicts, strict=True) if not keep]
    return {"count": len(items), "items": items, "dropped": dropped, "dropped_count": len(dropped)}


async def _logical(step: Step, scope: dict[str, Any], over: list[Any], where: Any) -> list[bool]:
    label = step.label
    item_scope = dict(scope)
    verdicts = []
    for index, item in enumerate(over):
        await checkpoint()  # a long list shares the loop
        item_scope["item"] = item
        item_scope["index"] = index
        try:
            verdicts.append(evaluate(where, item_scope, step=label)[0])
        except TemplateError as err:
            raise StepFailed(
                label,
                "filter",
                f"item {index}: {template_message(err)}",
                empty_data=isinstance(err, EmptyData),
                kind=type(err).__name__,
            ) from None
        except GateError as err:
            raise StepFailed(label, "filter", f"item {index}: gate: {err}") from None
    return verdicts


async def _inferred(runner: StepRunner, step: Step, scope: dict[str, Any], over: list[Any]) -> list[bool]:
    data = step.input
    concurrency = data.get("concurrency") or 1
    if not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1:
        raise StepFailed(
            step.label, "filter", f"`concurrency` must be an integer ≥ 1, got {describe(concurrency)}"
        )

    async def judge(index: int, item: Any) -> bool:
        item_scope = {**scope, "item": item, "index": index}
        try:
            verdict, _ = await runner.gate(step, None, data["infer"], data.get("model"), item_scope)
        except StepFailed as inner:
            raise StepFailed(
                step.label,
                "filter",
                f"item {index}: {inner.message}",
                empty_data=inner.empty_data,
                kind=inner.kind,
            ) from None
        return verdict

    return await run_pool(over, judge, concurrency)
