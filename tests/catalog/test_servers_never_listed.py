"""`ask` over servers no command has listed yet: their tools reach the model's first request, and
calls to several servers in one round all run; every server started is stopped at the end."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import LOWLEVEL_SERVER, alive, pids, stdio, write_servers


def test_uncached_servers_are_seen_by_the_model_and_called_in_one_round(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    marker = workspace / "starts"
    write_servers(
        workspace,
        {"t": stdio(marker=marker), "low": stdio(LOWLEVEL_SERVER, marker=marker, env={"TOOL_COUNT": "2"})},
    )
    assert not (workspace / "catalog" / "cache").exists()  # nothing listed before this ask
    model_server.push(
        {
            "tool_calls": [
                {"name": "t__whoami", "arguments": {}},
                {"name": "low__tool_001", "arguments": {}},
                {"name": "t__stamp", "arguments": {"n": 4}},
            ]
        },
        {"text": "done"},
    )
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "done\n"
    first = {t["function"]["name"] for t in model_server.requests[0]["tools"]}
    assert {"ask_user", "t__whoami", "t__stamp", "low__tool_001", "low__tool_000"} <= first
    results = [m["content"] for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert isinstance(json.loads(results[0])["pid"], int)
    assert json.loads(results[1]) == {"text": "tool_001 ran"}
    assert json.loads(results[2]) == {"total": 8, "unit": "pcs"}
    assert len(pids(marker)) == 2  # each server started once, for listing and calling alike
    assert [p for p in pids(marker) if alive(p)] == []
    assert "Traceback" not in done.stderr and "INFO" not in done.stderr  # no server/SDK noise
