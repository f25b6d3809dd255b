"""`graphchat mcp tools`, `mcp test` and `mcp probe` through the real command against real MCP
servers (tests/servers/probe_server.py, tools_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner
from tests.servers.support import stdio, write_servers

SERVERS = Path(__file__).resolve().parent.parent / "servers"
PROBE = str(SERVERS / "probe_server.py")
GRAPH_TOOL_KEYS = {"name", "source", "description", "readOnly", "hasOutputSchema"}  # listing.rs
GRAPH_TEST_KEYS = {"server", "ok", "tools", "declareOutputSchema", "elapsedMs"}  # mcp_cmd.rs `test`


@pytest.fixture
def calls(workspace: Path, tmp_path: Path) -> Path:
    log = tmp_path / "calls.jsonl"
    write_servers(
        workspace,
        {
            "probe": stdio(PROBE, env={"GRAPHCHAT_TEST_CALL_LOG": str(log)}),
            "t": stdio(),
            "broken": {"command": "/nonexistent/server-binary"},
        },
    )
    return log


def called(log: Path) -> list[str]:
    return [json.loads(line)["tool"] for line in log.read_text().splitlines()] if log.exists() else []


def test_mcp_tools_lists_one_servers_tools_with_graphs_envelope(cli: GraphchatRunner, calls: Path) -> None:
    done = cli("mcp", "tools", "probe", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert set(body) == {"tools", "count", "sources"}
    assert body["count"] == len(body["tools"]) == 5
    assert body["sources"] == [{"source": "probe", "count": 5}]  # no control steps here
    for tool in body["tools"]:
        assert GRAPH_TOOL_KEYS <= set(tool)
    read_only = {t["name"]: t["readOnly"] for t in body["tools"]}
    assert read_only["probe__status"] is True and read_only["probe__reset"] is False
    text = cli("mcp", "tools", "probe")
    lines = text.stdout.splitlines()
    assert lines[0] == "probe — 5 tools"
    assert "  status [read-only]" in lines and "  reset" in lines
    assert "  The service's health: {healthy, version, uptime_s}." in lines
    assert called(calls) == []  # listing calls nothing


def test_mcp_tools_of_every_server_reports_the_one_that_cannot_start(
    cli: GraphchatRunner, calls: Path
) -> None:
    done = cli("mcp", "tools", "--json")
    assert done.returncode == 0, done.stderr
    sources = {s["source"] for s in json.loads(done.stdout)["sources"]}
    assert sources == {"probe", "t"}
    assert "MCP server 'broken' cannot start" in done.stderr
    missing = cli("mcp", "tools", "prob")
    assert missing.returncode == 1
    assert missing.stderr.splitlines()[0].startswith(
        "error: no MCP server 'prob' is configured (did you mean"
    )


def test_mcp_test_reports_time_and_tools_or_the_error_with_its_exit_code(
    cli: GraphchatRunner, calls: Path
) -> None:
    ok = cli("mcp", "test", "probe", "--json")
    assert ok.returncode == 0, ok.stderr
    body = json.loads(ok.stdout)
    assert set(body) == GRAPH_TEST_KEYS
    assert body["server"] == "probe" and body["ok"] is True and body["tools"] == 5
    assert isinstance(body["elapsedMs"], int) and body["elapsedMs"] >= 0
    assert body["declareOutputSchema"] >= 1  # status -> dict declares its output
    text = cli("mcp", "test", "t")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("ok: 't' initialized in ") and " tools (" in text.stdout
    failed = cli("mcp", "test", "broken", "--json")
    assert failed.returncode == 1
    bad = json.loads(failed.stdout)
    assert bad["ok"] is False and bad["tools"] == 0 and bad["error"]
    plain = cli("mcp", "test", "broken")
    assert plain.returncode == 1 and plain.stdout == ""
    assert plain.stderr.startswith("error: MCP server 'broken' failed after ")


def test_mcp_probe_calls_only_read_only_tools_without_required_arguments(
    cli: GraphchatRunner, calls: Path, workspace: Path
) -> None:
    done = cli("mcp", "probe", "probe", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert sorted(called(calls)) == ["flaky", "status"]  # never reset, ping (not read-only) or lookup
    probed = {r["tool"]: r for r in body["probed"]}
    assert set(probed) == {"probe__status", "probe__flaky"}
    assert probed["probe__status"]["ok"] is True
    assert set(probed["probe__status"]["schema"]["properties"]) == {"healthy", "version", "uptime_s"}
    assert probed["probe__flaky"]["ok"] is False and "backend down" in probed["probe__flaky"]["error"]
    skipped = {r["tool"]: r["reason"] for r in body["skipped"]}
    assert skipped == {
        "probe__lookup": "needs arguments: key",
        "probe__reset": "not read-only (destructive)",
        "probe__ping": "not read-only (destructive)",
    }
    assert body["learned"] == 1 and body["count"] == 5
    # what was learned is in the shape cache: shapes show has it
    shown = cli("shapes", "show", "probe__status", "--json")
    assert shown.returncode == 0, shown.stderr
    assert set(json.loads(shown.stdout)["schema"]["properties"]) == {"healthy", "version", "uptime_s"}
    text = cli("mcp", "probe", "probe")
    assert "✓ probe__status: learned object {healthy, version, uptime_s}" in text.stderr
    assert "– probe__reset: skipped, not read-only (destructive)" in text.stderr
    assert "probed 2 tools, learned 1 shape, skipped 3" in text.stderr
    assert text.stdout == ""
