"""The thread store: one folder a thread, `messages.jsonl` (append-only) plus a small `meta.json`.

Why this layout: appending is one `write` to a file opened O_APPEND under an advisory lock, so it
is O(1) and two processes never interleave lines; `meta.json` (title, message count, times) lets
`threads list` read one small file a thread. The meta records how many bytes of messages.jsonl it
covers (`size`), so it only needs rewriting at a few events (the first user message, turn ends,
meta events): whatever was appended after it, e.g. by a process killed mid-turn, is folded in by
reading just that tail.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from graphchat.errors import GraphchatError, did_you_mean
from graphchat.fsutil import read_json, write_atomic, writing
from graphchat.threads import lines as ev
from graphchat.threads.ids import is_valid_id, new_id, normalize_user_id
from graphchat.threads.redact import Redactor, environment_secrets

if TYPE_CHECKING:
    from graphchat.threads.redact import Redactor

MESSAGES_FILE = "messages.jsonl"
META_FILE = "meta.json"
TURN_LOCK_FILE = "turn.lock"  # flock'ed for a whole turn; holds the holder's pid
TURN_LOCK_POLL_S = 0.1
RECENT_IDS_SHOWN = 5
# Events after which meta.json is rewritten; anything else is picked up from the tail on read.
_META_REFRESH_KINDS = frozenset({ev.USER, ev.TURN_END, ev.TURN_FAILED, ev.META})


@dataclass(frozen=True)
class ThreadInfo:
    """One row of `threads list`."""

    id: str
    title: str
    message_count: int
    updated_at: str
    created_at: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "message_count": self.message_count,
            "updated_at": self.updated_at,
        }


@dataclass
class LoadReport:
    """What loading a thread file had to skip: a torn last line, undecodable lines in the middle."""

    dropped_torn_tail: bool = False
    skipped_lines: list[int] = field(default_factory=list)  # 1-based line numbers

    @property
    def clean(self) -> bool:
        return not self.dropped_torn_tail and not self.skipped_lines

    def warnings(self, thread_id: str) -> list[str]:
        lines = []
        if self.dropped_torn_tail:
            lines.append(f"warning: thread {thread_id}: dropped a torn last line")
        if self.skipped_lines:
            shown = ", ".join(str(n) for n in self.skipped_lines[:10])
            more = "" if len(self.skipped_lines) <= 10 else ", …"
            lines.append(
                f"warning: thread {thread_id}: skipped {len(self.skipped_lines)} undecodable "
                f"line(s) (line {shown}{more})"
            )
        return lines


def parse_lines(data: bytes) -> tuple[list[dict[str, Any]], LoadReport]:
    """Decode a thread file's bytes; never raises. A last line without its newline is torn (dropped)."""
    report = LoadReport()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    if tail.strip():
        report.dropped_torn_tail = True
    loads = orjson.loads
    out: list[dict[str, Any]] = []
    append = out.append
    for number, line in enumerate(lines, 1):
        try:
            obj = loads(line)
        except orjson.JSONDecodeError:
            if line.strip():
                report.skipped_lines.append(number)
            continue
        if type(obj) is dict and isinstance(obj.get("kind"), str):
            append(obj)
        else:
            report.skipped_lines.append(number)
    return out, report


def _fold(meta: dict[str, Any], events: Iterable[dict[str, Any]]) -> None:
    """Update a meta dict with events that came after it (count, title, model, updated_at)."""
    count = meta.get("message_count", 0)
    for event in events:
        kind = event["kind"]
        if kind in ev.MESSAGE_KINDS:
            count += 1
            if kind == ev.USER and not meta.get("title"):
                meta["title"] = ev.title_from(event.get("content"))
        elif kind == ev.META:
            if isinstance(event.get("title"), str):
                meta["title"] = event["title"][: ev.TITLE_CHARS]
            if isinstance(event.get("model"), str):
                meta["model"] = event["model"]
        elif kind == ev.TURN_END and isinstance(event.get("model"), str):
            meta["model"] = event["model"]
        ts = event.get("ts")
        if isinstance(ts, str) and ts > meta.get("updated_at", ""):
            meta["updated_at"] = ts
    meta["message_count"] = count


# meta.json fields and their types; a field of another type is damage (hand edits, other tools)
_META_FIELDS: dict[str, type] = {
    "id": str,
    "title": str,
    "model": str,
    "created_at": str,
    "updated_at": str,
    "message_count": int,
    "size": int,
}
_warned: set[str] = set()


def _warn_once(text: str) -> None:
    if text not in _warned:
        _warned.add(text)
        print(text, file=sys.stderr)


def _sound(value: Any, kind: type) -> bool:
    if kind is int:
        return type(value) is int and value >= 0
    return isinstance(value, kind)


def _checked_meta(obj: Any, thread_id: str) -> dict[str, Any]:
    """meta.json's content made safe to use: fields of the wrong type are dropped, and when any
    counter is in doubt the counters go too, so they are recounted from messages.jsonl. Damage
    is reported once, naming the thread (never an exception)."""
    if obj is None:  # no meta.json at all, or not JSON
        return {}
    if not isinstance(obj, dict):
        _warn_once(f"warning: thread {thread_id}: meta.json is not an object; rebuilt from {MESSAGES_FILE}")
        return {}
    bad = [key for key, kind in _META_FIELDS.items() if key in obj and not _sound(obj[key], kind)]
    if not bad and "size" in obj:
        return obj
    meta = {key: value for key, value in obj.items() if key not in bad}
    meta.pop("size", None)
    meta.pop("message_count", None)
    if bad:
        _warn_once(
            f"warning: thread {thread_id}: meta.json has wrong-typed {', '.join(bad)}; "
            f"rebuilt from {MESSAGES_FILE}"
        )
    return meta


def _pread_all(fd: int, start: int, end: int) -> bytes:
    chunks = []
    while start < end:
        chunk = os.pread(fd, end - start, start)
        if not chunk:
            break
        chunks.append(chunk)
        start += len(chunk)
    return b"".join(chunks)


class Thread:
    """One conversation on disk. Appending is safe across processes; loading never raises on bad lines."""

    def __init__(self, thread_id: str, path: Path, redactor: Callable[[], Redactor] | None = None) -> None:
        self.id = thread_id
        self.path = path
        self._redactor = redactor  # gives the store's secret scrubber (built on first append)
        self.messages_path = path / MESSAGES_FILE
        self.meta_path = path / META_FILE
        self._fd: int | None = None
        self._turn_fd: int | None = None
        self._reported: set[str] = set()

    def __repr__(self) -> str:
        return f"Thread({self.id!r})"

    # -- writing ---------------------------------------------------------------------------------

    def _open_fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.messages_path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        return self._fd

    def append(self, event: dict[str, Any]) -> None:
        """Append one event as one whole line (adds `ts` when missing). O(1); never rewrites the file."""
        kind = event.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ValueError("a thread event needs a string `kind`")
        if "ts" not in event:
            event = {"kind": kind, "ts": ev.now_ts(), **event}
        line = orjson.dumps(event) + b"\n"  # orjson never emits a raw newline inside
        if self._redactor is not None:
            line = self._redactor().line(line)  # no API key or ${VAR} value ever reaches the file
        with writing(self.messages_path):
            fd = self._open_fd()
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            # A process killed mid-write may have left a line without its newline: start on a fresh
            # line so ours stays whole (the fragment is then skipped on load as undecodable).
            if size and os.pread(fd, 1, size - 1) != b"\n":
                line = b"\n" + line
            try:
                view = memoryview(line)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
            except OSError as exc:  # a full disk: take back the part written, nothing half-written
                try:
                    os.ftruncate(fd, size)
                except OSError:
                    pass
                with writing(self.messages_path):
                    raise exc from None
            if kind in _META_REFRESH_KINDS:
                try:
                    self._refresh_meta_locked(fd, size + len(line))
                except FileNotFoundError:
                    pass  # `threads rm` removed the thread meanwhile: nothing left to summarise
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _refresh_meta_locked(self, fd: int, end: int) -> None:
        meta = _checked_meta(read_json(self.meta_path), self.id)
        start = meta.get("size", 0)
        if not 0 <= start <= end:
            meta, start = {}, 0  # meta from another file's history: recount from the start
        meta.setdefault("id", self.id)
        meta.setdefault("created_at", meta.get("updated_at") or ev.now_ts())
        events, _ = parse_lines(_pread_all(fd, start, end))
        _fold(meta, events)
        meta["size"] = end
        write_atomic(self.meta_path, orjson.dumps(meta), parents=False)  # a removed thread stays removed

    # -- the turn lock ---------------------------------------------------------------------------

    def try_lock_turn(self) -> bool:
        """Take the thread's turn lock without waiting; False when another process holds it.

        One turn at a time a thread: two processes replaying and appending at once would pair
        one's results with the other's calls. The lock is an flock on `turn.lock`, so it is
        released when its holder ends, however it ends."""
        if self._turn_fd is not None:
            return True
        try:
            fd = os.open(self.path / TURN_LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except FileNotFoundError:
            raise GraphchatError(
                f"thread {self.id} no longer exists (removed with `graphchat threads rm`?)",
                hint="start a new thread",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._turn_fd = fd
        return True

    def unlock_turn(self) -> None:
        if self._turn_fd is not None:
            os.close(self._turn_fd)  # closing the descriptor releases the flock
            self._turn_fd = None

    def busy_message(self) -> str:
        """Who holds the turn lock, for the message a waiting or refused writer shows."""
        try:
            pid = (self.path / TURN_LOCK_FILE).read_text().strip()
        except OSError:
            pid = ""
        who = f"another graphchat (pid {pid})" if pid.isdigit() else "another graphchat"
        return f"thread {self.id} is busy: {who} is running a turn on it"

    @asynccontextmanager
    async def turn_lock(
        self, *, wait: bool = True, on_wait: Callable[[str], None] | None = None
    ) -> AsyncIterator[None]:
        """Hold the turn lock for the block. When another process holds it: wait (telling
        `on_wait` once), or with `wait=False` raise a GraphchatError naming the holder."""
        if not self.try_lock_turn():
            if not wait:
                raise GraphchatError(
                    self.busy_message(), hint="try again when it ends, or leave out --no-wait"
                )
            if on_wait is not None:
                on_wait(f"{self.busy_message()}; waiting for it to end (Ctrl-C to give up)")
            while not self.try_lock_turn():
                await asyncio.sleep(TURN_LOCK_POLL_S)
        try:
            yield
        finally:
            self.unlock_turn()

    def close(self) -> None:
        self.unlock_turn()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Thread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing useful to do
            pass

    # -- reading ---------------------------------------------------------------------------------

    def load(self) -> tuple[list[dict[str, Any]], LoadReport]:
        """All decodable events, and what had to be skipped. Never raises on a damaged file."""
        try:
            data = self.messages_path.read_bytes()
        except FileNotFoundError:
            return [], LoadReport()
        except OSError as exc:  # a folder in its place, no permission: shown empty, said once
            _warn_once(f"warning: thread {self.id}: cannot read {MESSAGES_FILE}: {exc.strerror}")
            return [], LoadReport()
        return parse_lines(data)

    def events(self) -> list[dict[str, Any]]:
        """All decodable events; damage is reported once per problem on stderr (never an exception)."""
        events, report = self.load()
        for warning in report.warnings(self.id):
            if warning not in self._reported:
                self._reported.add(warning)
                print(warning, file=sys.stderr)
        return events

    def info(self) -> ThreadInfo:
        return _info_for(self.path, self.id)


def _info_for(folder: str | Path, thread_id: str) -> ThreadInfo:
    """A thread's list row from meta.json plus whatever was appended after it was written.
    Never raises: damage is repaired in memory (and on disk at the next append) with a warning."""
    folder = os.fspath(folder)  # plain strings: pathlib costs as much as the reads here
    meta = _checked_meta(read_json(f"{folder}/{META_FILE}"), thread_id)
    covered = meta.get("size", 0)
    messages = f"{folder}/{MESSAGES_FILE}"
    try:
        size = os.stat(messages).st_size
    except FileNotFoundError:
        _warn_once(f"warning: thread {thread_id}: {MESSAGES_FILE} is missing; shown as an empty thread")
        meta = {k: v for k, v in meta.items() if k not in ("size", "message_count")}
        size = covered = 0
    if size != covered:
        if size < covered:  # cannot happen with append-only writes; recount rather than trust it
            _warn_once(
                f"warning: thread {thread_id}: meta.json counts more than {MESSAGES_FILE} holds; recounted"
            )
            meta = {k: v for k, v in meta.items() if k not in ("size", "message_count")}
            covered = 0
        try:
            with open(messages, "rb") as f:
                f.seek(covered)
                tail = f.read(size - covered)
        except OSError as exc:
            _warn_once(f"warning: thread {thread_id}: cannot read {MESSAGES_FILE}: {exc.strerror}")
            tail = b""
        events, _ = parse_lines(tail)
        _fold(meta, events)
    created = meta.get("created_at") or ""
    return ThreadInfo(
        id=thread_id,
        title=meta.get("title") or "",
        message_count=int(meta.get("message_count", 0)),
        updated_at=meta.get("updated_at") or created,
        created_at=created,
    )


class ThreadStore:
    """All threads of a workspace, under `<root>/` (normally `<workspace>/threads`)."""

    def __init__(self, root: Path, *, secrets: Iterable[str] | None = None) -> None:
        """`secrets`: values never to write (default: the credential-like environment values and the
        `${VAR}` values of the workspace's servers.yaml; see graphchat.threads.redact)."""
        self.root = Path(root)
        self._secrets = None if secrets is None else list(secrets)
        self._redactor_obj: Redactor | None = None

    def redactor(self) -> Redactor:
        """The scrubber every thread of this store writes through (built once, when first needed)."""
        if self._redactor_obj is None:
            secrets = self._secrets if self._secrets is not None else environment_secrets(self.root.parent)
            self._redactor_obj = Redactor(secrets)
        return self._redactor_obj

    def _thread(self, thread_id: str) -> Thread:
        return Thread(thread_id, self.root / thread_id, self.redactor)

    def create(self) -> Thread:
        """A new, empty thread. Its folder appears whole (built aside, then renamed into place)."""
        self.root.mkdir(parents=True, exist_ok=True)
        while True:
            thread_id = new_id()
            final = self.root / thread_id
            if final.exists():
                continue
            staging = self.root / f".new-{thread_id}-{os.getpid()}"
            now = ev.now_ts()
            meta = {"id": thread_id, "created_at": now, "updated_at": now, "message_count": 0, "size": 0}
            with writing(final):
                staging.mkdir()
                try:
                    (staging / MESSAGES_FILE).touch(0o600)
                    (staging / META_FILE).write_bytes(orjson.dumps(meta))
                except BaseException:  # a full disk: no half-built thread is left behind
                    shutil.rmtree(staging, ignore_errors=True)
                    raise
            try:
                os.rename(staging, final)
            except OSError:  # lost a race for the same id: try another
                shutil.rmtree(staging, ignore_errors=True)
                continue
            return self._thread(thread_id)

    def _entries(self) -> list[os.DirEntry[str]]:
        try:
            with os.scandir(self.root) as it:
                return [e for e in it if is_valid_id(e.name) and e.is_dir()]
        except FileNotFoundError:
            return []

    def _ids(self) -> list[str]:
        return [e.name for e in self._entries()]

    def list(self) -> list[ThreadInfo]:
        """Every thread, newest first. Reads one small meta file a thread (plus any unsummarised tail)."""
        infos = [_info_for(e.path, e.name) for e in self._entries()]
        infos.sort(key=lambda i: (i.updated_at, i.created_at, i.id), reverse=True)
        return infos

    def latest(self) -> Thread | None:
        """The most recently updated thread, if any."""
        infos = self.list()
        return self._thread(infos[0].id) if infos else None

    def continued(self, flag: str | None) -> Thread | None:
        """The thread a `--thread [ID]` flag means: None (no flag) is a new thread, "" the most
        recent one (None when there is none yet), an id that one (unknown ids raise)."""
        if flag is None:
            return None
        return self.open(flag) if flag else self.latest()

    def _unknown(self, message: str) -> Exception:
        recent = [info.id for info in self.list()[:RECENT_IDS_SHOWN]]
        wanted = message.rsplit(" ", 1)[-1].strip("'")

        guess = did_you_mean(wanted, self._ids())
        if guess:
            message += f" ({guess})"
        if recent:
            message += "; recent threads: " + ", ".join(recent)
        else:
            message += "; there are no threads yet"
        return GraphchatError(message, hint="see `graphchat threads list`")

    def resolve(self, id_or_prefix: str) -> str:
        """The full id a user meant: exact, or the one thread it is a prefix of (≥ 6 characters)."""
        wanted = normalize_user_id(id_or_prefix)
        if (self.root / wanted).is_dir():
            return wanted
        matches = sorted(name for name in self._ids() if name.startswith(wanted))
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise GraphchatError(
                f"thread id {wanted!r} is ambiguous: " + ", ".join(matches[:RECENT_IDS_SHOWN]),
                hint="type more characters of the id",
            )
        raise self._unknown(f"unknown thread {wanted!r}")

    def open(self, id_or_prefix: str) -> Thread:
        """An existing thread; an unknown id raises GraphchatError (exit 1) listing the recent ids."""
        return self._thread(self.resolve(id_or_prefix))

    def remove(self, id_or_prefix: str) -> str:
        """Delete a thread and everything in its folder; returns the full id removed."""
        thread_id = self.resolve(id_or_prefix)
        # Rename first so a half-finished delete never shows as a damaged thread in `list`.
        doomed = self.root / f".rm-{thread_id}-{os.getpid()}"
        os.rename(self.root / thread_id, doomed)
        shutil.rmtree(doomed)
        return thread_id
