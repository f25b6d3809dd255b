"""Issue 10 point 13: SIGTERM and SIGHUP are Ctrl-C, and no server process survives graphchat.

`graphchat ask` is signalled while a stdio MCP server's tool runs; the server ignores its stdin
ending and has spawned a grandchild. graphchat must cancel the turn, record it in the thread as
interrupted, stop the server and its grandchild, and exit 128 + the signal. A server that exits
on stdin EOF but leaves its grandchild behind loses that grandchild too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import SERVERS, alive, stdio, write_servers

STUBBORN = str(SERVERS / "stubborn_server.py")


def marker_lines(marker: Path) -> list[str]:
    return marker.read_text().splitlines() if marker.exists() else []


def server_pids(marker: Path) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in marker_lines(marker) if " " in line)}


def gone(pid: int) -> bool:
    """Whether the process has died (allowing the kernel a moment to deliver a SIGKILL)."""
    deadline = time.monotonic() + 10
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def marker(workspace: Path) -> Path:
    return workspace.parent / "stubborn.marker"


def configure(workspace: Path, marker: Path, on_eof: str) -> None:
    write_servers(workspace, {"stubborn": stdio(STUBBORN, marker, env={"GRAPHCHAT_TEST_ON_EOF": on_eof})})


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
@pytest.mark.process
def test_a_signal_cancels_records_and_stops_servers_and_their_children(
    model_server: ScriptedModelServer, workspace: Path, marker: Path, sig: signal.Signals
) -> None:
    configure(workspace, marker, "linger")
    model_server.push({"tool_calls": [{"name": "stubborn__wait", "arguments": {"seconds": 600}}]})
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), "ask", "wait for it"],
        env=clean_env(model_server.env(), workspace.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(workspace),
    )
    pids: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 60
        while "called" not in marker_lines(marker):  # the tool is running in the server
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the tool call never reached the server"
            time.sleep(0.05)
        pids = server_pids(marker)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in pids.values():  # never leave them behind, whatever the outcome
            if alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)
    assert proc.returncode == 128 + sig, stderr
    assert stdout == ""
    assert "Traceback" not in stderr and "internal error" not in stderr
    assert gone(pids["server"]), "the server outlived graphchat"
    assert gone(pids["grandchild"]), "the server's child outlived graphchat"
    [thread] = [p for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    events = [json.loads(line) for line in (thread / "messages.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["user", "assistant", "tool_result", "turn_failed"]
    assert events[2]["is_error"] and "cancelled" in events[2]["content"]
    assert events[3]["interrupted"] is True and sig.name in events[3]["error"]


def test_a_server_exiting_on_eof_does_not_leave_its_children_running(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path, marker: Path
) -> None:
    """In process: the server and its grandchild are gone once the command returns, without
    the end of graphchat's own process to take them down."""
    configure(workspace, marker, "exit")
    model_server.push(
        {"tool_calls": [{"name": "stubborn__wait", "arguments": {"seconds": 0}}]}, {"text": "waited"}
    )
    pids: dict[str, int] = {}
    try:
        done = cli("ask", "wait a moment", env=model_server.env())
        pids = server_pids(marker)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "waited\n"
        assert gone(pids["server"])
        assert gone(pids["grandchild"]), "the server's child outlived graphchat"
    finally:
        for pid in pids.values():
            if alive(pid):
                subprocess.run(["kill", "-9", str(pid)], check=False)


@pytest.mark.process
def test_chat_whose_terminal_closes_mid_turn_records_the_turn_and_exits_129(
    model_server: ScriptedModelServer, workspace: Path
) -> None:
    """Closing the terminal sends SIGHUP; the chat's screen is gone by the time it cleans up."""
    import pexpect

    model_server.push({"tool_calls": [{"name": "debug__sleep", "arguments": {"seconds": 600, "label": "x"}}]})
    env = clean_env(
        {**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1", "PROMPT_TOOLKIT_NO_CPR": "1",
         "GRAPHCHAT_TEST_TOOLS": "1"},
        workspace.parent,
    )  # fmt: skip
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "chat"],
        env=env,
        cwd=str(workspace),
        dimensions=(40, 120),
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect_exact("you>")
        child.sendline("sleep a while")
        child.expect_exact("debug__sleep")  # the tool is running
        child.ptyproc.fileobj.close()  # the terminal goes away
        child.wait()
    finally:
        if child.isalive():
            child.kill(signal.SIGKILL)
            child.wait()
    assert (child.exitstatus, child.signalstatus) == (129, None)
    [thread] = [p for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    events = [json.loads(line) for line in (thread / "messages.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events] == ["user", "assistant", "tool_result", "turn_failed"]
    assert events[3]["interrupted"] is True and "SIGHUP" in events[3]["error"]
