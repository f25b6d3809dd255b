"""A parked run: where a run that waits for a person stopped, so that answering resumes it
(issue 9).

The record is `requests/runs/<id>.json` (mode 0600, written atomically, deleted when the run
ends). It holds the command and the flags that change its behaviour, the working directory and
workspace, the plan's identifier, file and hash, the inputs, and the position: the top-level
steps done and their results (the scope), the steps executed so far, and the requests the run
waits on. Credentials are never in it: a resumed run takes them from its own environment.

`PlanParking` is the executor's `Parking` for `plan run`: it opens the requests, writes the
position when the run parks, and — in a resumed run — hands the answers to the `ask` steps
and checkpoints after every top-level step, so a resumed run killed mid-way resumes again
without running a finished step twice. While a process resumes a run it holds an exclusive
lock on `<id>.lock` (released by the kernel even on `kill -9`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.asks import Answer, Asker, Parked, Question
from graphchat.errors import GraphchatError
from graphchat.fsutil import write_atomic
from graphchat.plans.runtime import PARKING_AT
from graphchat.secret_answers import restore, scrub, seal
from graphchat.threads import lines as ev

if TYPE_CHECKING:
    from graphchat.events import EventSink
    from graphchat.plans.model import Plan
    from graphchat.runs.requests import RequestStore


# How long a finished step's journal line may wait in the buffer before it is written out (one
# write for every line of that moment; a step that waits on a server lets it out in time).
FLUSH_AFTER = 0.05

# The version of a run record; a record of another version is refused in one line.
RECORD_VERSION = 1


class RunRecord:
    def __init__(self, folder: Path, run_id: str, data: dict[str, Any]) -> None:
        self.folder = folder
        self.id = run_id
        self.data = data
        self._lock_fd: int | None = None

    @property
    def path(self) -> Path:
        return self.folder / f"{self.id}.json"

    @classmethod
    def new(cls, store: RequestStore, data: dict[str, Any]) -> RunRecord:
        return cls(store.dir / "runs", secrets.token_hex(6), data)

    @classmethod
    def load(cls, store: RequestStore, run_id: str) -> RunRecord | None:
        import orjson

        folder = store.dir / "runs"
        try:
            data = orjson.loads((folder / f"{run_id}.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return cls(folder, run_id, data)

    def check_version(self) -> None:
        """A record written by another version of the format: refused, naming it (exit 1)."""
        version = self.data.get("version", RECORD_VERSION)  # issue 9's records had none: version 1
        if version != RECORD_VERSION:
            raise GraphchatError(
                f"run {self.id} was recorded in format version {version}; this graphchat reads "
                f"version {RECORD_VERSION}",
                hint=f"run it again from the start, or remove it: graphchat cancel {self.id}",
            )

    @property
    def journal(self) -> Path:
        """The append-only journal of the steps finished below the top level (one JSON line each)."""
        return self.folder / f"{self.id}.journal"

    def save(self) -> None:
        import orjson

        data = orjson.dumps(self.data, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS, default=str)
        write_atomic(
            self.path, scrub(data)
        )  # a secret answer is never in it (issue 19)  # a temp file of mode 0600, renamed

    def delete(self) -> None:
        for path in (self.path, self.journal, self.folder / f"{self.id}.lock"):
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def lock(self, request_id: str) -> None:
        """Hold the run for this process (until it exits); another holder: exit 1."""
        import fcntl

        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / f"{self.id}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise GraphchatError(
                f"the run of request {request_id} is being resumed by another process"
            ) from None
        self._lock_fd = fd

    def unlock(self) -> None:
        """Let the run go (it parked or ended): the next `answer`/`resume` may hold it, from this
        process too (a long-lived `mcp serve`, the in-process tests)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing the descriptor releases its flock
            self._lock_fd = None

    def held_elsewhere(self) -> bool:
        """Whether a live process holds the run (it is running, or being resumed)."""
        import fcntl

        if self._lock_fd is not None:
            return False
        try:
            fd = os.open(self.folder / f"{self.id}.lock", os.O_RDWR)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing releases a lock taken here
        return False

    def state(self, store: RequestStore) -> str:
        """running | parked | interrupted (a finished run's record is gone)."""
        if self.held_elsewhere():
            return "running"
        waiting = [store.find(i) for i in self.data.get("requests") or []]
        if any(r is not None and r.state == "open" for r in waiting):
            return "parked"
        if self.data.get("state") == "parked" and waiting:
            return "parked"  # answered, not resumed yet: `graphchat resume` goes on
        return "interrupted"

    def summary(self, store: RequestStore) -> dict[str, Any]:
        """The `graphchat runs --json` shape of one run."""
        position = self.data.get("position") or {}
        done = int(position.get("done") or 0)
        steps = (self.data.get("plan") or {}).get("steps") or []
        started = self.data.get("started") or self.data.get("parked_at")
        return {
            "id": self.id,
            "plan": (self.data.get("plan") or {}).get("identifier"),
            "thread": self.data.get("thread"),
            "state": self.state(store),
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)) if started else None,
            "last_step": steps[done - 1]["step"] if 0 < done <= len(steps) else None,
            "requests": list(self.data.get("requests") or []),
        }


def all_runs(store: RequestStore) -> list[RunRecord]:
    """Every run with a record in the workspace (running, parked or interrupted), oldest first."""
    folder = store.dir / "runs"
    found = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        record = RunRecord.load(store, path.stem)
        if record is not None:
            found.append(record)
    return sorted(found, key=lambda r: r.data.get("started") or r.data.get("parked_at") or 0)


# --- the plan's fingerprint ------------------------------------------------------------------


def plan_fingerprint(plan: Plan) -> dict[str, Any]:
    """What a resumed run checks: the plan's file hash and one hash per top-level step."""
    import orjson

    digest = None
    if plan.path is not None:
        try:
            digest = hashlib.sha256(Path(plan.path).read_bytes()).hexdigest()
        except OSError:
            digest = None
    steps = []
    for step in plan.steps:
        raw = orjson.dumps(
            [step.id, step.tool_name, step.input, repr(step.bodies)], option=orjson.OPT_SORT_KEYS, default=str
        )
        steps.append({"step": step.label, "hash": hashlib.sha256(raw).hexdigest()[:16]})
    return {
        "identifier": plan.identifier,
        "path": str(plan.path) if plan.path else None,
        "sha256": digest,
        "steps": steps,
    }


def plan_change(saved: dict[str, Any], now: dict[str, Any]) -> str | None:
    """How the plan changed since the run parked (None: it did not)."""
    if saved.get("sha256") == now.get("sha256") and saved.get("steps") == now.get("steps"):
        return None
    old = {s["step"]: s["hash"] for s in saved.get("steps") or []}
    new = {s["step"]: s["hash"] for s in now.get("steps") or []}
    changed = [name for name in old if name in new and old[name] != new[name]]
    removed = [name for name in old if name not in new]
    added = [name for name in new if name not in old]
    parts = []
    if changed:
        parts.append("step " + ", ".join(changed) + " changed")
    if removed:
        parts.append("step " + ", ".join(removed) + " removed")
    if added:
        parts.append("step " + ", ".join(added) + " added")
    if not parts:
        parts.append(
            "its file changed (sha256 "
            + str(saved.get("sha256"))[:12]
            + " → "
            + str(now.get("sha256"))[:12]
            + ")"
        )
    return "; ".join(parts)


# --- the executor's parking for plan run -----------------------------------------------------


def request_mode(question: Question) -> tuple[str, list[str] | None, dict[str, Any] | None]:
    """(mode, options, schema) of a question."""
    if question.kind == "approval":
        return "approval", None, None
    if question.schema and (question.schema.get("properties") or {}):
        return "form", None, question.schema
    if question.options:
        return "options", list(question.options), None
    return "text", None, None


class PlanParking:
    """The `Parking` of one `plan run` (fresh or resumed)."""

    def __init__(
        self,
        store: RequestStore,
        record: RunRecord,
        events: EventSink | None = None,
        *,
        resumed: bool = False,
    ) -> None:
        self.store = store
        self.record = record
        self.events = events
        self.resumed = resumed
        self.answers: dict[str, Answer] = {}
        # every step finished below the top level, by address (Frame.path + label): the frames
        # of the run, flattened — a map's items and their body steps, a branch's steps, a
        # sub-plan's steps, a decide's verdict (issue 19)
        self.done_below: dict[str, Any] = {}
        self._journal: Any = None  # the open journal file of this run
        self._synced = time.monotonic()
        self._flush_pending = False
        self._at = 0  # the top-level step in flight (the journal lines' "at")
        if resumed:
            self.record.check_version()
            self._load_answers()
            position = self.record.data.get("position") or {}
            self.done_below = dict(position.get("finished") or {})
            self._at = int(position.get("done") or 0)
            self._read_journal(self._at)

    # -- the journal: every plan run, not only a parked one (issue 19) --

    def start(self) -> None:
        """A fresh run: its record is written now (state running, held by this process), so a
        run killed at any moment is listed by `graphchat runs` and resumed by `graphchat resume`."""
        self.record.data.update(version=RECORD_VERSION, started=time.time(), state="running")
        try:
            self.record.lock(self.record.id)
            self._position(0, {}, 0)
            self.record.save()
        except OSError:  # no room for a journal (a full disk): the run goes on, unjournaled
            self.record.data.pop("state", None)
            try:
                self.record.delete()  # no lock file nor partial record is left behind
            except OSError:
                pass

    def _read_journal(self, done: int) -> None:
        """The steps finished below the top-level step in flight (the lines of step `done`)."""
        import orjson

        try:
            lines = self.record.journal.read_bytes().splitlines()
        except OSError:
            return
        for line in lines:
            try:
                entry = orjson.loads(line)
            except orjson.JSONDecodeError:  # the last line, cut by a kill: that step runs again
                continue
            if entry.get("at") == done:
                self.done_below[entry["k"]] = entry.get("v")

    def _append(self, key: str, value: Any) -> None:
        """One line a finished step, batched (issue 19's Decision): buffered here, written out
        `FLUSH_AFTER` later (one write for all the lines of that moment) and fsynced at least
        once a second, at park, at the end and on an interrupt (Ctrl-C, SIGTERM, SIGHUP).

        A `kill -9` may lose the lines still in the buffer — the steps of the last 50 ms: those
        steps run again on resume, like a call in flight (docs/cli.md, "Runs and resume")."""
        import orjson

        if self._journal is None:
            self._journal = open(self.record.journal, "ab", buffering=1 << 20)  # noqa: SIM115 - open for the run
        line = orjson.dumps({"at": self._at, "k": key, "v": value}, default=str)
        self._journal.write(line + b"\n")
        now = time.monotonic()
        if now - self._synced >= 1.0:
            self._sync()
        elif not self._flush_pending:
            import asyncio

            try:
                asyncio.get_running_loop().call_later(FLUSH_AFTER, self._flush)
                self._flush_pending = True
            except RuntimeError:  # no loop (not the executor): written at once
                self._flush()

    def _flush(self) -> None:
        self._flush_pending = False
        if self._journal is not None and not self._journal.closed:
            try:
                self._journal.flush()
            except OSError:  # a full disk: those steps run again if the run dies
                pass

    def _sync(self) -> None:
        """Everything appended so far: written and fsynced."""
        self._synced = time.monotonic()
        if self._journal is not None and not self._journal.closed:
            try:
                self._journal.flush()
                os.fsync(self._journal.fileno())
            except OSError:
                pass

    def close_journal(self) -> None:
        """The run stops in this process (it ended, parked or was interrupted): flushed,
        fsynced, closed."""
        if self._journal is not None:
            self._sync()
            self._journal.close()
            self._journal = None

    def _load_answers(self) -> None:
        for request_id in self.record.data.get("requests") or []:
            request = self.store.find(request_id)
            if request is None or request.key is None or request.state == "open":
                continue
            if request.state == "answered":
                self.answers[request.key] = Answer(True, request.answer)
            else:  # declined, expired, cancelled: the unanswered path
                note = (
                    request.reason if request.state == "declined" and request.reason != "declined" else None
                )
                self.answers[request.key] = Answer(False, None, request.state, note)

    # -- the executor's side --

    def resumed_at(self) -> tuple[int, dict[str, Any], int]:
        position = self.record.data.get("position")
        if not self.resumed or not position:
            return 0, {}, 0

        scope = dict(position["scope"])
        restore(scope, [r for r in self.store.all(finished=True) if r.run == self.record.id])
        return int(position["done"]), scope, int(position.get("steps_executed") or 0)

    def step_done(self, done: int, scope: dict[str, Any], steps_executed: int) -> None:
        """A top-level step finished: a checkpoint (a run killed now resumes after it)."""
        self.done_below.clear()  # its result (in the scope) is enough
        if self.journaled:
            self._position(done, scope, steps_executed)
            self.record.save()

    @property
    def journaled(self) -> bool:
        return self.resumed or self.record.data.get("state") is not None

    def parked(self, done: int, scope: dict[str, Any], steps_executed: int, requests: list[Any]) -> None:
        self.close_journal()
        self._position(done, scope, steps_executed)
        self.record.data["state"] = "parked"
        self.record.data["requests"] = [r["id"] for r in requests]
        self.record.data["parked_at"] = time.time()
        try:
            self.record.save()
        except OSError:  # a full disk: no open request is left without the run that waits on it
            for request in requests:
                self.store.discard(request["id"])
            raise
        finally:
            self.record.unlock()

    def _position(self, done: int, scope: dict[str, Any], steps_executed: int) -> None:
        self._at = done
        self.record.data["position"] = {
            "done": done,
            "scope": {k: v for k, v in scope.items() if k != "input"},
            "steps_executed": steps_executed,
            # below the top: what finished inside the top-level step in flight (the others'
            # results are in the scope)
            "finished": self.done_below,
        }

    def remember(self, key: str, value: Any) -> None:
        self.done_below[key] = value
        if self.journaled:
            self._append(key, value)

    def remembered(self, key: str) -> tuple[bool, Any]:
        if key in self.done_below:
            return True, self.done_below[key]
        return False, None

    # -- the ask step's side --

    def answer_for(self, key: str) -> Answer | None:
        return self.answers.pop(key, None)

    def open(self, question: Question, key: str, source: dict[str, Any], timeout: float | None) -> Any:
        mode, options, schema = request_mode(question)
        source = {"plan": (self.record.data.get("plan") or {}).get("identifier"), **source}
        request = self.store.open(
            kind="approval" if mode == "approval" else "question",
            mode=mode,
            question=question.prompt,
            source=source,
            options=options,
            schema=schema,
            free=True,
            run=self.record.id,
            key=key,
            timeout=timeout,
            hint=question.hint,
        )
        if self.events is not None:
            self.events.emit("request_opened", **request.public())
        return request.public()

    def finished(self) -> None:
        """The run ended (any way but parked): its record goes, its secret answers too."""

        self.close_journal()
        if self.record.data.get("requests"):  # it parked once: its requests may hold secrets
            seal(self.store, self.record.id)
        self.record.unlock()
        self.record.delete()


def waiting_on(thread: Any) -> list[str]:
    """The requests a thread's parked turn waits on (none: its last turn is not parked)."""

    waiting: list[str] = []
    for event in thread.events():
        if event.get("kind") == ev.TURN_PARKED:
            waiting = list(event.get("requests") or [])
        elif event.get("kind") in (ev.TURN_RESUMED, ev.TURN_END, ev.TURN_FAILED, ev.USER):
            waiting = []
    return waiting


# --- the asker of a headless `ask` -----------------------------------------------------------


class ParkingAsker(Asker):
    """The asker of a headless `ask` (nobody here): wraps `inner`, and a question it cannot
    answer — an approval of a sensitive tool, the model's `ask_user` — is opened as a request
    and its call parks (`asks.Parked`); the agent loop holds the call, the turn parks."""

    def __init__(self, inner: Asker, store: RequestStore, events: EventSink | None = None) -> None:
        super().__init__(inner.events)
        self.inner = inner
        self.store = store
        self.sink = events
        self.thread_id: str | None = None

    @property
    def can_answer(self) -> bool:
        return self.inner.can_answer

    async def _ask(self, question: Question) -> Answer:
        return await self.inner._ask(question)

    def park(self, question: Question) -> None:
        mode, options, _schema = request_mode(question)
        source: dict[str, Any] = {"thread": self.thread_id}
        if question.kind == "approval":
            source["tool"] = question.context.get("tool")
            source["arguments"] = question.context.get("arguments")
        else:
            source["tool"] = "ask_user"
        request = self.store.open(
            kind="approval" if mode == "approval" else "question",
            mode=mode,
            question=question.prompt,
            source=source,
            options=options,
            schema=question.schema if mode == "form" else None,
            free=True,
        )
        if self.sink is not None:
            self.sink.emit("request_opened", **request.public())
        raise Parked([request.public()])


# --- the asker of a plan run that may park -----------------------------------------------------


class PlanAsker(Asker):
    """The asker of a `plan run` that may park: wraps the host's. An approval nobody here can
    give parks the run at the step whose call needs it (the address `PARKING_AT` holds, at any
    depth); in the resumed run the same call gets the person's permit or deny (issue 19)."""

    def __init__(self, inner: Asker) -> None:
        super().__init__(inner.events)
        self.inner = inner
        self.lasting_answers = inner.lasting_answers

    @property
    def can_answer(self) -> bool:
        return self.inner.can_answer

    async def _ask(self, question: Question) -> Answer:
        return await self.inner._ask(question)

    def park(self, question: Question) -> Answer | None:
        at = PARKING_AT.get()
        if at is None or question.kind != "approval":
            return self.inner.park(question)
        parking, step = at
        key = f"{step}#approval"
        stored = parking.answer_for(key)
        if stored is not None:
            return stored  # type: ignore[no-any-return]
        source = {
            "step": step,
            "tool": question.context.get("tool"),
            "arguments": question.context.get("arguments"),
        }
        raise Parked([parking.open(question, key, source, None)])
