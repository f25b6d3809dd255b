"""Issue 10 point 12: concurrent turns on one thread never garble it.

A turn holds the thread's turn lock from the user's message to its closing event. A second
`ask --thread ID` waits (saying so on stderr) and then replays the first turn whole; with
`--no-wait` it fails with one clear line and writes nothing; `threads rm` during a turn does
not crash that turn.

The first turn is held mid-turn without timing: its second model request blocks in the
scripted server until the test lets it answer.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer

# every test races a `graphchat` process holding the thread's turn lock (HeldTurn) against a
# second writer: two processes, so the process tier
pytestmark = pytest.mark.process


def env_for(server: ScriptedModelServer) -> dict[str, str]:
    return {**server.env(), "GRAPHCHAT_TEST_TOOLS": "1"}


def start_ask(workspace: Path, server: ScriptedModelServer, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), "ask", *args],
        env=clean_env(env_for(server), workspace.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(workspace),
    )


def thread_events(workspace: Path, thread_id: str) -> list[dict[str, Any]]:
    path = workspace / "threads" / thread_id / "messages.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class HeldTurn:
    """A first `ask --thread ID` stopped inside its turn: its second model request is held."""

    def __init__(self, workspace: Path, server: ScriptedModelServer, thread_id: str) -> None:
        self.release = threading.Event()

        def held_answer(body: dict[str, Any]) -> dict[str, Any]:
            self.release.wait(60)
            return {"text": "first writer done"}

        server.push(
            {
                "tool_calls": [
                    {"id": "call_0", "name": "debug__sleep", "arguments": {"seconds": 0, "label": "one"}}
                ]
            },
            held_answer,
        )
        before = len(server.requests)
        self.proc = start_ask(workspace, server, "--thread", thread_id, "first writer")
        deadline = time.monotonic() + 60
        while len(server.requests) < before + 2:  # in its second model call: mid-turn, lock held
            assert self.proc.poll() is None, self.proc.communicate()
            assert time.monotonic() < deadline, "the first writer never reached its second model call"
            time.sleep(0.05)

    def finish(self) -> tuple[int, str, str]:
        self.release.set()
        stdout, stderr = self.proc.communicate(timeout=60)
        return self.proc.returncode, stdout, stderr

    def kill(self) -> None:
        self.release.set()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


@pytest.fixture
def thread_id(cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path) -> str:
    """A thread with one turn, made in process: only the turns racing on it need processes."""
    model_server.push({"text": "hello"})
    done = cli("ask", "--json", "start a thread", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)["thread_id"])


@pytest.fixture
def held(model_server: ScriptedModelServer, workspace: Path, thread_id: str) -> Iterator[HeldTurn]:
    turn = HeldTurn(workspace, model_server, thread_id)
    try:
        yield turn
    finally:
        turn.kill()


def test_a_second_writer_waits_and_then_replays_the_first_turn_whole(
    model_server: ScriptedModelServer, workspace: Path, thread_id: str, held: HeldTurn
) -> None:
    model_server.push({"text": "second writer done"})
    second = start_ask(workspace, model_server, "--thread", thread_id, "second writer")
    try:
        assert second.stderr is not None
        line = second.stderr.readline()  # the first thing it says: it is waiting, and for whom
        assert f"thread {thread_id} is busy" in line and f"pid {held.proc.pid}" in line, line
        code, stdout, stderr = held.finish()
        assert (code, stdout) == (0, "first writer done\n"), stderr
        stdout, stderr = second.communicate(timeout=60)
    finally:
        second.kill()
        second.communicate()
    assert second.returncode == 0, stderr
    assert stdout == "second writer done\n"
    sent = model_server.requests[-1]["messages"]
    assert [(m["role"], m.get("content")) for m in sent if m["role"] != "tool"] == [
        ("user", "start a thread"),
        ("assistant", "hello"),
        ("user", "first writer"),
        ("assistant", None),
        ("assistant", "first writer done"),
        ("user", "second writer"),
    ]
    events = thread_events(workspace, thread_id)
    kinds = [e["kind"] for e in events]
    assert kinds.count("turn_end") == 3 and "turn_failed" not in kinds
    # the turns did not interleave: each user message is followed by its own turn's end
    ends = [i for i, k in enumerate(kinds) if k == "turn_end"]
    users = [i for i, k in enumerate(kinds) if k == "user"]
    assert users[0] < ends[0] < users[1] < ends[1] < users[2] < ends[2]


def test_no_wait_fails_at_once_with_one_clear_line_and_writes_nothing(
    cli: GraphchatRunner,
    model_server: ScriptedModelServer,
    workspace: Path,
    thread_id: str,
    held: HeldTurn,
) -> None:
    requests_before = len(model_server.requests)
    events_before = thread_events(workspace, thread_id)
    done = cli("ask", "--no-wait", "--thread", thread_id, "impatient", env=env_for(model_server))
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert (
        lines[0]
        == f"error: thread {thread_id} is busy: another graphchat (pid {held.proc.pid}) is running a turn on it"
    )
    assert len(lines) <= 2 and "Traceback" not in done.stderr
    assert len(model_server.requests) == requests_before  # the model was never asked
    assert thread_events(workspace, thread_id) == events_before  # nothing written
    code, stdout, stderr = held.finish()
    assert (code, stdout) == (0, "first writer done\n"), stderr


def test_threads_rm_during_a_turn_does_not_crash_it(
    cli: GraphchatRunner,
    model_server: ScriptedModelServer,
    workspace: Path,
    thread_id: str,
    held: HeldTurn,
) -> None:
    removed = cli("threads", "rm", thread_id)
    assert removed.returncode == 0, removed.stderr
    code, stdout, stderr = held.finish()
    assert code == 0, stderr
    assert stdout == "first writer done\n"
    assert "error" not in stderr and "Traceback" not in stderr
    assert not (workspace / "threads" / thread_id).exists()  # and the turn did not bring it back
    listed = cli("threads", "list", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)["threads"] == []
