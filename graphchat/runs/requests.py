"""Requests: questions and approvals that wait for a person (issue 9).

A request is one file in the workspace's `requests/` folder, `<id>.json`, mode 0600, written
atomically. Its id is short and unique in the workspace (created with a hard link, which fails
when the name is taken). An answer is claimed exactly once, even across processes: the
claimer creates `<id>.claim` with O_EXCL, and only the process that created it settles the
request. What a request's answer text means depends on its mode (`read_answer`).
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from graphchat.asks import answer_property, coerce
from graphchat.errors import GraphchatError
from graphchat.fsutil import failed_write_message, write_atomic, writing
from graphchat.jsonschema_util import errors
from graphchat.runs import claims
from graphchat.runs.parked import RunRecord

MODES = ("text", "options", "form", "approval")
STATES = ("open", "answered", "declined", "expired", "cancelled")
FINISHED = ("answered", "declined", "expired", "cancelled")


class AlreadySettled(GraphchatError):
    """The request was answered, declined, expired or cancelled before this claim (exit 1)."""


@dataclass
class Request:
    id: str
    kind: str  # question | approval
    mode: str  # text | options | form | approval
    question: str
    source: dict[str, Any] = field(default_factory=dict)
    options: list[str] | None = None
    schema: dict[str, Any] | None = None
    free: bool = True  # an options request accepts an answer not among its options
    opened_at: float = 0.0
    state: str = "open"
    run: str | None = None  # the parked run's record id
    key: str | None = None  # where in the run the answer goes (plan: the step path)
    expires_at: float | None = None
    answer: Any = None
    reason: str | None = None
    settled_at: float | None = None
    always: bool = False  # permit --always
    hint: str | None = None  # shown under the question (a plan `ask` step's `hint`)

    def public(self) -> dict[str, Any]:
        """The `requests --json` shape of one request."""
        data: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "mode": self.mode,
            "question": self.question,
        }
        if self.hint:
            data["hint"] = self.hint
        if self.options is not None:
            data["options"] = self.options
        if self.schema is not None:
            data["schema"] = self.schema
        data["source"] = self.source
        if self.run:
            data["run"] = self.run
        data["opened_at"] = iso(self.opened_at)
        data["state"] = self.state
        if self.state != "open":
            data["answer"] = self.answer
            if self.reason:
                data["reason"] = self.reason
        return data

    @property
    def answer_command(self) -> str:
        if self.kind == "approval":
            return f"graphchat permit {self.id}   (or: graphchat deny {self.id})"
        return f"graphchat answer {self.id} VALUE"


def iso(stamp: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(stamp))


def _from_json(data: dict[str, Any]) -> Request:
    names = set(Request.__dataclass_fields__)
    return Request(**{k: v for k, v in data.items() if k in names})


class RequestStore:
    """The workspace's `requests/` folder."""

    def __init__(self, workspace: Path) -> None:
        self.dir = workspace / "requests"

    def path(self, request_id: str) -> Path:
        return self.dir / f"{request_id}.json"

    def open(
        self,
        *,
        kind: str,
        mode: str,
        question: str,
        source: dict[str, Any],
        options: list[str] | None = None,
        schema: dict[str, Any] | None = None,
        free: bool = True,
        run: str | None = None,
        key: str | None = None,
        timeout: float | None = None,
        hint: str | None = None,
    ) -> Request:
        """A new open request with a fresh id, on disk before this returns."""
        import orjson

        assert mode in MODES and kind in ("question", "approval")
        self.dir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        request = Request(
            id="",
            kind=kind,
            mode=mode,
            question=question,
            source=source,
            options=options,
            schema=schema,
            free=free,
            opened_at=now,
            run=run,
            key=key,
            expires_at=now + timeout if timeout else None,
            hint=hint,
        )
        for length in (6, 6, 6, 8, 8, 12):
            request.id = secrets.token_hex(length // 2)
            tmp = self.dir / f".{request.id}.{os.getpid()}.new"
            with writing(self.path(request.id)):
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    with os.fdopen(fd, "wb") as handle:
                        handle.write(orjson.dumps(asdict(request), option=orjson.OPT_INDENT_2))
                except BaseException:  # a full disk: no temp file left behind
                    tmp.unlink(missing_ok=True)
                    raise
            try:
                os.link(tmp, self.path(request.id))  # fails when the id is taken: unique ids
            except FileExistsError:
                continue
            finally:
                os.unlink(tmp)
            return request
        raise GraphchatError(f"could not find a free request id in {self.dir}")

    def get(self, request_id: str) -> Request:
        request = self._read(self.path(request_id)) if _valid_id(request_id) else None
        if request is None:
            raise GraphchatError(
                f"no request {request_id!r} in {self.dir}", hint="`graphchat requests` lists them"
            )
        return self._expire(request)

    def _raw(self, request_id: str) -> Request:
        """The request as stored (no expiry check)."""
        request = self._read(self.path(request_id)) if _valid_id(request_id) else None
        if request is None:
            raise GraphchatError(f"no request {request_id!r} in {self.dir}")
        return request

    def find(self, request_id: str) -> Request | None:
        try:
            return self.get(request_id)
        except GraphchatError:
            return None

    def all(self, *, finished: bool = False) -> list[Request]:
        """Open requests, oldest first (`finished`: every request)."""
        if not self.dir.is_dir():
            return []
        found = []
        for path in self.dir.glob("*.json"):
            request = self._read(path)
            if request is None:
                continue
            request = self._expire(request)
            if finished or request.state == "open":
                found.append(request)
        return sorted(found, key=lambda r: (r.opened_at, r.id))

    def save(self, request: Request) -> None:
        import orjson

        write_atomic(self.path(request.id), orjson.dumps(asdict(request), option=orjson.OPT_INDENT_2))

    def settle(self, request_id: str, state: str, answer: Any = None, reason: str | None = None) -> Request:
        """Claim the request and settle it (answered, declined, expired, cancelled) exactly once:
        a second claim, from any process, raises AlreadySettled. A claim whose process is gone
        while the request is still open is taken over (`graphchat.runs.claims`)."""
        assert state in FINISHED
        request = self._raw(request_id)
        if request.state != "open":
            raise AlreadySettled(f"request {request_id} was already {request.state}")
        path = self.dir / f"{request_id}.claim"
        try:
            claims.claim(
                path, {"state": state, "answer": answer, "reason": reason}, self._still_open(request_id)
            )
        except OSError as exc:  # a full or read-only disk: nothing was claimed
            raise _unwritten(exc, request_id) from None
        except claims.Held as held:
            now = self._raw(request_id)
            if now.state != "open":
                raise AlreadySettled(f"request {request_id} was already {now.state}") from None
            raise AlreadySettled(
                f"request {request_id} was already answered (process {held.holder.get('pid')} is settling it)"
            ) from None
        request = self._raw(request_id)
        request.state, request.answer, request.reason = state, answer, reason
        request.settled_at = time.time()
        try:
            self.save(request)
        except OSError as exc:
            claims.release(path)  # never half-claimed: the request stays open
            raise _unwritten(exc, request_id) from None
        except BaseException:
            claims.release(path)
            raise
        return request

    def recover(self, request_id: str) -> Request:
        """The request; when it is still open under a stale claim that recorded its settlement
        (its claimer died before writing it), that settlement is finished now."""
        request = self._raw(request_id)
        if request.state != "open":
            return request
        path = self.dir / f"{request_id}.claim"
        holder = claims.stale(path, self._still_open(request_id))
        if holder is None:
            return request
        request.state, request.answer, request.reason = (
            holder["state"],
            holder.get("answer"),
            holder.get("reason"),
        )
        request.settled_at = time.time()
        try:
            self.save(request)
        except BaseException:
            claims.release(path)
            raise
        return request

    def _still_open(self, request_id: str) -> Any:
        return lambda: self._raw(request_id).state == "open"

    def discard(self, request_id: str) -> None:
        """Remove a request just opened whose run could not park (best effort)."""
        if _valid_id(request_id):
            self.path(request_id).unlink(missing_ok=True)

    def prune(self, older_than_days: float) -> int:
        """Remove the files of finished requests settled more than `older_than_days` ago whose
        run has ended; how many. A request whose run is still parked (answered, not resumed
        yet) stays: resuming reads its answer. Run records (`runs/`) are never touched."""
        cutoff = time.time() - older_than_days * 86400
        removed = 0
        for request in self.all(finished=True):
            if request.state == "open" or (request.settled_at or request.opened_at) > cutoff:
                continue
            if request.run is not None and self._run_waits(request.run):
                continue
            for path in (self.path(request.id), self.dir / f"{request.id}.claim"):
                try:
                    path.unlink()
                except FileNotFoundError:
                    pass
            removed += 1
        return removed

    def _run_waits(self, run_id: str) -> bool:
        """The run has not ended: its record is there (parked, or being resumed) and not kept
        as finished or failed (runs/retention.py)."""
        if not _valid_id(run_id):
            return True
        if not (self.dir / "runs" / f"{run_id}.json").exists():
            return False
        record = RunRecord.load(self, run_id)
        return record is None or not record.ended()  # (an unreadable record: kept, to be safe)

    def _read(self, path: Path) -> Request | None:
        import orjson

        try:
            data = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return _from_json(data) if isinstance(data, dict) else None

    def _expire(self, request: Request) -> Request:
        if request.state == "open" and request.expires_at is not None and time.time() >= request.expires_at:
            try:
                return self.settle(request.id, "expired", reason="expired")
            except AlreadySettled:
                return self._read(self.path(request.id)) or request
            except GraphchatError:  # the expiry cannot be written now: it is tried again next time
                return self._read(self.path(request.id)) or request
        return request


def _unwritten(exc: OSError, request_id: str) -> GraphchatError:
    """A settlement the disk refused, in one line: what failed, and that the request is open."""
    return GraphchatError(f"{failed_write_message(exc)} (request {request_id} stays open)")


def _valid_id(request_id: str) -> bool:
    return bool(request_id) and all(c in "0123456789abcdef" for c in request_id)


# --- reading an answer against the request's mode (pure) ---------------------------------------


def read_answer(request: Request, text: str) -> Any:
    """The value `graphchat answer ID TEXT` gives (issue 9's Decisions); ValueError says why
    an answer is refused. A form takes a JSON object (or, with one field, a bare value for it);
    an options request takes an option's exact text, else its 1-based number, else — where
    free answers are allowed — the text as typed; a text request takes the text as typed."""
    if request.mode == "text":
        return text
    if request.mode == "options":
        options = request.options or []
        if text in options:
            return text
        if text.strip().isdigit() and 1 <= int(text.strip()) <= len(options):
            return options[int(text.strip()) - 1]
        if request.free:
            return text
        raise ValueError(f"choose one of: {', '.join(options)} (or its number)")
    if request.mode == "form":
        return read_form(request.schema or {}, text)
    raise ValueError("an approval is answered with `graphchat permit` or `graphchat deny`")


def read_form(schema: dict[str, Any], text: str) -> dict[str, Any]:
    import orjson

    props: dict[str, Any] = schema.get("properties") or {}
    value: Any
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        if len(props) != 1:
            raise ValueError("this form takes a JSON object: {" + ", ".join(f'"{n}": …' for n in props) + "}")
        ((name, prop),) = props.items()
        try:
            several = isinstance(value, list) and isinstance(prop, dict) and prop.get("multiple") is True
            value = {name: value} if several else {name: coerce(text, prop)}
        except ValueError as exc:
            raise ValueError(f"field {name!r}: {exc}") from None
    problems = form_problems(schema, value)
    if problems:
        raise ValueError("; ".join(problems))
    return value


def form_problems(schema: dict[str, Any], value: dict[str, Any]) -> list[str]:
    """Each problem names its field: `field 'count': expected integer, got string`."""
    props: dict[str, Any] = schema.get("properties") or {}
    problems = []
    for name in schema.get("required") or []:
        if name not in value:
            problems.append(f"field {name!r}: required")
    for name, item in value.items():
        prop = props.get(name)
        if prop is None:
            if schema.get("additionalProperties") is False or props:
                problems.append(f"field {name!r}: not a field of this form ({', '.join(props)})")
            continue
        for problem in errors(answer_property(prop), item):
            problems.append(f"field {name!r}: {problem}")
    return problems
