"""Assemble a command's catalog from the workspace: natives, MCP servers, plans, approvals, shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from graphchat.catalog.base import Catalog

if TYPE_CHECKING:
    from graphchat.catalog.base import Approver
    from graphchat.events import EventSink
    from graphchat.workspace import Settings


def build_catalog(
    settings: Settings,
    *,
    events: EventSink | None = None,
    include_mcp: bool = True,
    include_plans: bool = True,
    record_shapes: bool = True,
    approver: Callable[[Approver], Approver] | None = None,
) -> Catalog:
    """The one catalog of a command. Cheap: no server starts and no model import here.

    `approver` wraps the workspace's approval policy when a host has its own notion of
    consent (`mcp serve`: the client's call of a plan is its consent)."""
    from graphchat.catalog.approvals import make_approver
    from graphchat.catalog.native import NativeSource

    policy = make_approver(settings)
    catalog = Catalog(approver=approver(policy) if approver is not None else policy)
    catalog.add_source(NativeSource(settings))
    from graphchat.catalog.packs import pack_sources
    from graphchat.catalog.user_tools import UserToolSource

    for source in [*pack_sources(settings), UserToolSource(settings)]:
        catalog.add_source(source)
    if include_mcp:
        from graphchat.catalog.mcp_pool import McpSource

        catalog.add_source(McpSource(settings, events=events))
    if include_plans:
        from graphchat.catalog.plan_tools import PlanSource

        catalog.add_source(PlanSource(settings, catalog))
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
        self.settings = settings
        self._store = None

    @property
    def store(self):  # type: ignore[no-untyped-def]
        if self._store is None:
            from graphchat.shapes import ShapeStore
            from graphchat.threads.redact import Redactor, settings_secrets

            self._store = ShapeStore(self.directory, Redactor(settings_secrets(self.settings)))
        return self._store

    def __call__(self, spec, value) -> None:  # type: ignore[no-untyped-def]
        self.store.record_async(spec.name, value, spec.output_schema)

    async def aclose(self) -> None:
        if self._store is not None:
            await self._store.drain()
