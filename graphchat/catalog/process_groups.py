"""A stdio MCP server's whole process group is stopped when its connection ends.

The SDK starts each server in a new session (its pid is its process group's id) and kills the
group only when the server itself outlives its closed stdin: a server that exits on EOF leaves
whatever it spawned running under init. `server_groups()` notes each server's pid as the SDK
spawns it, and on exit SIGKILLs what is left of those groups (by then the server had its stdin
closed and the SDK's own SIGTERM/SIGKILL escalation).
"""

from __future__ import annotations

import contextvars
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

_spawned: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("graphchat_spawned", default=None)


def _note_spawns() -> None:
    """Wrap the SDK's spawn once, so the connection being made learns its server's pid."""
    import mcp.client.stdio as sdk

    spawn = getattr(sdk, "_create_platform_compatible_process", None)
    if spawn is None or getattr(spawn, "graphchat_noted", False):
        return  # (an SDK without that spawn function: its own group kill is all there is)

    async def noted(*args: Any, **kwargs: Any) -> Any:
        process = await spawn(*args, **kwargs)
        spawned = _spawned.get()
        if spawned is not None:
            spawned.append(process)
        return process

    noted.graphchat_noted = True  # type: ignore[attr-defined]
    sdk._create_platform_compatible_process = noted


def kill_group(pgid: int) -> None:
    """SIGKILL every process left in a server's group (nothing when the group is gone)."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


@contextmanager
def server_groups() -> Iterator[list[Any]]:
    """Within the block, stdio servers spawned by this task are noted (their processes: a
    server that exited says its exit code); at its end their process groups are killed.
    Enter it before the transport, so it exits after it."""
    _note_spawns()
    processes: list[Any] = []
    token = _spawned.set(processes)
    try:
        yield processes
    finally:
        _spawned.reset(token)
        for process in processes:
            kill_group(process.pid)


def exit_code(processes: list[Any]) -> int | None:
    """The exit code of the first noted server that exited by itself (not killed), else None."""
    for process in processes:
        code = getattr(process, "returncode", None)
        if isinstance(code, int) and code > 0:
            return code
    return None
