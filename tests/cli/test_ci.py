"""Running unattended (graphchat.ci, graphchat.logs) through the real command: GitHub Actions
annotations (GRAPHCHAT_EVENTS=github), GRAPHCHAT_STORAGE=memory writing nothing, graph's
variable names as aliases, and -v/-vv/-vvv with the GRAPHCHAT_LOG filter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphchat.ci import command, escape_data, escape_property
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

# graph's cli_contract.rs GATE_PLAN / ECHO_PLAN, as graphchat plans
GATE = """identifier: gate
name: Gate
description: Refuse an empty list.
steps:
  - id: E0
    tool_name: exit
    input:
      when: {value: "{{input.rows}}", op: empty}
      status: error
      message: no rows found
output:
  rows: "{{input.rows}}"
"""

ECHO = """identifier: echo_ok
name: Echo
description: Echo a word through the test MCP server.
requires_servers: [t]
input_schema:
  type: object
  required: [word]
  properties:
    word: {type: string}
steps:
  - id: E0
    tool_name: t__slow
    input: {seconds: 0, label: "{{input.word}}"}
output:
  said: "{{E0.result}}"
"""

ASK = """identifier: release
name: Release
description: Ask which channel.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: "Which channel?"
      output_schema: {type: object, required: [channel], properties: {channel: {enum: [stable, beta]}}}
      when_unanswered: fail
output:
  asked: "{{E0}}"
"""


@pytest.fixture
def plans(workspace: Path) -> Path:
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "gate.yaml").write_text(GATE)
    (workspace / "plans" / "echo_ok.yaml").write_text(ECHO)
    (workspace / "plans" / "release.yaml").write_text(ASK)
    return workspace


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


# --- GRAPHCHAT_EVENTS=github -------------------------------------------------------------------


def test_workflow_commands_escape_data_and_properties_as_github_says() -> None:
    assert escape_data("50% done\r\nnext") == "50%25 done%0D%0Anext"  # graph's own test
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert command("error", "x: y, z") == "::error::x: y, z"  # data keeps : and ,
    assert (
        command("warning", "m", title="request r1, a:b", line=3)
        == "::warning title=request r1%2C a%3Ab,line=3::m"
    )


def test_a_failing_plan_run_annotates_on_stdout_and_success_keeps_stdout_clean(
    cli: GraphchatRunner, plans: Path
) -> None:
    # graph's cli_contract.rs: github_annotations_are_the_one_stdout_exception_and_only_on_failure
    failed = cli("plan", "run", "gate", '{"rows": []}', env={"GRAPHCHAT_EVENTS": "github"})
    assert failed.returncode == 4, failed.stderr
    assert failed.stdout.splitlines()[-1] == "::error::no rows found"
    assert "✗ no rows found" in failed.stderr  # the person's line is unchanged
    ok = cli("plan", "run", "echo_ok", '{"word": "hi"}', env={"GRAPHCHAT_EVENTS": "github"})
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"said": "hi: slept 0.0s"}
    # graph's name for the variable is accepted as an alias
    alias = cli("plan", "run", "gate", '{"rows": []}', env={"GRAPH_EVENTS": "github"})
    assert alias.returncode == 4 and "::error::no rows found" in alias.stdout


def test_json_suppresses_annotations(cli: GraphchatRunner, plans: Path) -> None:
    # graph's cli_contract.rs: json_suppresses_github_annotations
    run = cli("plan", "run", "gate", '{"rows": []}', "--json", env={"GRAPHCHAT_EVENTS": "github"})
    assert run.returncode == 4
    assert "::error::" not in run.stdout
    assert json.loads(run.stdout)["exit"]["status"] == "error"


def test_any_failed_command_is_one_escaped_error_line(cli: GraphchatRunner, plans: Path) -> None:
    missing = cli("plan", "run", "nope", env={"GRAPHCHAT_EVENTS": "github"})
    assert missing.returncode == 1
    [line] = missing.stdout.splitlines()
    assert line.startswith("::error::") and "nope" in line
    needs = cli("plan", "run", "echo_ok", env={"GRAPHCHAT_EVENTS": "github"})
    assert needs.returncode == 3, needs.stderr
    assert needs.stdout.startswith("::error::") and "word" in needs.stdout
    assert "\n" not in needs.stdout.rstrip("\n")  # a multi-line message stays one command
    plain = cli("plan", "run", "nope")  # without the variable: stdout stays empty
    assert plain.stdout == ""


def test_a_parked_run_is_a_warning_naming_its_request(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "release", env={"GRAPHCHAT_EVENTS": "github"})
    assert run.returncode == 5, run.stderr
    [line] = [x for x in run.stdout.splitlines() if x.startswith("::")]
    assert line.startswith("::warning title=request ") and line.endswith(
        "::plan 'release' waits for a person: Which channel?"
    )


# --- GRAPHCHAT_STORAGE=memory ------------------------------------------------------------------


def test_memory_storage_writes_no_file_under_the_workspace(
    cli: GraphchatRunner, plans: Path, model_server: ScriptedModelServer
) -> None:
    before = files_under(plans)
    env = {**model_server.env(), "GRAPHCHAT_STORAGE": "memory"}
    ok = cli("plan", "run", "echo_ok", '{"word": "hi"}', env=env)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout) == {"said": "hi: slept 0.0s"}
    model_server.push({"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 0, "label": "x"}}]})
    model_server.push({"text": "done"})
    asked = cli("ask", "use the tool", env=env)
    assert asked.returncode == 0, asked.stderr
    assert asked.stdout == "done\n"
    # a question nobody can answer fails as --no-park does: no run record, no exit 5
    unanswered = cli("plan", "run", "release", env={"GRAPH_STORAGE": "memory"})
    assert unanswered.returncode == 1, unanswered.stderr
    assert "request" not in unanswered.stderr
    assert files_under(plans) == before
    # the same runs with files kept do write (the check above can see a write)
    model_server.push({"text": "kept"})
    kept = cli("ask", "hello", env=model_server.env())
    assert kept.returncode == 0, kept.stderr
    cli("plan", "run", "echo_ok", '{"word": "hi"}')
    written = files_under(plans) - before
    assert any(p.startswith("threads/") for p in written), written
    assert any(p.startswith("catalog/shapes/") for p in written), written
    assert any(p.startswith("catalog/logs/") for p in written), written


def test_an_unknown_storage_value_is_a_usage_error(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "gate", '{"rows": [1]}', env={"GRAPHCHAT_STORAGE": "disk"})
    assert run.returncode == 2
    assert run.stderr.splitlines()[0] == "error: GRAPHCHAT_STORAGE must be 'file' or 'memory', got 'disk'"
    assert "Traceback" not in run.stderr


# --- -v/-vv/-vvv and GRAPHCHAT_LOG -------------------------------------------------------------


def test_verbosity_raises_the_log_level_on_stderr(
    cli: GraphchatRunner, plans: Path, model_server: ScriptedModelServer
) -> None:
    quiet = cli("plan", "run", "echo_ok", '{"word": "hi"}')
    assert "INFO" not in quiet.stderr and "DEBUG" not in quiet.stderr
    info = cli("-v", "plan", "run", "echo_ok", '{"word": "hi"}')
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout) == {"said": "hi: slept 0.0s"}  # stdout stays the deliverable
    assert "INFO graphchat.catalog: t__slow done in" in info.stderr
    assert "INFO graphchat.catalog.mcp: MCP server 't' started" in info.stderr
    assert "DEBUG" not in info.stderr
    debug = cli("plan", "run", "echo_ok", '{"word": "hi"}', "-vv")  # after the command too
    assert "DEBUG graphchat.catalog: call t__slow" in debug.stderr
    assert "TRACE" not in debug.stderr
    trace = cli("-vvv", "plan", "run", "echo_ok", '{"word": "hi"}')
    assert "TRACE graphchat.catalog: call t__slow arguments: {'seconds': 0" in trace.stderr
    model_server.push({"text": "hello"})
    asked = cli("-v", "ask", "hi", env=model_server.env())
    assert asked.stdout == "hello\n"
    assert "INFO graphchat.llm: " in asked.stderr and "1 input" not in asked.stdout


def test_the_log_filter_picks_targets_and_wins_over_v(cli: GraphchatRunner, plans: Path) -> None:
    only = cli(
        "plan", "run", "echo_ok", '{"word": "hi"}', env={"GRAPHCHAT_LOG": "graphchat.catalog.mcp=info"}
    )
    assert "INFO graphchat.catalog.mcp: MCP server 't' started" in only.stderr
    assert "graphchat.catalog: t__slow" not in only.stderr  # the parent target is not opened
    alias = cli("-vv", "plan", "run", "echo_ok", '{"word": "hi"}', env={"GRAPH_LOG": "error"})
    assert alias.returncode == 0 and "DEBUG" not in alias.stderr and "INFO" not in alias.stderr
    bad = cli("plan", "run", "gate", env={"GRAPHCHAT_LOG": "graphchat=loud"})
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: GRAPHCHAT_LOG: unknown level 'loud'")
