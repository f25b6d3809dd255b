"""Plans as tools (placeholder until the plan executor owner lands plan__* tools)."""

from __future__ import annotations

from typing import Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSpec


class PlanSource:
    def __init__(self, settings: Any, catalog: Any) -> None:
        self.settings = settings
        self.catalog = catalog

    def specs(self) -> list[ToolSpec]:
        return []

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult.error(f"unknown plan tool {spec.name}")

    async def aclose(self) -> None:
        pass
