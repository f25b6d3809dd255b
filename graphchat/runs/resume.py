"""Resume or cancel a parked run (issue 19): one driver for every kind of run, from its record."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import ToolResult
from graphchat.errors import GraphchatError
from graphchat.host import load_settings
from graphchat.runs.answers import settle
from graphchat.runs.frames import TurnFrames
from graphchat.runs.parked import RunRecord
from graphchat.runs.plan import resume_plan
from graphchat.runs.requests import AlreadySettled
from graphchat.runs.turn import resume_ask
from graphchat.threads import lines as ev
from graphchat.threads.store import ThreadStore

if TYPE_CHECKING:
    from graphchat.runs.front import Front
    from graphchat.runs.parked import RunRecord
    from graphchat.runs.requests import Request, RequestStore


def resume(store: RequestStore, request: Request, front: Front) -> int:
    """Resume the parked run `request` belongs to, in this process."""
    record = RunRecord.load(store, request.run) if request.run else None
    if record is None:
        raise GraphchatError(
            f"the run of request {request.id} is not parked (it has finished, or never parked)"
        )
    record.refuse_ended()
    record.lock(request.id)
    command = record.data.get("command")
    if command == "plan run":
        return resume_plan(store, record, front)
    if command == "ask":
        return int(resume_ask(store, record, front))
    raise GraphchatError(f"the run of request {request.id} is a {command!r} run, which cannot resume here")


def resume_run(store: RequestStore, run_id: str, front: Front) -> int:
    """`graphchat resume RUN_ID`: continue an interrupted (or answered, parked) run in this
    process; nothing that finished runs again."""
    record = RunRecord.load(store, run_id)
    if record is None:
        raise GraphchatError(
            f"no run {run_id!r} to resume (it has finished, or never ran)",
            hint="`graphchat runs` lists the runs that can resume",
        )
    record.check_version()
    record.refuse_ended()
    state = record.state(store)
    if state == "running":
        raise GraphchatError(f"run {run_id} is running in another process")
    open_ids = [
        i for i in record.data.get("requests") or [] if (r := store.find(i)) is not None and r.state == "open"
    ]
    if open_ids:
        raise GraphchatError(
            f"run {run_id} waits on request {', '.join(open_ids)}",
            hint=f"answer it: graphchat answer {open_ids[0]} VALUE (or permit/deny it)",
        )
    record.lock(run_id)
    if record.data.get("command") == "plan run":
        return resume_plan(store, record, front)
    if record.data.get("command") == "ask":
        return int(resume_ask(store, record, front))
    raise GraphchatError(f"run {run_id} is a {record.data.get('command')!r} run, which cannot resume here")


def run_known(store: RequestStore, run_id: str) -> bool:
    """Whether `run_id` names a run or thread any request (settled ones included) belongs to."""
    return any(run_id in (r.run, r.source.get("thread")) for r in store.all(finished=True))


def record_for(store: RequestStore, some_id: str) -> RunRecord:
    """The parked run `some_id` names: a run id, a request id, or a parked turn's thread id."""
    record = RunRecord.load(store, some_id) if some_id.isalnum() else None
    if record is not None:
        return record
    request = store.find(some_id)
    if request is not None and request.run:
        record = RunRecord.load(store, request.run)
        if record is not None:
            return record
    folder = store.dir / "runs"
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = RunRecord.load(store, path.stem)
        if record is not None and record.data.get("thread") == some_id and not record.ended():
            return record
    raise GraphchatError(
        f"no parked run {some_id!r} (a run id, a request id or a thread id)",
        hint="`graphchat requests --json` shows each request's run",
    )


def cancel(store: RequestStore, some_id: str) -> tuple[RunRecord, list[str]]:
    """`graphchat cancel ID`: a parked run's open requests become cancelled, its record goes,
    and a parked `ask` turn's thread records the cancellation (its waiting calls get a
    "cancelled" result and the turn closes as failed, so the thread can go on). Returns the
    record and the requests cancelled."""
    record = record_for(store, some_id)
    if record.ended():
        raise GraphchatError(f"run {record.id} has ended ({record.data['state']}); nothing to cancel")
    record.lock(some_id)  # nobody resumes it meanwhile
    ids = list(record.data.get("requests") or [])
    cancelled = []
    for request_id in ids:
        request = store.find(request_id)
        if request is None or request.state != "open":
            continue
        try:
            settle(store, request_id, "cancelled", None, reason="cancelled", resumable=False)
        except AlreadySettled:
            continue
        cancelled.append(request_id)
    if record.data.get("command") == "ask" and record.data.get("thread"):
        _thread_records_cancel(record, ids)
        _drop_frames(store, record.data["thread"])
    record.delete()
    return record, cancelled


def _thread_records_cancel(record: RunRecord, ids: list[str]) -> None:
    """The parked turn's thread: each waiting call gets a "cancelled" result, and the turn
    closes as failed (left out of what the model is sent next; the thread can go on)."""
    workspace = Path(record.data["workspace"])
    try:
        threads_dir = load_settings(str(workspace)).threads_dir
    except GraphchatError:
        threads_dir = workspace / "threads"
    thread = ThreadStore(threads_dir).open(record.data["thread"])
    calls = record.data.get("calls") or []
    parked = {int(k) for k in (record.data.get("parked") or {})}
    held: dict[str, Any] = record.data.get("held") or {}
    thread.append(dict(ev.turn_resumed()))
    waited = parked | {int(k) for k in held}  # a turn parked again keeps the results made meanwhile
    for k in range(min(waited) if waited else len(calls), len(calls)):
        call = calls[k]
        if str(k) in held:
            kept = held[str(k)]
            content = ToolResult(kept.get("value"), bool(kept.get("is_error"))).to_text()
            is_error = bool(kept.get("is_error"))
        else:
            content, is_error = "cancelled: the person cancelled this call (graphchat cancel)", True
        thread.append(
            dict(ev.tool_result(call.get("id") or "", call.get("name") or "", content, is_error=is_error))
        )
    thread.append(dict(ev.turn_failed(f"cancelled (graphchat cancel): requests {', '.join(ids)}")))
    thread.close()


def _drop_frames(store: RequestStore, thread_id: str) -> None:
    """The frames the cancelled turn's plan calls kept (`runs/frames.py`) go with it."""
    folder = TurnFrames(store, thread_id).folder
    for path in sorted(folder.glob(f"{thread_id}.*.json")) if folder.is_dir() else []:
        RunRecord(folder, path.stem, {}).delete()
