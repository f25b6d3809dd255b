"""Nothing from a server or the MCP SDK reaches the user's terminal: server stderr goes to its
log, SDK complaints (a server writing non-JSON-RPC to stdout) to catalog/logs/client.log."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.servers.support import stdio, write_servers


def test_a_careless_servers_output_and_sdk_complaints_stay_off_the_terminal(
    workspace: Path, cli: GraphchatRunner
) -> None:
    write_servers(workspace, {"s": stdio(env={"GRAPHCHAT_TEST_STRAY_STDOUT": "1"})})
    done = cli("tools", "call", "s__whoami")
    assert done.returncode == 0, done.stderr
    assert isinstance(json.loads(done.stdout)["pid"], int)
    for noise in ("STRAY", "Failed to parse", "Traceback", "tools_server"):
        assert noise not in done.stderr
    logs = workspace / "catalog" / "logs"
    assert "Failed to parse JSONRPC message" in (logs / "client.log").read_text()
    assert "tools_server" in (logs / "s.log").read_text()  # the server's own stderr
