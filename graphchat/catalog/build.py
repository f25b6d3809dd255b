"""Assemble a command's catalog from the workspace: natives, MCP servers, plans, approvals, shapes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphchat.catalog.base import Catalog
from graphchat.catalog.core import CoreSource

if TYPE_CHECKING:
    from graphchat.events import EventSink
    from graphchat.workspace import Settings


def build_catalog(
    settings: Settings,
    *,
    events: EventSink | None = None,
    include_mcp: bool = True,
    include_plans: bool = True,
    record_shapes: bool = True,
) -> Catalog:
    """The one catalog of a command. Cheap: no server starts and no model import here."""
    from graphchat.catalog.approvals import make_approver
    from graphchat.catalog.native import NativeSource

    catalog = Catalog(approver=make_approver(settings))
    catalog.add_source(NativeSource(settings))
    if include_mcp:
        from graphchat.catalog.mcp_pool import McpSource

        catalog.add_source(McpSource(settings, events=events))
    if include_plans:
        from graphchat.catalog.plan_tools import PlanSource

        catalog.add_source(PlanSource(settings, catalog))
    catalog.add_source(CoreSource(settings, catalog))  # plan_and_execute
    if record_shapes:
        recorder = ShapeRecorderHook(settings)
        catalog.record_shape = recorder
        catalog.on_close(recorder.aclose)  # pending recordings are written before the process exits
    return catalog


class ShapeRecorderHook:
    """Learns shapes off the round's critical path (graphchat.shapes); `aclose` waits for the
    recordings still pending."""

    def __init__(self, settings: Settings) -> None:
        self.directory = settings.catalog_dir / "shapes"
        self._store = None

    @property
    def store(self):  # type: ignore[no-untyped-def]
        if self._store is None:
            from graphchat.shapes import ShapeStore

            self._store = ShapeStore(self.directory)
        return self._store

    def __call__(self, spec, value) -> None:  # type: ignore[no-untyped-def]
        self.store.record_async(spec.name, value, spec.output_schema)

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.drain()
