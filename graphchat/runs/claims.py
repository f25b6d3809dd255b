"""Claims that cannot stick (issue 19, build 7).

Settling a request starts with a claim: `<id>.claim`, created whole (a temporary file hard
linked to its name, which fails when the name is taken), holding the claimer's pid, the start
time of that process (so a reused pid is not taken for the claimer) and the settlement it is
writing (state, answer, reason). Only the claimer settles the request.

A claim whose process is gone while the request is still open — a `kill -9`, a crash, a full
disk between claiming and settling — is stale: the next claimer takes it over (`answer`,
`permit`, … with its own answer), and `resume` finishes the settlement the stale claim recorded.
A live claim is respected. Whoever reads or replaces an existing claim holds an exclusive lock
on the claim file itself, so two takers-over never both win.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from graphchat.fsutil import writing


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), or None where that
    cannot be read (no /proc, the process is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2 :].split()  # the name may hold spaces and parentheses
    return fields[19] if len(fields) > 19 else None


def alive(holder: dict[str, Any]) -> bool:
    """Whether the process that wrote a claim still runs (the same process, not a reused pid)."""
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    start = holder.get("start")
    if start is not None:
        now = process_start(pid)
        if now is not None and now != start:
            return False  # the pid was reused by another process
    return True


def _data(settlement: dict[str, Any]) -> bytes:
    import orjson

    holder = {"pid": os.getpid(), "start": process_start(os.getpid()), "at": time.time(), **settlement}
    return orjson.dumps(holder, default=str)


def read(path: Path) -> dict[str, Any] | None:
    """A claim's content; an old claim (`pid\\n` only) as {pid}; None when there is none."""
    import orjson

    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError:
        text = raw.decode("utf-8", "replace").strip()
        return {"pid": int(text)} if text.isdigit() else {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[int]:
    import fcntl

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


class Held(Exception):  # noqa: N818 - a claim held by a live process
    def __init__(self, holder: dict[str, Any]) -> None:
        super().__init__(f"claimed by process {holder.get('pid')}")
        self.holder = holder


def claim(path: Path, settlement: dict[str, Any], still_open: Callable[[], bool]) -> dict[str, Any] | None:
    """Claim `path` for this process, recording `settlement`. Raises Held when a live process
    holds it, or when the request was settled meanwhile (`still_open()` false). Returns the
    stale claim taken over (None: the claim was free)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
    try:
        with writing(path):  # a full disk names the claim, not its temp file
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(_data(settlement))
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise
    try:
        try:
            os.link(tmp, path)  # created whole, or not at all: a claim is never half written
            return None
        except FileExistsError:
            pass
        try:
            with _locked(path) as locked:
                holder = read(path) or {}
                if alive(holder) or not still_open():
                    raise Held(holder)
                data = _data(settlement)  # taken over: rewritten in place, under the lock
                os.ftruncate(locked, 0)
                os.pwrite(locked, data, 0)
                os.fsync(locked)
                return holder
        except FileNotFoundError:  # released meanwhile (a failed settlement): claim it afresh
            return claim(path, settlement, still_open)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def release(path: Path) -> None:
    """Give a claim up (the settlement could not be written: the request stays open)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def stale(path: Path, still_open: Callable[[], bool]) -> dict[str, Any] | None:
    """A stale claim of a request still open, with the settlement it recorded, taken over by
    this process (so that it can finish that settlement); None when there is no claim, its
    process still runs, or it recorded no settlement."""
    try:
        with _locked(path) as locked:
            holder = read(path) or {}
            if alive(holder) or not still_open() or "state" not in holder:
                return None
            data = _data({k: holder.get(k) for k in ("state", "answer", "reason")})
            os.ftruncate(locked, 0)
            os.pwrite(locked, data, 0)
            os.fsync(locked)
            return holder
    except FileNotFoundError:
        return None
