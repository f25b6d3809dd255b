"""The frames of a plan a turn called (issue 19): a `plan__x` tool or `plan_and_execute`
called by the model of a headless `ask` turn keeps its own parked-run record, keyed by the
thread and the call id
(`requests/runs/frames/<thread>.<call id>.json`, journaled like a `plan run`). The turn itself
resumes from its thread; when it does, the waiting call is made again through here and the
plan resumes inside its frames: what finished does not run again, the answer reaches the plan's
`ask` step (or the permit its approval), and the plan's output is the tool result the model
sees. A plan that waits again parks the turn again, on the new request.

The plan runs with this record as its `CallContext.parking` — the parking `mcp serve` gives a
plan its client called; nothing here is particular to turns but the key. `plan_and_execute`
keeps the plan its planner drafted at `#plan<n>` and that plan's steps under `#plan<n>/`.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from graphchat.asks import TURN_FRAMES, Parked
from graphchat.plans.model import plan_identifier
from graphchat.plans.planner import PLAN_AND_EXECUTE
from graphchat.runs.parked import PlanParking, RunRecord

if TYPE_CHECKING:
    from graphchat.catalog.base import CallContext, Catalog, ToolResult
    from graphchat.runs.parked import PlanParking, RunRecord
    from graphchat.runs.requests import RequestStore


class _Framed:
    """A plan call's parking (a `PlanParking`) that remembers whether the plan parked."""

    def __init__(self, inner: PlanParking) -> None:
        self.inner = inner
        self.requests: list[dict[str, Any]] | None = None
        self.opened: set[str] = set()  # the requests opened inside the plan

    def open(self, question: Any, key: str, source: dict[str, Any], timeout: float | None) -> Any:
        request = self.inner.open(question, key, source, timeout)
        self.opened.add(request["id"])
        return request

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def parked(self, done: int, scope: dict[str, Any], steps_executed: int, requests: list[Any]) -> None:
        self.inner.parked(done, scope, steps_executed, requests)
        self.requests = list(requests)


class TurnFrames:
    """The frames of one turn's plan calls (`asks.TURN_FRAMES` while the turn runs)."""

    def __init__(self, store: RequestStore, thread_id: str) -> None:
        self.store = store
        self.thread_id = thread_id

    @staticmethod
    def keeps(name: str) -> bool:
        """Whether a call of tool `name` keeps frames (a plan tool, `plan_and_execute`)."""
        return plan_identifier(name) is not None or name == PLAN_AND_EXECUTE

    def record_id(self, call_id: str) -> str:
        return f"{self.thread_id}.{re.sub(r'[^A-Za-z0-9_-]', '_', call_id)}"

    def record(self, call_id: str) -> RunRecord | None:
        """The kept record of call `call_id` (None: it never parked, or it finished)."""
        record = RunRecord.load(self.store, self.record_id(call_id), folder=self.folder)
        return None if record is None or record.ended() else record

    @property
    def folder(self) -> Any:
        return self.store.dir / "runs" / "frames"

    async def call(
        self, catalog: Catalog, call_id: str, name: str, arguments: Any, ctx: CallContext
    ) -> ToolResult:
        """Make the plan call `call_id` (again): a fresh one journals its steps, one that parked
        before resumes where it stopped. A plan that parks raises `asks.Parked` (the turn parks
        on its requests); its record stays until the call finishes."""
        record = self.record(call_id)
        resumed = record is not None
        if record is None:
            data = {
                "command": "turn call",
                "thread": self.thread_id,
                "call": call_id,
                "tool": name,
                "plan": {"identifier": plan_identifier(name) or name},
            }
            record = RunRecord(self.folder, self.record_id(call_id), data)
        parking = _Framed(PlanParking(self.store, record, None, resumed=resumed))
        if resumed:
            record.lock(record.id)
        else:
            parking.start()  # journaled from its first step: a kill -9 loses nothing finished
        token = TURN_FRAMES.set(None)
        try:
            result = await catalog.call(name, arguments, replace(ctx, parking=parking))
        except Parked as waiting:
            if any(r["id"] in parking.opened for r in waiting.requests):
                # a question inside the plan `plan_and_execute` runs (its frames are nested)
                parking.parked(0, {}, 0, waiting.requests)
                raise
            if not resumed:  # the call's own approval waits (before the plan ran): nothing to keep
                record.delete()
            record.unlock()
            raise
        except BaseException:
            parking.close_journal()  # interrupted: what finished is on disk, the call resumes
            record.unlock()
            raise
        finally:
            TURN_FRAMES.reset(token)
        if parking.requests is not None:
            raise Parked(parking.requests)
        parking.finished()
        record.delete()  # a frame is kept only while its call waits: the thread holds the result
        return result
