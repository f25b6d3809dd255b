"""Assemble a command's catalog from the workspace: natives, MCP servers, plans, approvals, shapes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphchat.catalog.base import Catalog

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
    if record_shapes:
        catalog.record_shape = shape_recorder(settings)
    return catalog


def shape_recorder(settings: Settings):  # type: ignore[no-untyped-def]
    """A recorder that learns shapes off the event loop (see graphchat.shapes)."""
    from graphchat.shapes import ShapeStore

    store = ShapeStore(settings.catalog_dir / "shapes")

    def record(spec, value):  # type: ignore[no-untyped-def]
        store.record_background(spec.name, value, spec.output_schema)

    return record
