"""Native tools (placeholder until the agent-loop owner lands ask_user and builtin__infer)."""

from __future__ import annotations

from typing import Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSpec


class NativeSource:
    def __init__(self, settings: Any) -> None:
        self.settings = settings

    def specs(self) -> list[ToolSpec]:
        return []

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult.error(f"unknown native tool {spec.name}")

    async def aclose(self) -> None:
        pass
