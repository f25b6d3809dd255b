"""The reserved `core` tools: `plan_and_execute` (graphchat.plans.planner).

It is offered to a chat's model but not inside plan `agent` steps (`meta.not_in_plans`), and
its depth guard (the call chain) stops a plan it runs from starting it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.llm.types import Usage
from graphchat.plans.planner import DESCRIPTION, INPUT_SCHEMA, PLAN_AND_EXECUTE, plan_and_execute

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog


class CoreSource(ToolSource):
    """`plan_and_execute` over the catalog it belongs to."""

    def __init__(self, settings: Any, catalog: Catalog, *, llm_factory: Any = None) -> None:
        self.settings = settings
        self.catalog = catalog
        self._llm_factory = llm_factory

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name=PLAN_AND_EXECUTE,
                description=DESCRIPTION,
                input_schema=INPUT_SCHEMA,
                source="core",
                # Asking to approve the planning itself would ask twice: every call the plan
                # makes goes through Catalog.call and its approvals, one by one.
                family="read",
                meta={"not_in_plans": True},
            )
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        goal = arguments.get("query") or arguments.get("goal")
        if not isinstance(goal, str) or not goal.strip():
            return ToolResult.error("plan_and_execute requires a 'query' string (the task to plan)")
        context = arguments.get("context")
        run = await plan_and_execute(
            goal,
            catalog=self.catalog,
            ctx=ctx,
            settings=self.settings,
            llm_factory=self._llm_factory,
            events=ctx.events,
            context=context if isinstance(context, str) else None,
        )
        on_usage = ctx.on_usage
        if callable(on_usage) and run.usage:
            on_usage(
                Usage(
                    input_tokens=int(run.usage.get("input_tokens") or 0),
                    output_tokens=int(run.usage.get("output_tokens") or 0),
                    calls=int(run.usage.get("calls") or 0),
                )
            )
        return run.tool_result()
