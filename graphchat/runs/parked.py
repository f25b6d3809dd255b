"""A parked run: where a run that waits for a person stopped, so that answering resumes it
(issue 9).

The record is `requests/runs/<id>.json` (mode 0600, written atomically). It holds the command
and the flags that change its behaviour, the working directory and workspace, the plan's
identifier, file and hash, the inputs, the position where the run last stopped (the top-level
steps done and their results — the scope —, the steps executed so far), the requests the run
waits on, and its state. Credentials are never in it: a resumed run takes them from its own
environment. The record is written when the run starts, parks, resumes and ends; between those,
each finished step is one line of the append-only `<id>.journal` (a top-level step with the
scope entries it added, a step below the top by its address): the record and its journal,
replayed (`replay`), are the run's position. A run that ends keeps both, as `finished` or
`failed`, until `runs/retention.py` prunes them (`settings.keep_runs`).

`PlanParking` is the executor's `Parking` for `plan run`: it opens the requests, journals each
finished step, writes the position when the run parks, and — in a resumed run — hands the
answers to the `ask` steps, so a run killed at any moment resumes without running a finished
step twice. While a process runs or resumes a run it holds an exclusive lock on `<id>.lock`
(released by the kernel even on `kill -9`).
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from graphchat.asks import TOOL_CALL, Answer, Asker, Parked, Question
from graphchat.errors import GraphchatError
from graphchat.fsutil import write_atomic
from graphchat.plans.runtime import PARKING_AT
from graphchat.runs.retention import prune_now_and_then
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
    def load(cls, store: RequestStore, run_id: str, folder: Path | None = None) -> RunRecord | None:
        """The record `run_id` (in `folder`: the store's `runs/` unless told), None: none."""
        folder = folder or store.dir / "runs"
        try:
            data = orjson.loads((folder / f"{run_id}.json").read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return cls(folder, run_id, data)

    def ended(self) -> bool:
        """Whether the run ended (finished or failed): nothing to resume."""
        return self.data.get("state") in ENDED

    def end(self, exit_code: int, error: str | None = None) -> None:
        """The run ended (any way but parked or interrupted): kept as `finished` (exit 0) or
        `failed` (with its exit code and the failure's line) until it is pruned."""
        self.data.update(
            state="finished" if exit_code == 0 and error is None else "failed",
            ended=time.time(),
            exit=exit_code,
        )
        if error is not None:  # one line (a problem list's lines joined)
            self.data["error"] = " ".join(part.strip() for part in error.splitlines() if part.strip())
        self.save()

    def refuse_ended(self) -> None:
        """An ended run is not resumed: one line saying how it ended (exit 1)."""
        if not self.ended():
            return
        when = _stamp(self.data.get("ended"))
        if self.data.get("state") == "finished":
            raise GraphchatError(f"run {self.id} finished at {when}; nothing to resume")
        error = self.data.get("error") or f"exit {self.data.get('exit')}"
        raise GraphchatError(
            f"run {self.id} failed at {when}: {error}; nothing to resume",
            hint="run it again from the start",
        )

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
        """running | parked | interrupted | finished | failed."""
        if self.ended():
            return str(self.data["state"])
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
        state = self.state(store)
        # an ended run keeps its last position in the record; another is replayed (its journal)
        done = int(self.data.get("done") or 0) if state in ENDED else replay(self).done
        steps = (self.data.get("plan") or {}).get("steps") or []
        started = self.data.get("started") or self.data.get("parked_at")
        return {
            "id": self.id,
            "plan": (self.data.get("plan") or {}).get("identifier"),
            "thread": self.data.get("thread"),
            "state": state,
            "started": _stamp(started),
            "last_step": steps[done - 1]["step"] if 0 < done <= len(steps) else None,
            "ended": _stamp(self.data.get("ended")),
            "exit": self.data.get("exit"),
            "error": self.data.get("error"),
            "requests": list(self.data.get("requests") or []),
        }


ENDED = ("finished", "failed")


def _stamp(when: float | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when)) if when else None


class Position:
    """Where a run stands: the top-level steps done, their scope, the steps executed so far,
    and what finished below the top-level step in flight (by address)."""

    def __init__(self, done: int, scope: dict[str, Any], steps_executed: int, below: dict[str, Any]):
        self.done = done
        self.scope = scope
        self.steps_executed = steps_executed
        self.below = below


def replay(record: RunRecord) -> Position:
    """The run's position: the record's (where it last stopped: started, parked), then its
    journal's lines in order — a top-level line (`done`) moves the position on and adds the
    scope entries of its step, a line below the top (`at`, `k`) counts only for the top-level
    step in flight. A line cut by a kill is skipped (that step runs again)."""
    import orjson

    saved = record.data.get("position") or {}
    position = Position(
        int(saved.get("done") or 0),
        dict(saved.get("scope") or {}),
        int(saved.get("steps_executed") or 0),
        dict(saved.get("finished") or {}),
    )
    try:
        lines = record.journal.read_bytes().splitlines()
    except OSError:
        return position
    for line in lines:
        try:
            entry = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if "done" in entry:
            if entry["done"] > position.done:  # (the lines before a park are in the record)
                position.done = entry["done"]
                position.scope.update(entry.get("scope") or {})
                position.steps_executed = int(entry.get("steps") or 0)
                position.below = {}
        elif entry.get("at") == position.done:
            position.below[entry["k"]] = entry.get("v")
    return position


def all_runs(store: RequestStore) -> list[RunRecord]:
    """Every run with a record in the workspace (any state, until pruned), oldest first."""
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


# The key of a server's own question during a step's tool call (a PlanAsker key).
SERVER_QUESTION = re.compile(r"#(sampling|elicitation):")


def stored_answer(request: Any) -> Answer:
    """A settled request as the Answer its question gets when the run resumes."""
    if request.state == "answered":
        return Answer(True, request.answer)
    # declined, expired, cancelled: the unanswered path
    note = request.reason if request.state == "declined" and request.reason != "declined" else None
    return Answer(False, None, request.state, note)


def question_source(question: Question) -> dict[str, Any]:
    """Where a parked question came from, as its request shows it: a server's own question
    during a tool call (`park_as`: sampling or elicitation) names the server and the tool, and
    a sampling request its prompt and token cap; an approval its tool and every argument."""
    context = question.context
    if context.get("park_as"):
        keys = ("park_as", "server", "tool", "prompt", "max_tokens")
        return {k: context[k] for k in keys if context.get(k) is not None}
    if question.kind == "approval":
        return {"tool": context.get("tool"), "arguments": context.get("arguments")}
    return {"tool": "ask_user"}


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
        # the permitted approvals: key -> (request id, the arguments the person saw)
        self.permitted: dict[str, tuple[str, Any]] = {}
        # every step finished below the top level, by address (Frame.path + label): the frames
        # of the run, flattened — a map's items and their body steps, a branch's steps, a
        # sub-plan's steps, a decide's verdict (issue 19)
        self.done_below: dict[str, Any] = {}
        self._journal: Any = None  # the open journal file of this run
        self._synced = time.monotonic()
        self._flush_pending = False
        self._at = 0  # the top-level step in flight (the journal lines' "at")
        self._position_now: Position | None = None  # a resumed run's, replayed
        self._journaled_scope: dict[str, Any] = {}  # the scope as the journal holds it
        if resumed:
            self.record.check_version()
            self._load_answers()
            self._position_now = replay(self.record)
            self.done_below = dict(self._position_now.below)
            self._at = self._position_now.done
            self._journaled_scope = dict(self._position_now.scope)

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

    def _append(self, key: str, value: Any) -> None:
        """One line a finished step, batched (issue 19's Decision): buffered here, written out
        `FLUSH_AFTER` later (one write for all the lines of that moment) and fsynced at least
        once a second, at park, at the end and on an interrupt (Ctrl-C, SIGTERM, SIGHUP).

        A `kill -9` may lose the lines still in the buffer — the steps of the last 50 ms: those
        steps run again on resume, like a call in flight (docs/cli.md, "Runs and resume")."""
        line = orjson.dumps({"at": self._at, "k": key, "v": value}, default=str)
        self._write(line)
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

    def _write(self, line: bytes) -> None:
        """One journal line, a held secret answer redacted (an ended run's journal is kept)."""
        if self._journal is None:
            self._journal = open(self.record.journal, "ab", buffering=1 << 20)  # noqa: SIM115 - open for the run
        self._journal.write(scrub(line) + b"\n")

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
        """The answers the resumed run's questions get: its latest park's, and every settled
        server question of the run (`<step>#sampling:S`, `#elicitation:S`, then `#2`, …): the
        call they came during is made again and its server asks each of them again."""
        self._load_parked_answers()
        for request in self.store.all(finished=True):
            key = request.key or ""
            if request.run == self.record.id and request.state != "open" and SERVER_QUESTION.search(key):
                self.answers.setdefault(key, stored_answer(request))

    def _load_parked_answers(self) -> None:
        for request_id in self.record.data.get("requests") or []:
            request = self.store.find(request_id)
            if request is None or request.key is None or request.state == "open":
                continue
            self.answers[request.key] = stored_answer(request)
            if request.state == "answered" and request.kind == "approval":
                self.permitted[request.key] = (request.id, request.source.get("arguments"))

    # -- the executor's side --

    def resumed_at(self) -> tuple[int, dict[str, Any], int]:
        position = self._position_now
        if position is None:
            return 0, {}, 0

        scope = dict(position.scope)
        restore(scope, [r for r in self.store.all(finished=True) if r.run == self.record.id])
        return position.done, scope, position.steps_executed

    def step_done(self, done: int, scope: dict[str, Any], steps_executed: int) -> None:
        """A top-level step finished: a checkpoint (a run killed now resumes after it) — one
        journal line with the scope entries the step added or changed, written out at once
        (not fsynced: that is the batch's); the record is not rewritten (issue 19)."""
        self.done_below.clear()  # its result (in the scope) is enough
        self._at = done
        if not self.journaled:
            return
        import orjson

        seen = self._journaled_scope
        added = {k: v for k, v in scope.items() if k != "input" and (k not in seen or seen[k] is not v)}
        seen.update(added)
        line = orjson.dumps({"done": done, "scope": added, "steps": steps_executed}, default=str)
        try:
            self._write(line)
            if time.monotonic() - self._synced >= 1.0:
                self._sync()
            else:
                self._flush()
        except OSError:  # a full disk: the step runs again if the run dies
            pass

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

    def check_permitted(self, key: str, arguments: Any) -> None:
        """A permitted call runs only with the arguments the person saw: the call made now
        (its arguments rendered again) with others is refused, naming them (exit 1)."""
        if key not in self.permitted:
            return
        request_id, seen = self.permitted[key]

        def same(value: Any) -> bytes:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)

        if same(seen) == same(arguments):
            return
        differ = sorted(
            name
            for name in {*(seen or {}), *(arguments or {})}
            if same((seen or {}).get(name)) != same((arguments or {}).get(name))
        )
        raise GraphchatError(
            f"request {request_id} permitted {key.split('#')[0]} with other arguments than it would "
            f"run with now ({', '.join(differ) or 'the arguments'} differ): not run",
            hint=f"the run stays as it is; end it with `graphchat cancel {self.record.id}`",
        )

    def open(self, question: Question, key: str, source: dict[str, Any], timeout: float | None) -> Any:
        mode, options, schema = request_mode(question)
        source = {"plan": (self.record.data.get("plan") or {}).get("identifier"), **source}
        if self.record.data.get("thread"):  # a plan a turn called: the turn's thread waits on it
            source["thread"] = self.record.data["thread"]
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

    def finished(self, exit_code: int = 0, error: str | None = None) -> None:
        """The run ended (any way but parked or interrupted): its record is kept as finished or
        failed (`graphchat runs`), its secret answers are sealed, and now and then the runs
        ended longer than `settings.keep_runs` ago are pruned (runs/retention.py)."""
        self.close_journal()
        if self.record.data.get("requests"):  # it parked once: its requests may hold secrets
            seal(self.store, self.record.id)
        if self.journaled:
            self.record.data["done"] = self._at
            try:
                self.record.end(exit_code, error)
            except OSError:  # a full disk: listed as interrupted; `resume` ends it again
                pass
        self.record.unlock()
        prune_now_and_then(self.store)


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
        self._asked: collections.Counter[str] = collections.Counter()  # server questions, by key

    @property
    def can_answer(self) -> bool:
        return self.inner.can_answer

    async def _ask(self, question: Question) -> Answer:
        return await self.inner._ask(question)

    def park(self, question: Question) -> Answer | None:
        stored = park_at_step(question, self._asked)  # inside a plan the turn called (issue 19)
        if stored is not None:
            return stored
        mode, options, _schema = request_mode(question)
        source: dict[str, Any] = {"thread": self.thread_id, **question_source(question)}
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


class SettledAsker(Asker):
    """The asker of a call a resumed `ask` turn makes again because its server's own question
    (sampling, elicitation: `park_as`) parked it: that question gets the person's stored
    answer, once; any other question nobody here can answer stays unavailable."""

    def __init__(self, inner: Asker, park_as: str, answer: Answer) -> None:
        super().__init__(inner.events)
        self.inner = inner
        self.park_as = park_as
        self.answer: Answer | None = answer

    @property
    def can_answer(self) -> bool:
        return False

    async def _ask(self, question: Question) -> Answer:
        return Answer.unavailable()

    def park(self, question: Question) -> Answer | None:
        if question.context.get("park_as") != self.park_as or self.answer is None:
            return None
        answer, self.answer = self.answer, None
        return answer


# --- the asker of a plan run that may park -----------------------------------------------------


class PlanAsker(Asker):
    """The asker of a `plan run` that may park: wraps the host's. An approval nobody here can
    give parks the run at the step whose call needs it (the address `PARKING_AT` holds, at any
    depth); in the resumed run the same call gets the person's permit or deny (issue 19). A
    server's own question during that call (sampling, elicitation) parks the same way under
    `<step>#sampling:SERVER` / `<step>#elicitation:SERVER`: the call is made again on resume and
    the stored answer settles the same question (issues 19, 25)."""

    def __init__(self, inner: Asker) -> None:
        super().__init__(inner.events)
        self.inner = inner
        self.lasting_answers = inner.lasting_answers
        self._asked: collections.Counter[str] = collections.Counter()  # server questions, by key

    @property
    def can_answer(self) -> bool:
        return self.inner.can_answer

    async def _ask(self, question: Question) -> Answer:
        return await self.inner._ask(question)

    def park(self, question: Question) -> Answer | None:
        return park_at_step(question, self._asked) or self.inner.park(question)


def park_at_step(question: Question, asked: collections.Counter[str]) -> Answer | None:
    """A question nobody here can answer, raised by the call of the plan step running now (the
    address `PARKING_AT` holds, at any depth): the person's answer in a resumed run, else it is
    opened as a request of the run and the step parks (`Parked`). None: no step of a run that
    may park is running (the caller decides).

    Its key is the step's address; within an `agent` step the model's call id too
    (`<step>#<call id>`), so two approvals, or a model's `ask_user`, in one step wait on
    distinct requests and each gets its own answer (issue 19); then `#approval` for an
    approval, or `#sampling:SERVER` / `#elicitation:SERVER` for a server's own question during
    the call — a server may ask several times in one call, the second and later `#2`, `#3`
    (counted in `asked`, by key: the call made again on resume asks in the same order; issue
    25). A plain tool step's approval: `<step>#approval`."""
    at = PARKING_AT.get()
    call = TOOL_CALL.get()
    server_question = question.context.get("park_as")  # sampling:SERVER, elicitation:SERVER
    if at is None or not (question.kind == "approval" or server_question or call is not None):
        return None  # a model's question needs its call to be told apart on resume
    parking, step = at
    key = step + (f"#{call}" if call is not None else "")
    if server_question:
        key += f"#{server_question}"
        asked[key] += 1
        key += f"#{asked[key]}" if asked[key] > 1 else ""
    elif question.kind == "approval":
        key += "#approval"
    stored = parking.answer_for(key)
    if stored is not None:
        if question.kind == "approval" and not server_question and stored.answered:
            parking.check_permitted(key, question.context.get("arguments"))  # exactly that call
        return stored  # type: ignore[no-any-return]
    source = {"step": step, **question_source(question)}
    raise Parked([parking.open(question, key, source, None)])
