"""The one way an answer arrives (issue 19): `answer`, `permit`, `deny`, `decline`, a chat on a
parked thread — all settle a request through `settle`, which refuses an answer the run could
not resume with (its plan changed) before anything is recorded."""

from __future__ import annotations

from typing import Any

from graphchat.runs.parked import RunRecord
from graphchat.runs.plan import plan_of
from graphchat.runs.requests import Request, RequestStore


def settle(
    store: RequestStore,
    request_id: str,
    state: str,
    value: Any = None,
    reason: str | None = None,
    *,
    resumable: bool = True,
) -> Request:
    """Record the answer (`state` answered | declined | cancelled) exactly once. `resumable`:
    first check that the run it belongs to can resume (`--no-resume` records it all the same)."""
    request = store.get(request_id)
    if resumable:
        check_resumable(store, request)
    return store.settle(request_id, state, value, reason=reason)


def check_resumable(store: RequestStore, request: Request) -> None:
    """A parked plan whose file changed cannot resume: refused, naming the change (the request
    stays open)."""
    if request.run is None:
        return
    record = RunRecord.load(store, request.run)
    if record is not None and record.data.get("command") == "plan run":
        plan_of(record)


def still_waiting(store: RequestStore, request: Request) -> list[str]:
    """The other requests the run of `request` still waits on (open ones)."""
    if request.run is None:
        return []
    record = RunRecord.load(store, request.run)
    if record is None:
        return []
    ids = record.data.get("requests") or []
    return [i for i in ids if (r := store.find(i)) is not None and r.state == "open"]
