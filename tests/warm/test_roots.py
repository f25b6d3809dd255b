"""MCP roots under the warm helper (issue 25): a turn asked from another folder has that
folder among its roots — the helper's running servers are told (`roots/list_changed`) and
read them again — and while another folder's turn runs, the helper does not serve it (its
servers cannot show two sets of roots): that ask runs locally, with servers of its own.

The tests share the module's helper (tests/warm/conftest.py, `Helpers`) of a workspace with
the `everything` server and a folder `sub`."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from tests.catalog.test_mcp_features import everything, needs_everything
from tests.scripted_server import ScriptedModelServer
from tests.warm.conftest import Helpers, Warm

ROOTS = {"name": "everything__get-roots-list", "arguments": {}}


@pytest.fixture
def warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace with the `everything` server and a folder `sub`."""

    def configure(warm: Warm) -> None:
        everything(warm.workspace)
        (warm.workspace / "sub").mkdir()

    return helpers.warm("everything", configure)


def _roots_result(request: dict[str, object]) -> str:
    return next(str(m["content"]) for m in request["messages"] if m["role"] == "tool")  # type: ignore[attr-defined,index]


@needs_everything
def test_a_warm_turn_from_another_folder_gets_that_folders_roots(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    sub = warm.workspace / "sub"
    warm.start()
    here = warm.workspace.resolve().as_uri()
    for cwd in (warm.workspace, sub, warm.workspace):
        model_server.push({"tool_calls": [ROOTS]}, {"text": "listed"})
        done = warm.ask("which roots?", cwd=cwd)
        assert (done.returncode, done.stdout) == (0, "listed\n"), done.stderr
    first, second, third = (_roots_result(model_server.requests[i]) for i in (1, 3, 5))
    assert here in first and "total" in first and sub.resolve().as_uri() not in first
    assert sub.resolve().as_uri() in second and "current folder" in second and here in second
    assert sub.resolve().as_uri() not in third  # and back
    assert warm.served() == 3  # all three by the helper's one server


@needs_everything
def test_while_a_turn_runs_a_turn_from_another_folder_runs_locally(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    sub = warm.workspace / "sub"
    warm.start()
    model_server.push({"delay": 6, "text": "slow answer"})
    slow: list[subprocess.CompletedProcess[str]] = []
    runner = threading.Thread(target=lambda: slow.append(warm.ask("take your time")))
    runner.start()
    deadline = time.monotonic() + 60
    while not model_server.requests and time.monotonic() < deadline:  # the slow turn is running
        time.sleep(0.05)
    model_server.push({"tool_calls": [ROOTS]}, {"text": "listed"})
    done = warm.ask("which roots?", cwd=sub, env={"GRAPHCHAT_DEBUG": "1"})
    runner.join(90)
    assert (done.returncode, done.stdout) == (0, "listed\n"), done.stderr
    assert "roots would differ" in done.stderr
    assert sub.resolve().as_uri() in _roots_result(model_server.requests[-1])
    assert slow and slow[0].returncode == 0 and slow[0].stdout == "slow answer\n", slow
    assert warm.served() == 1  # the slow one only
