"""Fixtures of the warm helper's tests: a private socket directory per test, the real
`graphchat warm` and `graphchat ask` as subprocesses, and no helper left behind.

Starting a helper is the cost of these tests (it imports litellm and starts the workspace's MCP
servers). A test that checks the helper's own life (its start, stop, idle time, replacement)
has its own (`warm`); a test that needs only *a* helper serving its questions takes one its
module shares (`Helpers.warm(name, configure)`: one helper per workspace configuration). A
module's tests share one model server (`model_server`). Each test still begins with an empty
script and no recorded model request, a test of a shared helper with an empty history (no
thread, no request), and it counts the turns it was served itself (`Warm.served()`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import clean_env, new_workspace
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
    # the helper running when the test began and the turns it had served (a shared helper's)
    served_before: tuple[int, int] | None = None

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

    def run_in_process(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """`run(...)` through the real entry point run in this process (`run_cli`, as the `cli`
        fixture runs it): for a command no helper takes part in (litellm is imported once per
        test process instead of once per command)."""
        argv = ["--home", str(self.workspace), *args]
        environment = {**self.env, **(env or {})}
        return run_cli(argv, env=environment, input=input, home=self.workspace.parent, cwd=self.workspace)

    def ask_in_process(
        self, *args: str, env: dict[str, str] | None = None, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        """The local `ask` (GRAPHCHAT_WARM=0) to compare a warm one against, in process."""
        return self.run_in_process("ask", *args, env={**(env or {}), "GRAPHCHAT_WARM": "0"}, input=input)

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

    def served(self) -> int:
        """The turns the running helper served during this test (`turns_served` of its status,
        less those a shared helper had served the module's earlier tests)."""
        status = self.status()
        served = int(status["turns_served"])  # type: ignore[call-overload]
        if self.served_before is not None and status["pid"] == self.served_before[0]:
            served -= self.served_before[1]
        return served

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


def helpers_of(workspace: Path) -> list[int]:
    """Pids of the helper processes of `workspace`, ready or still starting (one started in the
    background by an ask, or for a changed configuration, has no info file yet)."""
    wanted = ["-m", "graphchat.warm.helper", "--workspace", str(workspace)]
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode("utf-8", "surrogateescape").split("\0")
            except OSError:
                continue
            if argv[1:5] == wanted:
                found.append(int(entry.name))
    return found


def wait_until(check, timeout: float = 30.0, step: float = 0.05) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return bool(check())


def warm_state(workspace: Path, server: ScriptedModelServer) -> Warm:
    """A warm set-up for `workspace` whose graphchat asks `server`."""
    # a short path: a Unix socket's path holds at most 108 bytes (pytest's tmp paths are long)
    runtime = Path(tempfile.mkdtemp(prefix="gw", dir="/tmp"))
    os.chmod(runtime, 0o700)
    env = clean_env({**server.env(), "XDG_RUNTIME_DIR": str(runtime)}, workspace.parent)
    return Warm(workspace, runtime, env)


def leave_no_helper(state: Warm) -> None:
    """Stop the set-up's helpers (and kill one that does not stop); remove its socket directory."""
    subprocess.run(state.command("warm", "--stop"), env=state.env, capture_output=True, timeout=60)
    for pid in {*state.pids(), *state.started, *helpers_of(state.workspace)}:
        if is_helper(pid):  # a pid that ended long ago may be another process's by now
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    shutil.rmtree(state.runtime, ignore_errors=True)


@pytest.fixture
def warm(workspace: Path, model_server: ScriptedModelServer) -> Iterator[Warm]:
    state = warm_state(workspace, model_server)
    try:
        yield state
    finally:
        leave_no_helper(state)


class Helpers:
    """A module's shared helpers: one scripted model server, and per workspace configuration
    (a name) one workspace whose helper, started by the first test that calls `warm.start()`
    (the next ones get its pid), serves the module's tests of that configuration."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = ScriptedModelServer().start()
        self.states: dict[str, Warm] = {}
        self.configured: dict[str, set[str]] = {}  # each workspace's own entries

    def warm(self, name: str, configure: Callable[[Warm], object] | None = None) -> Warm:
        """The set-up `name` for the next test: made (and `configure`d) the first time; later,
        its history emptied and the running helper's turns noted. The model server's script
        and recorded requests are emptied either way."""
        state = self.states.get(name)
        if state is None:
            state = self.states[name] = warm_state(new_workspace(self.root / name), self.server)
            if configure is not None:
                configure(state)
            self.configured[name] = {p.name for p in state.workspace.iterdir()}
        else:
            self._forget_history(state, self.configured[name])
        self.fresh_server()
        state.served_before = None
        if state.pids():
            status = state.status()
            if status.get("running"):
                state.served_before = (int(status["pid"]), int(status["turns_served"]))  # type: ignore[call-overload]
        return state

    def fresh_server(self) -> ScriptedModelServer:
        """The module's model server, its script and recorded requests emptied for a new test."""
        self.server.reset()
        return self.server

    @staticmethod
    def _forget_history(state: Warm, configured: set[str]) -> None:
        """What earlier tests left in the workspace (threads, parked requests, run records, logs)
        goes; the configuration (and the tool lists cached under catalog/) stays."""
        for entry in state.workspace.iterdir():
            if entry.name == "threads" or entry.name not in configured:
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
        (state.workspace / "threads").mkdir()

    def close(self) -> None:
        for state in self.states.values():
            leave_no_helper(state)
        self.server.stop()


@pytest.fixture(scope="module")
def helpers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Helpers]:
    """The module's shared helpers (see `Helpers`)."""
    shared = Helpers(tmp_path_factory.mktemp("shared-warm"))
    try:
        yield shared
    finally:
        shared.close()


@pytest.fixture
def model_server(helpers: Helpers) -> ScriptedModelServer:
    """The module's model server, the one its shared helpers ask (its script and recorded
    requests emptied for each test)."""
    return helpers.fresh_server()
