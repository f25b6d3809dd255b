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


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace: graphchat.yaml, catalog/, plans/, threads/."""
    ws = tmp_path / "ws"
    for sub in ("catalog", "plans", "threads"):
        (ws / sub).mkdir(parents=True)
    (ws / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
    return ws


def clean_env(extra: dict[str, str] | None = None, home: Path | None = None) -> dict[str, str]:
    """The environment a test's graphchat runs in: no inherited graphchat/provider settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("GRAPHCHAT_", "OPENAI_", "ANTHROPIC_", "LITELLM_")) and k not in ("NO_COLOR",)
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


# --- the `slow` marker -----------------------------------------------------------------------------
# `pytest -m "not slow"` is the fast inner loop: pure functions and in-process components. A test
# is slow when it runs the real command or a real server process (the graphchat fixture, a
# pseudo-terminal, a subprocess, an MCP server). The README's command runs everything.

_SLOW_SIGNS = ("subprocess", "pexpect", "stdio(", "McpSource", "catalog_server", "mcp_server_time",
               "tools_server", "write_servers", "os.fork", "multiprocessing")  # fmt: skip
_slow_modules: dict[str, bool] = {}


def _module_is_slow(path: Path) -> bool:
    key = str(path)
    if key not in _slow_modules:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError:
            text = ""
        _slow_modules[key] = any(sign in text for sign in _SLOW_SIGNS)
    return _slow_modules[key]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "graphchat" in names or "chat" in names or _module_is_slow(Path(str(item.fspath))):
            item.add_marker(pytest.mark.slow)
