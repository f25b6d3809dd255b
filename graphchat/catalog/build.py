"""Assemble a command's catalog from the workspace: natives, MCP servers, plans, approvals, shapes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import Catalog
from graphchat.catalog.core import CoreSource

if TYPE_CHECKING:
    from graphchat.catalog.base import Approver
    from graphchat.events import EventSink
    from graphchat.workspace import Settings


log = logging.getLogger("graphchat.shapes")


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
    from graphchat.catalog.approvals import PolicyApprover
    from graphchat.catalog.native import NativeSource

    policy = PolicyApprover(settings)  # also approves MCP servers' sampling requests
    catalog = Catalog(approver=approver(policy) if approver is not None else policy)
    catalog.add_source(NativeSource(settings))
    from graphchat.catalog.packs import pack_sources
    from graphchat.catalog.user_tools import UserToolSource

    for source in [*pack_sources(settings), UserToolSource(settings)]:
        catalog.add_source(source)
    if include_mcp:
        from graphchat.catalog.mcp_pool import McpSource

        catalog.add_source(McpSource(settings, events=events, policy=policy))
    if include_plans:
        from graphchat.catalog.plan_tools import PlanSource

        catalog.add_source(PlanSource(settings, catalog))
    catalog.add_source(CoreSource(settings, catalog))  # plan_and_execute
    from graphchat.ci import memory_storage

    if record_shapes and not memory_storage():  # GRAPHCHAT_STORAGE=memory: no shape files
        recorder = ShapeRecorderHook(settings)
        catalog.record_shape = recorder
        catalog.on_close(recorder.aclose)  # pending recordings are written before the process exits
    return catalog


class ShapeRecorderHook:
    """Learns shapes off the round's critical path (graphchat.shapes), in batches: results wait
    in memory while one worker thread merges what came in since its last pass, one file write
    per tool a pass (a plan `map` over 100,000 items is not 100,000 rewrites). While results
    keep coming, a pass starts at most every `PASS_EVERY` seconds, so a long run makes a few
    passes, not one per turn of the loop. `aclose` waits for what is still pending (at once)."""

    PASS_EVERY = 0.5

    def __init__(self, settings: Settings) -> None:
        self.directory = settings.catalog_dir / "shapes"
        self.settings = settings
        self._store = None
        self._pending: dict[str, tuple[list[Any], Any]] = {}
        self._flush: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None

    @property
    def store(self):  # type: ignore[no-untyped-def]
        if self._store is None:
            from graphchat.shapes import ShapeStore
            from graphchat.threads.redact import Redactor, settings_secrets

            self._store = ShapeStore(self.directory, Redactor(settings_secrets(self.settings)))
        return self._store

    def __call__(self, spec, value) -> None:  # type: ignore[no-untyped-def]
        values, _ = self._pending.setdefault(spec.name, ([], spec.output_schema))
        values.append(value)
        if self._flush is None or self._flush.done():
            self._flush = asyncio.get_running_loop().create_task(self._drain_pending())

    async def _drain_pending(self) -> None:
        loop = asyncio.get_running_loop()
        self._closing = closing = asyncio.Event()  # of this loop (a warm helper runs several)
        while self._pending:
            await asyncio.sleep(0)  # results of the same round join this pass
            started = loop.time()
            batch, self._pending = self._pending, {}
            try:
                await asyncio.to_thread(self._write, batch)
            except Exception as exc:  # a cache must never break a call
                log.warning("could not record shapes: %s", exc)
            rest = self.PASS_EVERY - (loop.time() - started)
            if self._pending and rest > 0 and not closing.is_set():
                # more came in during the pass (a long run): let it gather, unless closing
                try:
                    await asyncio.wait_for(closing.wait(), rest)
                except TimeoutError:
                    pass

    def _write(self, batch: dict[str, tuple[list[Any], Any]]) -> None:
        for tool, (values, declared) in batch.items():
            try:
                self.store.record_many(tool, values, declared)
            except Exception as exc:
                from graphchat.fsutil import describe_failure, is_failed_write

                said = describe_failure(exc) if is_failed_write(exc) else exc
                log.warning("could not record the shape of %s: %s", tool, said)

    async def aclose(self) -> None:
        if self._closing is not None:
            self._closing.set()  # a pass waiting for more results starts now
        while self._flush is not None and not self._flush.done():
            await self._flush
        if self._store is not None:
            await self._store.drain()
