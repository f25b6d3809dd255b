"""The table of tool sources, and the one catalog a command assembles from it.

`SOURCES` is to the catalog what the step table is to plans: one row a kind of source, in the
order the catalog lists them. It sits above `catalog/` (natives, packs, user tools, MCP) and
`plans/` (plan tools, `plan_and_execute`), so neither imports the other's sources; `host`
builds every command's catalog here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphchat.catalog.approvals import PolicyApprover
from graphchat.catalog.base import Catalog
from graphchat.catalog.mcp.pool import McpSource
from graphchat.catalog.native import NativeSource
from graphchat.catalog.packs import pack_sources
from graphchat.catalog.user_tools import UserToolSource
from graphchat.ci import memory_storage
from graphchat.fsutil import describe_failure, is_failed_write
from graphchat.plans.core_tools import CoreSource
from graphchat.plans.plan_tools import PlanSource
from graphchat.shapes import ShapeStore
from graphchat.threads.redact import Redactor, settings_secrets

if TYPE_CHECKING:
    from graphchat.catalog.approvals import PolicyApprover
    from graphchat.catalog.base import Approver, ToolSource
    from graphchat.events import EventSink
    from graphchat.workspace import Settings


log = logging.getLogger("graphchat.shapes")


@dataclass(frozen=True)
class Assembly:
    """What a source may need while the catalog is assembled."""

    settings: Settings
    catalog: Catalog
    policy: PolicyApprover
    events: EventSink | None


@dataclass(frozen=True)
class SourceRow:
    """One kind of source: `make` gives its sources; `switch` names the `build_catalog` flag
    that leaves it out (None: always there)."""

    name: str
    make: Callable[[Assembly], Iterable[ToolSource]]
    switch: str | None = None


def _natives(a: Assembly) -> Iterable[ToolSource]:
    return [NativeSource(a.settings)]


def _packs(a: Assembly) -> Iterable[ToolSource]:
    return pack_sources(a.settings)


def _user_tools(a: Assembly) -> Iterable[ToolSource]:
    return [UserToolSource(a.settings)]


def _mcp(a: Assembly) -> Iterable[ToolSource]:
    return [McpSource(a.settings, events=a.events, policy=a.policy)]


def _plans(a: Assembly) -> Iterable[ToolSource]:
    return [PlanSource(a.settings, a.catalog)]


def _core(a: Assembly) -> Iterable[ToolSource]:
    return [CoreSource(a.settings, a.catalog)]  # plan_and_execute


SOURCES: tuple[SourceRow, ...] = (
    SourceRow("native", _natives),
    SourceRow("packs", _packs),
    SourceRow("user", _user_tools),
    SourceRow("mcp", _mcp, switch="include_mcp"),
    SourceRow("plan", _plans, switch="include_plans"),
    SourceRow("core", _core),
)


def build_catalog(
    settings: Settings,
    *,
    events: EventSink | None = None,
    include_mcp: bool = True,
    include_plans: bool = True,
    record_shapes: bool = True,
    approver: Callable[[Approver], Approver] | None = None,
) -> Catalog:
    """The one catalog of a command: every row of `SOURCES` whose switch is on. Cheap: no server
    starts and no model import here.

    `approver` wraps the workspace's approval policy when a host has its own notion of
    consent (`mcp serve`: the client's call of a plan is its consent)."""
    policy = PolicyApprover(settings)  # also approves MCP servers' sampling requests
    catalog = Catalog(approver=approver(policy) if approver is not None else policy)
    switches: dict[str, Any] = {"include_mcp": include_mcp, "include_plans": include_plans}
    assembly = Assembly(settings, catalog, policy, events)
    for row in SOURCES:
        if row.switch is None or switches[row.switch]:
            for source in row.make(assembly):
                catalog.add_source(source)

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
                said = describe_failure(exc) if is_failed_write(exc) else exc
                log.warning("could not record the shape of %s: %s", tool, said)

    async def aclose(self) -> None:
        if self._closing is not None:
            self._closing.set()  # a pass waiting for more results starts now
        while self._flush is not None and not self._flush.done():
            await self._flush
        if self._store is not None:
            await self._store.drain()
