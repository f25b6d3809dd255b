"""`graphchat ask` with real MCP servers: parallel rounds on one server, crashes, approvals,
and no server process left behind however the command ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import alive, pids, seed_cache, stdio, write_servers


def ts(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def thread_events(workspace: Path) -> list[dict[str, Any]]:
    [folder] = [p for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    lines = (folder / "messages.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def tool_messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_eight_calls_to_one_slow_server_take_one_round_of_about_one_calls_time(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    marker = workspace / "starts"
    write_servers(workspace, {"t": stdio(marker=marker)})
    seed_cache(workspace)  # as a first `tools list` would
    model_server.push(
        {"tool_calls": [{"name": "t__whoami", "arguments": {}}]},  # starts the server
        {
            "tool_calls": [
                {"name": "t__slow", "arguments": {"seconds": 0.5, "label": f"c{i}"}} for i in range(8)
            ]
        },
        {"text": "all done"},
    )
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "all done\n"
    assert len(model_server.requests) == 3  # the 8 calls were one round
    results = tool_messages(model_server.requests[2])[1:]
    assert [json.loads(m["content"])["result"] for m in results] == [f"c{i}: slept 0.5s" for i in range(8)]
    events = thread_events(workspace)
    round_start = [e for e in events if e["kind"] == "assistant"][1]
    last_result = [e for e in events if e["kind"] == "tool_result"][-1]
    assert ts(last_result["ts"]) - ts(round_start["ts"]) < 1.5  # sequential: 4 s
    assert len(pids(marker)) == 1  # one server for the whole ask
    assert [p for p in pids(marker) if alive(p)] == []


def test_a_server_crashing_mid_call_is_an_error_and_the_turn_still_answers(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    write_servers(workspace, {"t": stdio()})
    seed_cache(workspace)  # as a first `tools list` would
    model_server.push(
        {
            "tool_calls": [
                {"name": "t__slow", "arguments": {"seconds": 3}},
                {"name": "t__crash", "arguments": {}},
            ]
        },
        {"tool_calls": [{"name": "t__whoami", "arguments": {}}]},
        {"text": "recovered"},
    )
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "recovered\n"
    slow, crash = tool_messages(model_server.requests[1])
    assert "MCP server 't'" in crash["content"] and "crashed" in crash["content"]
    assert "MCP server 't'" in slow["content"]
    after = tool_messages(model_server.requests[2])[-1]
    assert isinstance(json.loads(after["content"])["pid"], int)  # restarted, and it works


def test_a_destructive_tool_in_a_headless_ask_is_refused_and_the_model_is_told(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    victim = workspace / "victim.txt"
    victim.write_text("precious")
    write_servers(workspace, {"t": stdio()})
    seed_cache(workspace)  # as a first `tools list` would
    call = {"tool_calls": [{"name": "t__delete_file", "arguments": {"path": str(victim)}}]}
    model_server.push(call, {"text": "I could not delete it."})
    # --no-park: refused at once (without it the turn parks for a person: test_requests.py)
    done = cli("ask", "delete it", "--no-park", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "I could not delete it.\n"
    told = tool_messages(model_server.requests[1])[0]["content"]
    assert "was not run" in told and "approval" in told
    assert victim.exists()

    model_server.push(call, {"text": "deleted"})
    done = cli("ask", "delete it", "--yes", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "deleted" in tool_messages(model_server.requests[-1])[0]["content"]
    assert not victim.exists()


def test_no_server_is_left_running_after_ask_ends_by_error(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    marker = workspace / "starts"
    write_servers(workspace, {"t": stdio(marker=marker)})
    seed_cache(workspace)  # as a first `tools list` would
    model_server.push({"tool_calls": [{"name": "t__whoami", "arguments": {}}]}, {"error": 401})
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode != 0
    assert len(pids(marker)) == 1
    assert [p for p in pids(marker) if alive(p)] == []


def test_no_server_is_left_running_after_ctrl_c_during_a_call(
    workspace: Path, graphchat: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    fifo = workspace / "called"
    os.mkfifo(fifo)
    write_servers(workspace, {"t": stdio(env={"GRAPHCHAT_TEST_CALLED": str(fifo)})})
    seed_cache(workspace)  # as a first `tools list` would
    model_server.push({"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 60}}]}, {"text": "never"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), "ask", "go"],
        env=clean_env(model_server.env(), workspace.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server_pid: list[int] = []
    reader = threading.Thread(target=lambda: server_pid.append(int(fifo.read_text())), daemon=True)
    reader.start()
    reader.join(60)  # until the call runs on the server
    assert server_pid and alive(server_pid[0])
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=20) == 130
    assert not alive(server_pid[0])
