"""A tool of a server that cannot start is reported as that, everywhere (issue 24, item 2):
`plan run`, `tools call`, `plan validate` and the model's tool result in `ask` name the server
and the reason (the unset variable and its field; the command not found; the exit code and the
last lines of its log), with the log path once it was started; nobody says "unknown tool"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer

SERVERS = {
    # an argument naming a variable nobody set
    "unset": {
        "command": "${GRAPHCHAT_PYTHON}",
        "args": ["-m", "mcp_server_time", "--local-timezone", "${MY_TZ}"],
    },
    # a misspelt command
    "misspelt": {"command": "mcp-server-tiem", "args": ["--local-timezone", "UTC"]},
    # a server that exits at once, saying why on stderr
    "exits": {"command": "sh", "args": ["-c", "echo 'fatal: no config file' >&2; exit 3"]},
}
REASONS = {
    "unset": ["args[3]", "${MY_TZ}", "MY_TZ is not set"],
    "misspelt": ["command not found: mcp-server-tiem", "log: "],
    "exits": ["exited with code 3", "fatal: no config file", "log: "],
}
PLAN = """identifier: clock
name: Clock
description: the time in one zone
steps:
  - id: now
    tool_name: time__get_current_time
    input: {timezone: UTC}
output: {now: "{{now}}"}
"""


@pytest.fixture(params=sorted(SERVERS))
def broken(request: pytest.FixtureRequest, workspace: Path) -> str:
    (workspace / "catalog" / "servers.yaml").write_text(
        json.dumps({"mcpServers": {"time": SERVERS[request.param]}})
    )
    (workspace / "plans" / "clock.yaml").write_text(PLAN)
    return str(request.param)


def said(text: str, kind: str) -> None:
    assert "MCP server 'time' cannot start: " in text, text
    for reason in REASONS[kind]:
        assert reason in text, text
    assert "unknown tool" not in text, text


def test_plan_run_and_tools_call_name_the_server_and_the_reason(cli: GraphchatRunner, broken: str) -> None:
    run = cli("plan", "run", "clock")
    assert run.returncode == 1 and run.stdout == ""
    said(run.stderr, broken)
    assert len([line for line in run.stderr.splitlines() if line.startswith("error:")]) == 1
    call = cli("tools", "call", "time__get_current_time", "--input", "timezone=UTC")
    assert call.returncode == 1 and call.stdout == ""
    said(call.stderr, broken)
    assert call.stderr.count("\n") == 1, call.stderr  # one line


def test_plan_validate_names_the_server_and_the_reason(
    cli: GraphchatRunner, broken: str, workspace: Path
) -> None:
    cli("plan", "run", "clock")  # a failed start, remembered
    done = cli("plan", "validate", "clock")
    said(done.stderr, broken)
    import shutil

    shutil.rmtree(workspace / "catalog" / "cache", ignore_errors=True)  # nothing remembered: found anyway
    fresh = cli("plan", "validate", "clock")
    said(fresh.stderr, broken)


def test_the_model_gets_the_same_line_as_the_tool_result(
    cli: GraphchatRunner, model_server: ScriptedModelServer, broken: str
) -> None:
    model_server.push(
        {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "UTC"}}]},
        {"text": "the clock is broken"},
    )
    done = cli("ask", "what time is it?", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "the clock is broken\n"
    tool = [m for m in model_server.requests[1]["messages"] if m.get("role") == "tool"]
    assert len(tool) == 1
    said(str(tool[0]["content"]), broken)
    said(done.stderr, broken)  # the warning at the start and the ✗ line
