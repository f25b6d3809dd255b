"""Start, find, ask about and stop warm helpers (`graphchat warm`, `settings.warm: auto`)."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from graphchat.warm import identity as ident
from graphchat.warm import wire

READY_TIMEOUT_S = 180.0


def connect(path: Path, timeout: float = 5.0) -> socket.socket | None:
    """A connection to the helper listening at `path`, or None (none there, dead, not ours)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    if not wire.same_user(sock):
        sock.close()
        return None
    return sock


def _exchange(path: Path, message: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    sock = connect(path, timeout)
    if sock is None:
        return None
    try:
        sock.sendall(wire.encode(message))
        with sock.makefile("rb") as stream:
            line = stream.readline()
        return wire.decode(line) if line else None
    except (OSError, ValueError):
        return None
    finally:
        sock.close()


def status(paths: ident.Paths) -> dict[str, Any] | None:
    """The helper's status, or None when no live helper answers at `paths.socket`."""
    return _exchange(paths.socket, {"op": "status"})


def stop(paths: ident.Paths, timeout: float = 15.0) -> int | None:
    """Ask the helper to leave and wait until it has; its pid, or None when none answered."""
    reply = _exchange(paths.socket, {"op": "stop"})
    if reply is None:
        return None
    pid = int(reply.get("pid") or 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)
    return pid


def alive(pid: int) -> bool:
    """Whether process `pid` still runs (a zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie (our own child not reaped yet) is gone for every purpose here
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().split(b") ", 1)[-1][:1] != b"Z"
    except OSError:
        return True


def others(workspace: Path, keep: str | None = None) -> list[tuple[ident.Paths, dict[str, Any]]]:
    """Helpers of `workspace` under another identity (its configuration changed since), each
    with its info file's content."""
    import orjson

    try:
        folder = ident.runtime_dir(create=False)
        infos = sorted(folder.glob("*.json"))
    except (OSError, ident.UnsafeDirectory):
        return []
    found = []
    for info in infos:
        try:
            data = orjson.loads(info.read_bytes())
        except (OSError, ValueError):
            continue
        if data.get("workspace") != str(workspace) or data.get("key") == keep:
            continue
        stem = info.with_suffix("")
        paths = ident.Paths(
            stem.with_suffix(".sock"), info, stem.with_suffix(".log"), stem.with_suffix(".lock")
        )
        found.append((paths, data))
    return found


def spawn(workspace: Path, paths: ident.Paths, *, wait: bool) -> dict[str, Any]:
    """Start a helper for `workspace`. With `wait`, return once it is ready (its `{ok, pid,
    servers}` or `{ok: false, message, hint, code}`); else at once (`{pid}`)."""
    import subprocess

    fd = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    read_end = write_end = None
    if wait:
        read_end, write_end = os.pipe()
    argv = [sys.executable, "-m", "graphchat.warm.helper", "--workspace", str(workspace)]
    if write_end is not None:
        argv += ["--ready-fd", str(write_end)]
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            cwd=str(workspace),
            pass_fds=(write_end,) if write_end is not None else (),
            start_new_session=True,  # not in the terminal's process group: Ctrl-C is the client's
        )
    finally:
        os.close(fd)
        if write_end is not None:
            os.close(write_end)
    if read_end is None:
        return {"pid": proc.pid}
    reply = _read_ready(read_end, proc)
    if reply is None:
        proc.poll()
        reply = {"ok": False, "message": f"the warm helper did not start (see {paths.log})"}
    reply.setdefault("pid", proc.pid)
    return reply


def _read_ready(fd: int, proc: Any) -> dict[str, Any] | None:
    import select

    data = b""
    deadline = time.monotonic() + READY_TIMEOUT_S
    try:
        while b"\n" not in data and time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.5)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    if b"\n" not in data:
        return None
    try:
        return wire.decode(data.split(b"\n", 1)[0])
    except ValueError:
        return None


def tail(path: Path, lines: int = 5) -> list[str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines() if line.strip()][-lines:]


def start_in_background(settings: Any) -> None:
    """`settings.warm: auto`: after a local `ask`, start this workspace's helper (unless one
    runs or GRAPHCHAT_WARM=0) for the next questions. Silent: a helper that cannot start
    leaves its reason in its log, and the next `ask` simply runs locally again."""
    if getattr(settings, "warm", "manual") != "auto" or ident.disabled():
        return
    try:
        identity = ident.identify(settings.workspace)
        paths = ident.paths(identity)
        if status(paths) is not None:
            return
        spawn(identity.workspace, paths, wait=False)
        _notice_once(settings)
    except Exception:  # noqa: BLE001 - a convenience must never fail the question
        return


NOTICE_MARKER = ".warm-noticed"


def _notice_once(settings: Any) -> None:
    """The first time a workspace gets a helper on its own, one line on stderr says so, where
    it lives, how long it stays and how to turn it off (a marker in catalog/ remembers it)."""
    import sys

    marker = settings.catalog_dir / NOTICE_MARKER
    if marker.exists():
        return
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("the warm-helper notice was shown\n")
    except OSError:
        return  # a read-only workspace: say nothing rather than say it every time
    minutes = max(1, round(settings.warm_idle / 60))
    sys.stderr.write(
        f"note: a warm helper now runs for this workspace in the background (graphchat warm --status), "
        f"so the next ask answers faster; it leaves after {minutes} min without a question. "
        "Turn this off with `settings.warm: manual` (or off) in graphchat.yaml, or GRAPHCHAT_WARM=0\n"
    )
