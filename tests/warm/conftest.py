"""Fixtures of the warm helper's tests: a private socket directory per test, the real
`graphchat warm` and `graphchat ask` as subprocesses, and no helper left behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import clean_env
from tests.inprocess import run_cli
from tests.scripted_server import ScriptedModelServer


@dataclass
class Warm:
    """One test's warm set-up: `env` (the model server, a private XDG_RUNTIME_DIR) and the
    real command. `run(...)` runs `graphchat --home WS ...`; `ask(..., warm=False)` sets
    GRAPHCHAT_WARM=0; `ask_in_process(...)` is that local ask in process (to compare against)."""

    workspace: Path
    runtime: Path
    env: dict[str, str]
    started: list[int] = field(default_factory=list)

    @property
    def socket_dir(self) -> Path:
        return self.runtime / "graphchat"

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "graphchat", "--home", str(self.workspace), *args]

    def run(
        self,
        *args: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 90,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args),
            env={**self.env, **(env or {})},
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(cwd or self.workspace),
        )

    def ask(self, *args: str, warm: bool = True, **kw: object) -> subprocess.CompletedProcess[str]:
        env = dict(kw.pop("env", None) or {})  # type: ignore[call-overload]
        if not warm:
            env["GRAPHCHAT_WARM"] = "0"
        return self.run("ask", *args, env=env, **kw)  # type: ignore[arg-type]

    def ask_in_process(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The local `ask` (GRAPHCHAT_WARM=0) to compare a warm one against, through the real
        entry point run in this process (`run_cli`, as the `cli` fixture runs it): litellm is
        imported once per test process instead of once per question."""
        environment = {**self.env, **(env or {}), "GRAPHCHAT_WARM": "0"}
        argv = ["--home", str(self.workspace), "ask", *args]
        return run_cli(argv, env=environment, input=input, home=self.workspace.parent, cwd=self.workspace)

    def start(self, env: dict[str, str] | None = None) -> int:
        """`graphchat warm`: returns the helper's pid (it is ready then)."""
        done = self.run("warm", env=env, timeout=180)
        assert done.returncode == 0, done.stderr
        pid = int(done.stdout.strip())
        self.started.append(pid)
        return pid

    def status(self) -> dict[str, object]:
        done = self.run("warm", "--status", "--json")
        return dict(json.loads(done.stdout))

    def pids(self) -> list[int]:
        """Pids of the helpers whose info files are in this test's socket directory."""
        found = []
        for info in self.socket_dir.glob("*.json"):
            try:
                found.append(int(json.loads(info.read_text())["pid"]))
            except (OSError, ValueError, KeyError):
                pass
        return found


def is_helper(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"graphchat.warm.helper" in cmdline.read()
    except OSError:
        return False


def wait_until(check, timeout: float = 30.0, step: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return bool(check())


@pytest.fixture
def warm(workspace: Path, model_server: ScriptedModelServer) -> Iterator[Warm]:
    # a short path: a Unix socket's path holds at most 108 bytes (pytest's tmp paths are long)
    runtime = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp"))
    os.chmod(runtime, 0o700)
    env = clean_env({**model_server.env(), "XDG_RUNTIME_DIR": str(runtime)}, workspace.parent)
    state = Warm(workspace, runtime, env)
    try:
        yield state
    finally:
        subprocess.run(state.command("warm", "--stop"), env=env, capture_output=True, timeout=60)
        for pid in {*state.pids(), *state.started}:
            if is_helper(pid):  # a pid that ended long ago may be another process's by now
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(runtime, ignore_errors=True)
