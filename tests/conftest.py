"""Shared fixtures: a scripted model server, a fresh workspace, and the real `graphchat` command."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.scripted_server import ScriptedModelServer

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


@pytest.fixture
def model_server() -> Iterator[ScriptedModelServer]:
    server = ScriptedModelServer().start()
    yield server
    server.stop()


def new_workspace(parent: Path) -> Path:
    """An empty workspace `parent/ws`: graphchat.yaml, catalog/, plans/, threads/."""
    ws = parent / "ws"
    for sub in ("catalog", "plans", "threads"):
        (ws / sub).mkdir(parents=True)
    (ws / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
    return ws


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace: graphchat.yaml, catalog/, plans/, threads/."""
    return new_workspace(tmp_path)


def run_states(workspace: Path) -> list[str]:
    """The state of each run record in the workspace (an ended run's is kept: finished, failed)."""
    import json

    folder = workspace / "requests" / "runs"
    return [json.loads(p.read_text()).get("state", "parked") for p in sorted(folder.glob("*.json"))]


def clean_env(extra: dict[str, str] | None = None, home: Path | None = None) -> dict[str, str]:
    """The environment a test's graphchat runs in: no inherited graphchat/provider settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GRAPHCHAT_", "OPENAI_", "ANTHROPIC_", "LITELLM_"))
        and k not in ("NO_COLOR", "GRAPH_EVENTS", "GRAPH_STORAGE", "GRAPH_LOG")  # graph's aliases
    }
    if home is not None:
        env["XDG_DATA_HOME"] = str(home / ".xdg")
        env["XDG_CONFIG_HOME"] = str(home / ".xdg-config")  # no user configuration layer leaks in
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    # settings.warm defaults to auto: a test starts no helper unless it says so (its own
    # GRAPHCHAT_WARM, or settings.warm: auto in its workspace)
    env.setdefault("GRAPHCHAT_WARM", "manual")
    return env


GraphchatRunner = Callable[..., subprocess.CompletedProcess[str]]
GraphchatSpawner = Callable[..., subprocess.Popen[str]]


@pytest.fixture
def graphchat(workspace: Path) -> GraphchatRunner:
    """Run the real command: graphchat(args..., env={...}, input=..., timeout=...)."""

    def run(
        *args: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 60,
        home: Path | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        ws = home or workspace
        return subprocess.run(
            [sys.executable, "-m", "graphchat", "--home", str(ws), *args],
            env=clean_env(env, ws.parent),
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(cwd or ws),
        )

    return run


@pytest.fixture
def spawn_graphchat(workspace: Path) -> GraphchatSpawner:
    """Start the real command and return at once: spawn_graphchat(args..., env={...}) -> Popen
    (stdin closed, stdout and stderr pipes): for a test that signals it or reads it as it runs."""

    def start(
        *args: str, env: dict[str, str] | None = None, home: Path | None = None
    ) -> subprocess.Popen[str]:
        return spawn_in(home or workspace, *args, env=env)

    return start


def spawn_in(workspace: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """The real command started in `workspace` and returned at once (stdin closed, stdout and
    stderr pipes): what `spawn_graphchat` does, for a test whose workspace is another fixture."""
    return subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), *args],
        env=clean_env(env, workspace.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(workspace),
    )


@pytest.fixture
def cli(workspace: Path) -> GraphchatRunner:
    """The in-process tier: `graphchat`'s signature and result, the real entry point run inside
    this process (tests/inprocess.py; litellm imported once per test process, not per command)."""
    from tests.inprocess import run_cli

    def run(
        *args: str,
        env: dict[str, str] | None = None,
        input: str | None = None,
        timeout: float = 60,
        home: Path | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        ws = home or workspace
        return run_cli(
            ["--home", str(ws), *args], env=env, input=input, timeout=timeout, home=ws.parent, cwd=cwd or ws
        )

    return run


# --- the tiers ---------------------------------------------------------------------------------------
# `pytest -m "not process"` is the fast tier: pure functions, in-process components, and the real
# command run in process (the `cli` fixture). A test is in the process tier when it needs a process
# boundary: it uses a fixture that starts `graphchat` as a process (`graphchat`, the pty's `chat`,
# the warm helper's `warm`, `spawn_graphchat`), it lives in a process folder, or it says so itself
# (`@pytest.mark.process`, or `pytestmark` for a module that starts `graphchat` its own way: pexpect,
# a helper of its own). Nothing is read from test text.

PROCESS_FIXTURES = frozenset({"graphchat", "spawn_graphchat", "chat", "warm"})
PROCESS_FOLDERS = ("warm", "workbench")  # under tests/: every test there needs a process


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        folder = Path(str(item.fspath)).relative_to(TESTS).parts[0]
        if names & PROCESS_FIXTURES or folder in PROCESS_FOLDERS:
            item.add_marker(pytest.mark.process)
    # The slowest first, so that pytest-xdist's workers end together instead of one of them
    # finishing the warm helper's tests alone at the end: the process folders (each test starts
    # a helper or a pty), then the other process tests, then the in-process tier. A stable sort:
    # a module's tests keep their order.
    items.sort(key=_slowness)


def _slowness(item: pytest.Item) -> int:
    if Path(str(item.fspath)).relative_to(TESTS).parts[0] in PROCESS_FOLDERS:
        return 0
    return 1 if item.get_closest_marker("process") else 2
