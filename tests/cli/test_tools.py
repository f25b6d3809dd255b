"""`graphchat tools|mcp|shapes` as a user runs them (the real command, real MCP servers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner, clean_env
from tests.servers.support import LOWLEVEL_SERVER, RecordingListener, alive, pids, stdio, write_servers


def test_tools_list_from_a_warm_cache_starts_no_server(workspace: Path, cli: GraphchatRunner) -> None:
    marker = workspace / "starts"
    write_servers(
        workspace,
        {"t": stdio(marker=marker), "low": stdio(LOWLEVEL_SERVER, marker=marker, env={"TOOL_COUNT": "2"})},
    )
    cold = cli("tools", "list")
    assert cold.returncode == 0, cold.stderr
    assert len(pids(marker)) == 2  # uncached: both started (concurrently) to learn their tools
    assert "starting 2 MCP server(s)" in cold.stderr
    warm = cli("tools", "list")
    assert warm.returncode == 0, warm.stderr
    assert len(pids(marker)) == 2  # warm: nothing started
    assert warm.stderr == ""
    rows = {line.split()[0]: line.split()[1:3] for line in warm.stdout.splitlines()}
    assert rows["t__slow"] == ["mcp:t", "read"]
    assert rows["t__delete_file"] == ["mcp:t", "destructive"]
    assert rows["low__tool_001"] == ["mcp:low", "read"]
    listed = json.loads(cli("tools", "list", "--json").stdout)["tools"]
    slow = next(t for t in listed if t["name"] == "t__slow")
    assert slow == {**slow, "source": "t", "origin": "mcp:t", "family": "read", "server": "t", "tool": "slow"}
    assert slow["description"].startswith("Sleep")
    assert len(pids(marker)) == 2
    refreshed = cli("tools", "list", "--refresh")
    assert refreshed.returncode == 0 and len(pids(marker)) == 4  # --refresh forces a start
    assert [p for p in pids(marker) if alive(p)] == []  # and stops them again


def test_tools_list_reports_colliding_names(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(workspace, {"a-b": stdio(LOWLEVEL_SERVER, env={"TOOL_COUNT": "1"})})
    cache = workspace / "catalog" / "cache"
    cli("tools", "list")
    # A server whose tools sanitize to the same catalog name ("x.y" and "x_y" -> "a-b__x_y").
    doc_path = next(p for p in cache.glob("a-b-*.json"))
    doc = json.loads(doc_path.read_text())
    doc["tools"] += [{"name": "x.y", "input_schema": {"type": "object"}}, {"name": "x_y", "input_schema": {}}]
    doc_path.write_text(json.dumps(doc))
    result = cli("tools", "list", "--json")
    names = [t["name"] for t in json.loads(result.stdout)["tools"]]
    assert "a-b__x_y" in names and len([n for n in names if n.startswith("a-b__x_y")]) == 2
    assert "a-b__x_y is wanted by a-b/x.y and a-b/x_y" in result.stderr


def test_tools_show_and_call_and_the_shape_cache(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(workspace, {"t": stdio()})
    shown = cli("tools", "show", "t__shaped", "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["input_schema"]["properties"]["variant"]["type"] == "integer"
    assert "output_schema" not in doc  # nothing learned yet
    first = cli("tools", "call", "t__shaped", '{"variant": 1}')
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"id": 1, "name": "first", "score": 0.5}
    (workspace / "in.json").write_text('{"variant": 2}')
    second = cli("tools", "call", "t__shaped", "@" + str(workspace / "in.json"), "--json")
    assert json.loads(second.stdout)["value"] == {"id": "two", "tags": ["x", "y"], "score": 2}
    third = cli("tools", "call", "t__shaped", "-", "--input", "variant=1", input="{}")
    assert third.returncode == 0

    shape = json.loads(cli("shapes", "show", "t__shaped", "--json").stdout)
    assert shape["seen_count"] == 3
    schema = shape["schema"]
    assert sorted(schema["properties"]["id"]["type"]) == ["integer", "string"]  # merged
    assert set(schema["properties"]) == {"id", "name", "score", "tags"}
    assert sorted(schema["required"]) == ["id", "score"]  # seen every time
    listed = cli("shapes", "list")
    assert listed.stdout.startswith("t__shaped")
    shown = json.loads(cli("tools", "show", "t__shaped", "--json").stdout)
    assert shown["output_schema_source"].startswith("observed") and "example" in shown
    assert "schema:" in cli("shapes", "show", "t__shaped").stdout


def test_a_one_megabyte_result_keeps_a_small_example(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(workspace, {"t": stdio()})
    result = cli("tools", "call", "t__huge", "--input", "kb=1024")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout) > 1_000_000
    stored = workspace / "catalog" / "shapes" / "t__huge.json"
    assert stored.stat().st_size < 8_000
    shape = json.loads(stored.read_text())
    assert shape["schema"]["properties"]["records"]["items"]["properties"]["id"] == {"type": "integer"}


def test_tools_call_errors(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(workspace, {"t": stdio()})
    unknown = cli("tools", "call", "t__nope")
    assert unknown.returncode == 1 and "unknown tool: t__nope" in unknown.stderr
    failing = cli("tools", "call", "t__fail", "--input", "message=disk full")
    assert failing.returncode == 1 and "disk full" in failing.stderr and failing.stdout == ""
    bad = cli("tools", "call", "t__slow", '{"seconds": "soon"}')
    assert bad.returncode == 1 and "invalid arguments for t__slow" in bad.stderr
    not_json = cli("tools", "call", "t__slow", "{oops")
    assert not_json.returncode == 2


def test_a_destructive_tool_is_refused_headless_and_runs_with_yes(
    workspace: Path, cli: GraphchatRunner
) -> None:
    victim = workspace / "victim.txt"
    victim.write_text("precious")
    write_servers(workspace, {"t": stdio()})
    refused = cli("tools", "call", "t__delete_file", "--input", f"path={victim}")
    assert refused.returncode == 1 and "was not run" in refused.stderr
    assert "--yes" in refused.stderr and "do not retry" not in refused.stderr  # said to a person, not a model
    assert victim.exists()
    done = cli("tools", "call", "t__delete_file", "--input", f"path={victim}", "--yes")
    assert done.returncode == 0, done.stderr
    assert not victim.exists()


def test_unset_token_fails_with_server_field_variable_and_sends_nothing(
    workspace: Path, cli: GraphchatRunner
) -> None:
    listener = RecordingListener()
    try:
        write_servers(
            workspace,
            {
                "search": {
                    "type": "http",
                    "url": listener.url,
                    "headers": {"Authorization": "Bearer ${TOKEN}"},
                }
            },
        )
        listed = cli("tools", "list")
        called = cli("tools", "call", "search__query")
    finally:
        listener.close()
    assert "search" in listed.stderr and "headers.Authorization" in listed.stderr and "TOKEN" in listed.stderr
    warning = next(line for line in listed.stderr.splitlines() if line.startswith("warning:"))
    assert warning == (
        "warning: MCP server 'search': failed to start: headers.Authorization uses ${TOKEN}, "
        "but the environment variable TOKEN is not set"
    )  # one clear line: no exception class, no log to read (nothing started)
    assert called.returncode == 1
    assert listener.connections == []


def test_mcp_list_shows_servers_state_tools_and_last_error(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(
        workspace,
        {"t": stdio(), "ghost": {"command": str(workspace / "missing-binary")}},
    )
    before = json.loads(cli("mcp", "list", "--json").stdout)["servers"]
    assert [(r["name"], r["state"], r["tools"]) for r in before] == [
        ("t", "not started yet", None),
        ("ghost", "not started yet", None),
    ]
    cli("tools", "list")
    after = cli("mcp", "list")
    assert after.returncode == 0
    t_line, ghost_line = after.stdout.splitlines()[0], after.stdout.splitlines()[1]
    assert t_line.split()[:3] == ["t", "stdio", "cached"] and "tools" in t_line
    assert ghost_line.split()[:3] == ["ghost", "stdio", "failed"]  # its start failed: not "not started"
    assert "last error" in after.stdout and "command not found" in after.stdout
    checked = cli("mcp", "list", "--check", "--json")
    states = {r["name"]: r["state"] for r in json.loads(checked.stdout)["servers"]}
    assert states == {"t": "running", "ghost": "failed"} and checked.returncode == 1


def test_a_broken_server_is_remembered_until_its_config_changes_or_a_refresh(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 11 point 11: a server whose start failed is not retried by every command."""
    ghost = {"command": str(workspace / "missing-binary")}
    write_servers(workspace, {"t": stdio(), "ghost": ghost})
    first = cli("tools", "list")
    assert "starting 2 MCP server(s)" in first.stderr and "command not found" in first.stderr
    again = cli("tools", "list")
    assert again.returncode == 0, again.stderr
    assert "starting" not in again.stderr  # nothing was started
    assert "MCP server 'ghost': its last start failed" in again.stderr and "--refresh" in again.stderr
    assert "not retried until its configuration changes" in cli("mcp", "list").stdout
    refreshed = cli("tools", "list", "--refresh")
    assert "starting 2 MCP server(s)" in refreshed.stderr
    write_servers(workspace, {"t": stdio(), "ghost": {**ghost, "args": ["--changed"]}})
    changed = cli("tools", "list")
    assert "starting 1 MCP server(s) to read their tools: ghost" in changed.stderr


def test_a_bad_server_entry_is_skipped_with_a_warning_naming_file_and_line(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "catalog" / "servers.yaml").write_text("mcpServers:\n  s:\n    comand: x\n")
    result = cli("tools", "list")
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith(f"warning: {workspace / 'catalog' / 'servers.yaml'}:3:")
    assert "did you mean `command`" in result.stderr and "skipped" in result.stderr


def test_a_broken_servers_file_is_still_one_error_line(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "catalog" / "servers.yaml").write_text("servers:\n  s: {command: x}\n")
    result = cli("tools", "list")
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {workspace / 'catalog' / 'servers.yaml'}:")
    assert "mcpServers" in result.stderr


def test_a_pasted_mcp_json_with_one_unsupported_server_keeps_the_others_working(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 11 point 5: an SSE entry of a pasted .mcp.json is skipped, every command works."""
    good = stdio()
    doc = {"mcpServers": {"old": {"type": "sse", "url": "http://127.0.0.1:9/sse"}, "t": good}}
    (workspace / "catalog" / "servers.yaml").write_text(json.dumps(doc))
    listed = cli("tools", "list")
    assert listed.returncode == 0, listed.stderr
    assert "t__" in listed.stdout
    assert "server 'old'" in listed.stderr and "sse" in listed.stderr and "skipped" in listed.stderr
    servers = cli("mcp", "list")
    assert servers.returncode == 0 and servers.stdout.split()[0] == "t"
    assert "server 'old'" in servers.stderr
    assert cli("plan", "list").returncode == 0


@pytest.mark.process  # SIGINT to a running `graphchat` (the cache is warmed in process)
def test_ctrl_c_during_a_call_leaves_no_server_process(workspace: Path, cli: GraphchatRunner) -> None:
    fifo = workspace / "called"
    os.mkfifo(fifo)
    write_servers(workspace, {"t": stdio(env={"GRAPHCHAT_TEST_CALLED": str(fifo)})})
    assert cli("tools", "list").returncode == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), "tools", "call", "t__slow",
         "--input", "seconds=60"],
        env=clean_env(None, workspace.parent),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server_pid: list[int] = []
    # Blocks until the tool runs on the server (it writes its pid into the FIFO).
    reader = threading.Thread(target=lambda: server_pid.append(int(fifo.read_text())), daemon=True)
    reader.start()
    reader.join(30)
    assert server_pid and alive(server_pid[0])
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=15) == 130
    assert not alive(server_pid[0])


def test_tools_call_prints_an_error_once(workspace: Path, cli: GraphchatRunner) -> None:
    """Issue 11 point 14: the ✗ activity line and the error line do not repeat the message."""
    done = cli("tools", "call", "builtin__infer", "--input", "x=1")
    assert done.returncode == 1
    assert done.stderr.count("'instruction' is a required property") == 1, done.stderr
    assert done.stderr.splitlines()[0].startswith("✗ builtin__infer")


def test_mcp_list_shows_the_expanded_command_with_secrets_redacted(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 11 point 14: the command as it will start, not its ${VAR}s."""
    write_servers(
        workspace,
        {"t": {"command": "${GRAPHCHAT_PYTHON}", "args": ["-m", "x", "--key", "${DEMO_API_KEY}"]}},
    )
    done = cli("mcp", "list", env={"DEMO_API_KEY": "sk-very-secret-value"})
    assert done.returncode == 0, done.stderr
    assert sys.executable in done.stdout and "${GRAPHCHAT_PYTHON}" not in done.stdout
    assert "sk-very-secret-value" not in done.stdout and "[redacted]" in done.stdout
    unset = cli("mcp", "list")  # an unset variable: what is written, not a crash
    assert "${DEMO_API_KEY}" in unset.stdout
