"""The `data` pack (always on): `builtin__reshape`, graph's generic reshape tool.

The calling step's own input render resolves the `shape` (its leaves are templates over the
step's data), so the tool returns it verbatim: text holding `{{ }}` in the data is never read as
a template again. Called by an agent (inputs not rendered by a plan) it returns the shape given.
"""

from __future__ import annotations

from typing import Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.packs.documents import pack_specs


class DataPackSource(ToolSource):
    def specs(self) -> list[ToolSpec]:
        return pack_specs("data")

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        if spec.name == "builtin__reshape":
            return ToolResult(arguments.get("shape"))
        return ToolResult.error(f"unknown data pack tool {spec.name}")
