"""MCP servers (placeholder until the catalog owner lands the server pool)."""

from __future__ import annotations

from typing import Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSpec


class McpSource:
    def __init__(self, settings: Any, events: Any = None) -> None:
        self.settings = settings

    def specs(self) -> list[ToolSpec]:
        return []

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        return ToolResult.error(f"unknown MCP tool {spec.name}")

    async def aclose(self) -> None:
        pass
