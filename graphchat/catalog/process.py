"""Run one program for a tool: argv without a shell, a timeout, where it runs, and in which
environment.

Shared by user `exec` tools and the git pack. The folder a tool's program runs in is the
workspace (a project folder holding graphchat.yaml, like graph's project root), or the
current folder when the workspace is the per-user data folder. The environment of a turn is
`turn_environ()` (graphchat/turn_context.py): the asking process's (a warm helper's turn), else this process's; tools and
packs read variables through it, never through `os.environ`.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from graphchat.turn_context import TURN_ENV, WORKING_DIR, turn_environ  # noqa: F401 - the turn's folder and variables
from graphchat.workspace import user_data_dir

if TYPE_CHECKING:
    from graphchat.workspace import Settings


@dataclass
class Finished:
    """A program that ran to its end (any exit code)."""

    code: int
    stdout: bytes
    stderr: bytes

    @property
    def ok(self) -> bool:
        return self.code == 0

    def err_text(self) -> str:
        return self.stderr.decode("utf-8", errors="replace").strip()

    def out_text(self) -> str:
        return self.stdout.decode("utf-8", errors="replace")


class TimedOut(Exception):
    """The program did not finish in time; it was killed."""


def run_dir(settings: Settings) -> Path:
    """Where tool programs run: the workspace, unless it is the per-user data folder (then the
    asking process's working directory)."""
    try:
        if settings.workspace.resolve() != user_data_dir().resolve():
            return settings.workspace
    except OSError:
        pass
    asked_from = WORKING_DIR.get()
    return Path(asked_from) if asked_from else Path.cwd()


async def run_program(
    argv: Sequence[str],
    *,
    cwd: Path,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> Finished:
    """Run `argv` (no shell) with stdin closed, in the turn's environment plus `env`; raises
    TimedOut (after killing it) or OSError."""
    full_env = {**turn_environ(), **(env or {})}
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd),
        env=full_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), timeout)
    except asyncio.CancelledError:
        _kill(proc)
        raise
    except TimeoutError:
        _kill(proc)
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except (TimeoutError, ProcessLookupError):
            pass
        raise TimedOut(f"timed out after {timeout:g}s") from None
    return Finished(proc.returncode if proc.returncode is not None else -1, stdout, stderr)


def _kill(proc: asyncio.subprocess.Process) -> None:
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the program and whatever it started
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass
