"""`graphchat plan list|show|validate` as a user runs them, and the malformed-plan corpus
through both `plan validate` and `plan run` (exit 1, step and field named, no tool called)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import GraphchatRunner, clean_env

TESTS = Path(__file__).resolve().parent.parent
MALFORMED = sorted((TESTS / "plans_malformed").glob("*.yaml"))
REFERENCE = sorted((TESTS / "plans_reference").glob("*.yaml"))
TIME_SERVER = "mcpServers:\n  time:\n    command: mcp-server-time\n"
RUN_ENV = {"GRAPHCHAT_TEST_TOOLS": "1", "GRAPHCHAT_EVENTS": "jsonl"}


def expected_problem(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# expect: ")


def events_in(stderr: str) -> list[dict]:
    found = []
    for line in stderr.splitlines():
        if line.startswith("{"):
            try:
                found.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return found


@pytest.fixture
def reference_ws(workspace: Path) -> Path:
    """A workspace holding the reference-format plans, with the time server configured."""
    for path in REFERENCE:
        shutil.copy(path, workspace / "plans" / path.name)
    (workspace / "catalog" / "servers.yaml").write_text(TIME_SERVER)
    return workspace


# --- the corpus --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.stem)
def test_malformed_plan_fails_validate(path: Path, cli: GraphchatRunner) -> None:
    result = cli("plan", "validate", str(path), env=RUN_ENV)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    want = expected_problem(path)
    located = re.compile(rf"^{re.escape(str(path))}:\d+: ")  # `<file>:<line>: ` where the line is known
    assert any(located.sub("", line).startswith(want) for line in result.stderr.splitlines()), result.stderr


@pytest.mark.parametrize("path", MALFORMED, ids=lambda p: p.stem)
def test_malformed_plan_fails_run_before_any_tool(path: Path, cli: GraphchatRunner) -> None:
    result = cli("plan", "run", str(path), "{}", env=RUN_ENV)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    assert expected_problem(path) in result.stderr
    started = [e for e in events_in(result.stderr) if e.get("event") in ("tool_started", "step_started")]
    assert started == [], f"a malformed plan ran a step: {started}"


# --- validate ---------------------------------------------------------------------------------------


def test_validate_every_reference_plan(reference_ws: Path, cli: GraphchatRunner) -> None:
    result = cli("plan", "validate")
    assert result.returncode == 0, result.stderr
    for path in REFERENCE:
        assert f"✓ plan '{path.stem}' ({reference_ws / 'plans' / path.name}) is valid" in result.stderr
    result = cli("plan", "validate", "--json")
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert sorted(p["identifier"] for p in report["plans"]) == sorted(p.stem for p in REFERENCE)


def test_validate_all_reports_broken_and_duplicate_files(reference_ws: Path, cli: GraphchatRunner) -> None:
    plans = reference_ws / "plans"
    shutil.copy(TESTS / "plans_malformed" / "29_map_concurrency_zero.yaml", plans / "zz_broken.yaml")
    shutil.copy(plans / "dst_gate.yaml", plans / "zz_dst_gate_copy.yaml")
    result = cli("plan", "validate")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    # every tier at once (issue 21): the load problem, and the tools of what did load (debug__sleep
    # is a test tool, off here)
    assert f"✗ plan 'map_concurrency_zero' ({plans / 'zz_broken.yaml'}): 3 problems" in lines
    assert any(
        line.startswith(f"{plans / 'zz_broken.yaml'}:")
        and line.endswith(": step E1: input.concurrency: must be at least 1, got 0")
        for line in lines
    ), lines
    assert f"✗ plan 'dst_gate' ({plans / 'zz_dst_gate_copy.yaml'}): 1 problem" in lines
    assert (
        f"identifier: duplicate 'dst_gate' (first defined in {plans / 'dst_gate.yaml'}); this file is skipped"
        in lines
    )
    assert "✓ plan 'world_clock'" in result.stderr

    listing = cli("plan", "list")
    assert listing.returncode == 0
    assert (
        f"✗ {plans / 'zz_broken.yaml'}: does not load (1 problem): step E1: input.concurrency"
        in listing.stderr
    )
    assert "skipped, duplicate identifier 'dst_gate'" in listing.stderr
    # stdout is only the list of plans that load
    assert [line.split()[0] for line in listing.stdout.splitlines()] == sorted(p.stem for p in REFERENCE)


def test_validate_by_name_of_a_broken_file_prints_its_load_error(
    workspace: Path, cli: GraphchatRunner
) -> None:
    shutil.copy(TESTS / "plans_malformed" / "24_ask_nested_object.yaml", workspace / "plans" / "asker.yaml")
    for command in ("validate", "show"):
        result = cli("plan", command, "ask_nested_object")
        assert result.returncode == 1, result.stderr
        assert "step E1: input.output_schema: property 'address' is a nested object" in result.stderr


def test_unknown_plan_lists_the_known_ones(reference_ws: Path, cli: GraphchatRunner) -> None:
    result = cli("plan", "validate", "world_clok")
    assert result.returncode == 1
    known = ", ".join(sorted(p.stem for p in REFERENCE))
    assert (
        f"error: unknown plan 'world_clok' (did you mean world_clock? known plans: {known})" in result.stderr
    )


def test_missing_required_servers_are_a_note_for_a_file_and_a_problem_by_name(
    workspace: Path, cli: GraphchatRunner
) -> None:
    source = TESTS / "plans_reference" / "dst_gate.yaml"
    by_path = cli("plan", "validate", str(source))
    assert by_path.returncode == 0, by_path.stderr
    assert "note: requires_servers: time not configured here" in by_path.stderr
    shutil.copy(source, workspace / "plans" / "dst_gate.yaml")
    by_name = cli("plan", "validate", "dst_gate")
    assert by_name.returncode == 1
    assert "requires_servers: MCP server(s) 'time' not configured" in by_name.stderr


def test_unresolved_tools_fail_validate(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "catalog" / "servers.yaml").write_text(TIME_SERVER)
    plan = {
        "identifier": "tools_check",
        "name": "T",
        "description": "d",
        "steps": [
            {"id": "E0", "tool_name": "time__get_current_time", "input": {"timezone": "UTC"}},
            {"id": "E1", "tool_name": "builtin__infer", "input": {"instruction": "hi"}},
            {"id": "E2", "tool_name": "git__git_status", "input": {}},
            {"id": "E3", "tool_name": "plan__nowhere", "input": {}},
        ],
    }
    (workspace / "plans" / "t.yaml").write_text(yaml.safe_dump(plan))
    result = cli("plan", "validate", "tools_check", "--json")
    assert result.returncode == 1
    report = json.loads(result.stdout)  # graph's single-plan envelope
    assert report["plan"] == "tools_check" and report["ok"] is False and report["steps"] == 4
    assert report["problems"] == [
        "step E2: tool_name: MCP server 'git' is not configured (catalog/servers.yaml), "
        "so 'git__git_status' cannot resolve",
        "step E3: tool_name: unknown plan tool 'plan__nowhere' (plans here: tools_check)",
    ]


@pytest.mark.process
def test_validate_offline_imports_neither_litellm_nor_mcp(reference_ws: Path) -> None:
    """With --offline (or once every tool list is cached) validate starts nothing."""
    code = (
        "import sys\nfrom graphchat.cli.main import main\n"
        f"rc = main(['--home', {str(reference_ws)!r}, 'plan', 'validate', '--offline'])\n"
        "print(rc, 'litellm' in sys.modules, 'mcp' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=clean_env(home=reference_ws.parent),
        timeout=60,
    )
    assert result.stdout.split() == ["0", "False", "False"], result.stderr


def _typo_plan(workspace: Path) -> None:
    from tests.servers.support import stdio, write_servers

    write_servers(workspace, {"t": stdio()})
    plan = {
        "identifier": "typos",
        "name": "T",
        "description": "d",
        "steps": [
            {"id": "E0", "tool_name": "t__whoami", "input": {}},
            {"id": "E1", "tool_name": "t__who_am_i", "input": {}},
            {
                "id": "E2",
                "tool_name": "map",
                "input": {"over": [1, 2], "do": {"tool_name": "t__stmap", "input": {"n": "{{item}}"}}},
            },
        ],
    }
    (workspace / "plans" / "typos.yaml").write_text(yaml.safe_dump(plan))


def test_validate_in_a_fresh_workspace_reads_tool_lists_and_catches_typos(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 11 point 2: no cached tool list is no excuse for a ✓ over a misspelt tool."""
    _typo_plan(workspace)
    result = cli("plan", "validate", "typos")
    assert result.returncode == 1, result.stderr
    assert "starting 1 MCP server(s) to read their tools: t" in result.stderr
    assert "step E1: tool_name: server 't' has no tool 't__who_am_i'" in result.stderr
    assert "step E2/do: tool_name: server 't' has no tool 't__stmap'" in result.stderr
    assert "✓" not in result.stderr


def test_validate_offline_says_which_tools_went_unchecked(workspace: Path, cli: GraphchatRunner) -> None:
    _typo_plan(workspace)
    offline = cli("plan", "validate", "typos", "--offline")
    assert offline.returncode == 0, offline.stderr
    assert "starting" not in offline.stderr
    assert "note: tool names of MCP server 't' could not be checked" in offline.stderr
    strict = cli("plan", "validate", "typos", "--offline", "--strict", "--json")
    assert strict.returncode == 1
    report = json.loads(strict.stdout)
    assert any("could not be checked" in p for p in report["problems"])
    assert not (workspace / "catalog" / "cache").exists() or not any(
        (workspace / "catalog" / "cache").iterdir()
    )


# --- list and show -------------------------------------------------------------------------------


def test_list_json(reference_ws: Path, cli: GraphchatRunner) -> None:
    result = cli("plan", "list", "--json")
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    by_id = {p["identifier"]: p for p in listing["plans"]}
    assert sorted(by_id) == sorted(p.stem for p in REFERENCE)
    assert by_id["world_clock"]["finish"] == "output"
    assert by_id["clock_report"]["finish"] == "solver"
    assert by_id["dst_gate"]["finish"] == "silent"
    assert by_id["world_clock"]["path"] == str(reference_ws / "plans" / "world_clock.yaml")
    assert by_id["world_clock"]["description"].startswith("Current time in each")
    assert listing["failed"] == [] and listing["skipped"] == [] and listing["hidden"] == []
    assert listing["count"] == len(REFERENCE) and by_id["world_clock"]["steps"] >= 1
    text = cli("plan", "list").stdout.splitlines()
    assert len(text) == len(REFERENCE) and text[0].startswith("clock_report")


def test_show_json_and_text(reference_ws: Path, cli: GraphchatRunner) -> None:
    result = cli("plan", "show", "world_clock", "--json")
    assert result.returncode == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["tool_name"] == "plan__world_clock"
    assert shown["input_schema"]["required"] == ["zones"]
    do = shown["plan"]["steps"][0]["input"]["do"]
    assert do == {"tool_name": "time__get_current_time", "input": {"timezone": "{{item}}"}}

    # the camelCase plan is shown normalised, and what is shown loads again
    text = cli("plan", "show", "plan__time_agent")
    assert text.returncode == 0, text.stderr
    data = yaml.safe_load(text.stdout)
    agent = data["steps"][0]
    assert agent["tool_name"] == "agent"
    assert set(agent["input"]) == {"prompt", "tools", "max_iterations", "system_prompt", "output_schema"}
    assert "inputSchema" not in data and data["input_schema"]["required"] == ["a", "b"]
    again = reference_ws / "shown.yaml"
    again.write_text(text.stdout)
    assert cli("plan", "validate", str(again)).returncode == 0

    default_schema = json.loads(cli("plan", "show", "release_channel", "--json").stdout)
    assert default_schema["input_schema"]["properties"]["fallback"]["default"] == "beta"


def test_plan_problems_carry_file_and_line(workspace: Path, cli: GraphchatRunner) -> None:
    """Issue 11 point 8: as config errors do, a plan problem names `<file>:<line>`."""
    path = workspace / "plans" / "bad.yaml"
    path.write_text(
        "identifier: bad\nname: Bad\ndescription: d\nsteps:\n"
        "  - id: E0\n    tool_name: builtin__infer\n    input: {instruction: hi}\n"
        "  - id: E1\n    tool_name: map\n    input:\n      over: '{{E0.items}}'\n      concurrency: 0\n"
        "      do:\n        tool_name: builtin__infer\n        input: {instruction: '{{itm}}'}\n"
    )
    result = cli("plan", "validate", "bad")
    assert result.returncode == 1
    assert f"{path}:12: step E1: input.concurrency: must be at least 1" in result.stderr
    assert f"{path}:15: step E1/do: input.instruction: unknown root 'itm'" in result.stderr
    run = cli("plan", "run", "bad")
    assert run.returncode == 1 and f"{path}:12: step E1: input.concurrency" in run.stderr
    as_json = json.loads(cli("plan", "validate", "bad", "--json").stdout)
    assert as_json["problems"][0].startswith("step E1: input.concurrency")  # JSON: as before


@pytest.mark.process
def test_lists_fit_the_terminal_and_print_no_full_paths(reference_ws: Path) -> None:
    """Issue 11 point 14: `plan list` and `tools list` on an 80-column terminal."""
    pexpect = pytest.importorskip("pexpect")
    for args in (["plan", "list"], ["tools", "list"]):
        child = pexpect.spawn(
            sys.executable,
            ["-m", "graphchat", "--home", str(reference_ws), *args],
            env=clean_env({"NO_COLOR": "1", "GRAPHCHAT_TEST_TOOLS": "1"}, reference_ws.parent),
            cwd=str(reference_ws), dimensions=(30, 80), encoding="utf-8", timeout=60,
        )  # fmt: skip
        rows = [r for r in child.read().replace("\r\n", "\n").splitlines() if r.strip()]
        child.close()
        listed = [r for r in rows if not r.startswith(("warning", "starting", "✗", "note"))]
        assert listed, rows
        assert all(len(r) <= 80 for r in listed), listed
        assert not any(str(reference_ws) in r for r in listed), listed


def test_a_spliced_value_of_another_type_than_the_argument_is_caught(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 11 point 8: a whole-value splice keeps its type, so a value of known shape that the
    tool's input schema cannot take is a problem before the run — never on an unknown shape."""
    plans = workspace / "plans"
    (plans / "warm.yaml").write_text(
        yaml.safe_dump(
            {
                "identifier": "warm",
                "name": "W",
                "description": "d",
                "steps": [{"id": "E0", "tool_name": "debug__sleep", "input": {"seconds": 0, "label": "x"}}],
            }
        )
    )
    plan = {
        "identifier": "typed",
        "name": "T",
        "description": "d",
        "input_schema": {"type": "object", "properties": {"zones": {"type": "array", "items": {"type": "string"}}}},
        "steps": [
            {"id": "E0", "tool_name": "debug__sleep", "input": {"seconds": 0}},
            {"id": "E1", "tool_name": "debug__sleep", "input": {"seconds": 0, "label": "{{E0.slept}}"}},
            {"id": "E2", "tool_name": "debug__sleep", "input": {"seconds": 0, "label": "{{input.zones}}"}},
            {"id": "E3", "tool_name": "filter", "input": {"over": "{{input.zones}}", "where": {"value": "{{item}}", "op": "ne", "to": ""}}},
            {"id": "E4", "tool_name": "debug__sleep", "input": {"seconds": "{{E3.count}}", "label": "{{E3.count}}"}},
            # fine: the same types, text around the tag, a path of unknown shape
            {"id": "E5", "tool_name": "debug__sleep", "input": {"seconds": "{{E0.slept}}", "label": "{{E0.label}}"}},
            {"id": "E6", "tool_name": "debug__sleep", "input": {"seconds": 0, "label": "at {{E0.slept}}"}},
            {"id": "E7", "tool_name": "debug__sleep", "input": {"seconds": 0, "label": "{{E0.nothing}}"}},
        ],
    }  # fmt: skip
    (plans / "typed.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    env = {"GRAPHCHAT_TEST_TOOLS": "1"}
    zones = "step E2: input.label: '{{input.zones}}' is array (per the plan's input_schema), but debug__sleep wants string"
    count = "step E4: input.label: '{{E3.count}}' is integer (E3 is a filter step's result), but debug__sleep wants string"
    before = cli("plan", "validate", "typed", "--json", env=env)
    assert json.loads(before.stdout)["problems"] == [zones, count]  # E0's shape is not known yet
    assert cli("plan", "run", "warm", env=env).returncode == 0  # debug__sleep's shape is learned
    slept = "step E1: input.label: '{{E0.slept}}' is integer (E0's learned shape of debug__sleep), but debug__sleep wants string"
    result = cli("plan", "validate", "typed", env=env)
    assert result.returncode == 1, result.stderr
    located = f"{plans / 'typed.yaml'}:"  # `<file>:<line>: step …`
    lines = [line.split(": ", 1)[1] for line in result.stderr.splitlines() if line.startswith(located)]
    assert lines == [
        slept,
        zones,
        count,
    ]
    run = cli("plan", "run", "typed", '{"zones": ["UTC"]}', env={**env, "GRAPHCHAT_EVENTS": "jsonl"})
    # issue 21: what a learned shape says is a note before a run; the input's type is certain
    assert run.returncode == 1 and zones in run.stderr and f"note: {plans / 'typed.yaml'}:" in run.stderr
    assert not [e for e in events_in(run.stderr) if e.get("event") == "tool_started"]  # before the first step
