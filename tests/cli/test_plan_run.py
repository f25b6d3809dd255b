"""`graphchat plan run` as the real command: exit codes 0/1/2/3/4, stdout holding only the
deliverable, inputs, --json, --answers, asks on a pseudo-terminal, events, lazy imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import GraphchatRunner, clean_env

PICK = """identifier: pick
name: Pick
description: Keep the numbers at or above a threshold.
input_schema:
  type: object
  required: [numbers]
  properties:
    numbers: {type: array, items: {type: number}}
    min: {type: number, default: 10}
steps:
  - id: E0
    tool_name: filter
    input:
      over: "{{input.numbers}}"
      where: {value: "{{item}}", op: gte, to: "{{input.min}}"}
  - id: E1
    tool_name: exit
    input:
      when: {value: "{{E0.count}}", op: gt, to: 3}
      status: error
      message: "too many: {{E0.count}}"
  - id: E2
    tool_name: exit
    input:
      when: {value: "{{E0.count}}", op: eq, to: 3}
      status: success
      message: "exactly three"
      output: {three: "{{E0.items}}"}
output:
  big: "{{E0.items}}"
  first: "{{E0.items.0}}"
"""

ASK = """identifier: release
name: Release
description: Ask which channel to release to.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: "Which channel?"
      output_schema:
        type: object
        required: [channel]
        properties:
          channel: {enum: [stable, beta, nightly], description: Release channel}
          count: {type: integer, description: How many}
      when_unanswered: %s
output:
  asked: "{{E0}}"
"""

SOLVER = """identifier: report
name: Report
description: Write a report.
steps:
  - id: E0
    tool_name: filter
    input: {over: [1, 2, 3], where: {value: "{{item}}", op: gt, to: 1}}
solver:
  query_to_answer: Describe the numbers.
  data: "{{E0.items}}"
"""

SILENT = """identifier: quiet
name: Quiet
description: Does nothing visible.
steps:
  - id: E0
    tool_name: map
    input:
      over: "{{input.xs}}"
      concurrency: 3
      do:
        tool_name: filter
        input: {over: "{{item}}", where: {value: "{{item}}", op: gt, to: 0}}
"""


@pytest.fixture
def plans(workspace: Path) -> Path:
    folder = workspace / "plans"
    (folder / "pick.yaml").write_text(PICK)
    (folder / "release.yaml").write_text(ASK % "fail")
    (folder / "release_default.yaml").write_text(
        (ASK % "default\n      default: {channel: stable}").replace(
            "identifier: release", "identifier: release_default"
        )
    )
    (folder / "report.yaml").write_text(SOLVER)
    (folder / "quiet.yaml").write_text(SILENT)
    return folder


def test_exit_0_output_json_only_on_stdout(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", '{"numbers": [1, 20, 30]}')
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"big": [20, 30], "first": 20}
    assert "step E0 (filter)" in run.stderr  # progress goes to stderr


def test_inputs_from_flags_file_and_stdin(cli: GraphchatRunner, plans: Path, tmp_path: Path) -> None:
    doc = tmp_path / "in.json"
    doc.write_text('{"numbers": [1, 2, 50], "min": 100}')
    run = cli("plan", "run", "pick", f"@{doc}", "--input", "min=2")
    assert json.loads(run.stdout) == {"big": [2, 50], "first": 2}
    run = cli("plan", "run", "pick", "-", "--input", "numbers=[7,70]", input='{"numbers": [1]}')
    assert json.loads(run.stdout) == {"big": [70], "first": 70}
    run = cli("plan", "run", str(plans / "pick.yaml"), "--input", "numbers=[5]", "--input", "min=5")
    assert json.loads(run.stdout) == {"big": [5], "first": 5}


def test_exit_1_empty_data_in_output_mode(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", '{"numbers": [1, 2]}')
    assert run.returncode == 1
    assert run.stdout == ""
    assert "error: plan failed at output: {{E0.items.0}}: E0.items is an empty array" in run.stderr


def test_exit_1_unknown_plan(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "nope")
    assert run.returncode == 1 and run.stdout == ""
    assert "unknown plan 'nope'" in run.stderr


def test_exit_3_inputs_missing_with_schema_on_stderr(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", '{"numbers": ["x"]}')
    assert run.returncode == 3
    assert run.stdout == ""
    assert "plan 'pick' needs inputs:" in run.stderr
    assert "'x' is not of type 'number'" in run.stderr
    assert '"required": [' in run.stderr  # the input schema
    run = cli("plan", "run", "pick")
    assert run.returncode == 3 and "'numbers' is a required property" in run.stderr


def test_exit_4_error_exit_fired(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", "--input", "numbers=[11,12,13,14]")
    assert run.returncode == 4
    assert run.stdout == ""
    assert "✗ too many: 4" in run.stderr


def test_success_exit_output_is_the_deliverable(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", "--input", "numbers=[11,12,13]")
    assert run.returncode == 0
    assert json.loads(run.stdout) == {"three": [11, 12, 13]}
    assert "✓ exactly three" in run.stderr


def test_exit_2_usage_and_no_model(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", "--bogus")
    assert run.returncode == 2 and run.stdout == ""
    run = cli("plan", "run", "report")
    assert run.returncode == 2 and run.stdout == ""
    assert "no model configured" in run.stderr


def test_an_input_document_that_does_not_parse_is_invalid_input(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", "{not json")
    assert run.returncode == 3 and run.stdout == ""
    assert "invalid JSON" in run.stderr
    run = cli("plan", "run", "pick", "@missing.json")
    assert run.returncode == 3 and "cannot read" in run.stderr


def test_json_envelope(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", "--input", "numbers=[10]", "--json")
    assert run.returncode == 0
    # graph's envelope (plan_cmd.rs): every key present (cli_contract.rs::
    # plan_run_json_envelope_carries_the_documented_keys)
    assert json.loads(run.stdout) == {
        "answer": None,
        "output": {"big": [10], "first": 10},
        "plan": "pick",
        "steps_executed": 3,
        "exit": None,
        "usage": None,
    }
    run = cli("plan", "run", "pick", "--input", "numbers=[10,11,12,13]", "--json")
    assert run.returncode == 4
    envelope = json.loads(run.stdout)
    # cli_contract.rs::a_fired_gate_adds_an_exit_block_to_the_envelope: `answer` is the exit's
    # message, and the fired exit is not a step executed (only E0)
    assert envelope["exit"] == {
        "status": "error",
        "message": "too many: 4",
        "reason": None,
        "output": None,
        "step": "E1",
    }
    assert envelope["answer"] == "too many: 4" and envelope["output"] is None
    assert envelope["steps_executed"] == 1
    run = cli("plan", "run", "pick", "--input", "numbers=[11,12,13]", "--json")
    envelope = json.loads(run.stdout)
    assert run.returncode == 0 and envelope["output"] == {"three": [11, 12, 13]}
    assert envelope["exit"]["output"] == {"three": [11, 12, 13]} and envelope["steps_executed"] == 2


def test_json_envelope_of_empty_data_and_input_flag_strings(cli: GraphchatRunner, plans: Path) -> None:
    # EmptyData in output mode: exit 1 and, as graph (plan_cmd.rs: a failed run emits no
    # envelope), nothing on stdout; the error is on stderr.
    run = cli("plan", "run", "pick", "--input", "numbers=[1]", "--json")
    assert run.returncode == 1 and run.stdout == ""
    assert "plan failed at output: {{E0.items.0}}: E0.items is an empty array" in run.stderr
    # A flag value that is not JSON is a string: here the schema then rejects it (exit 3).
    run = cli("plan", "run", "pick", "--input", "numbers=[1]", "--input", "min=ten")
    assert run.returncode == 3 and run.stdout == ""
    assert "'ten' is not of type 'number'" in run.stderr


def test_silent_plan_and_progress(cli: GraphchatRunner, plans: Path) -> None:
    xs = [[1, -1]] * 40
    run = cli("plan", "run", "quiet", json.dumps({"xs": xs}))
    assert run.returncode == 0, run.stderr
    assert run.stdout == ""
    assert "✓ plan 'quiet' completed (41 steps)" in run.stderr
    assert "E0: 40/40" in run.stderr


def test_events_jsonl(cli: GraphchatRunner, plans: Path) -> None:
    run = cli("plan", "run", "pick", "--input", "numbers=[10]", env={"GRAPHCHAT_EVENTS": "jsonl"})
    assert run.returncode == 0
    events = [json.loads(line) for line in run.stderr.splitlines() if line.strip()]
    assert {"event": "step_started", "step": "E0", "tool": "filter"} in events
    assert any(e["event"] == "step_finished" and e["step"] == "E1" for e in events)
    assert json.loads(run.stdout)["first"] == 10


def test_ask_unavailable_without_a_terminal(cli: GraphchatRunner, plans: Path) -> None:
    parked = cli("plan", "run", "release")  # nobody here: the run waits for a person
    assert parked.returncode == 5 and parked.stdout == "" and "waiting for a person" in parked.stderr
    run = cli("plan", "run", "release", "--no-park")  # as graph does
    assert run.returncode == 1 and run.stdout == ""
    assert "plan failed at step E0 (ask): the question was not answered (unavailable)" in run.stderr
    run = cli("plan", "run", "release_default")
    assert run.returncode == 0
    assert json.loads(run.stdout) == {
        "asked": {"answer": {"channel": "stable"}, "answered": False, "reason": "unavailable"}
    }
    # Issue 11 point 12: the default that stood in for a person is said, in one line.
    notes = [line for line in run.stderr.splitlines() if "using the default" in line]
    assert notes == [
        'E0: \'Which channel?\' not answered (unavailable); using the default {"channel": "stable"}'
    ]


def test_ask_answers_file(cli: GraphchatRunner, plans: Path, tmp_path: Path) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("E0: {channel: beta, count: 2}\n")
    run = cli("plan", "run", "release", "--answers", str(answers))
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"asked": {"answer": {"channel": "beta", "count": 2}, "answered": True}}
    answers.write_text("'Which channel?': {channel: weekly}\n")  # by prompt; not in the enum
    run = cli("plan", "run", "release", "--answers", str(answers))
    assert run.returncode == 1 and "the answer does not fit the schema" in run.stderr


def test_an_answers_key_that_matches_no_question_is_a_warning(
    cli: GraphchatRunner, plans: Path, tmp_path: Path
) -> None:
    """Issue 11 point 9: a misspelt --answers key must not pass silently."""
    answers = tmp_path / "answers.yaml"
    answers.write_text("E0: {channel: beta, count: 2}\nE9: {channel: stable}\n")
    run = cli("plan", "run", "release", "--answers", str(answers))
    assert run.returncode == 0, run.stderr
    assert "warning: --answers: 'E9' matched no question" in run.stderr
    assert "'E0'" not in run.stderr


def _spawn(workspace: Path, *args: str):  # type: ignore[no-untyped-def]
    pexpect = pytest.importorskip("pexpect")
    return pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), *args],
        env=clean_env({"NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=30,
    )


@pytest.mark.process
def test_ask_on_a_terminal_reprompts_then_answers(workspace: Path, plans: Path) -> None:
    child = _spawn(workspace, "plan", "run", "release")
    child.expect_exact("? Which channel?")
    for number, choice in enumerate(("stable", "beta", "nightly"), 1):  # numbered, one a line
        child.expect_exact(f"    {number}. {choice}\r\n")
    child.expect_exact("channel (1-3)")
    child.sendline("weekly")  # not a choice: re-asked
    child.expect("choose one of: stable, beta, nightly")
    child.sendline("BETA")  # enums match case-insensitively
    child.expect("count")
    child.sendline("two")  # not a number: re-asked
    child.expect("whole number")
    child.sendline("2")
    child.expect(r'"channel": "beta"')
    child.expect(pexpect_eof())
    child.close()
    assert child.exitstatus == 0


@pytest.mark.process
def test_a_pattern_miss_says_what_is_expected_with_an_example(workspace: Path) -> None:
    (workspace / "plans" / "tag.yaml").write_text(
        """identifier: tag
name: Tag
description: Ask for a release tag.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: "Which tag?"
      output_schema:
        type: object
        required: [tag]
        properties:
          tag: {type: string, pattern: "^v[0-9]+[.][0-9]+$", description: a version tag, examples: [v1.2]}
output: {tag: "{{E0.answer.tag}}"}
"""
    )
    child = _spawn(workspace, "plan", "run", "tag")
    child.expect_exact("? Which tag?")
    child.sendline("1.2")
    child.expect_exact("expected a version tag, e.g. v1.2")  # words, not the regex
    child.sendline("v1.2")
    child.expect(r'"tag": "v1.2"')
    child.expect(pexpect_eof())
    child.close()
    assert child.exitstatus == 0


@pytest.mark.process
def test_ask_on_a_terminal_blank_declines(workspace: Path, plans: Path) -> None:
    child = _spawn(workspace, "plan", "run", "release_default")
    child.expect_exact("? Which channel?")
    child.expect("channel")
    child.sendline("")
    child.expect(r'"reason": "declined"')
    child.expect(pexpect_eof())
    child.close()
    assert child.exitstatus == 0


@pytest.mark.process
def test_ctrl_c_at_a_terminal_question_leaves_at_once(workspace: Path, plans: Path) -> None:
    # The reader blocked on stdin must not hold the exit until Enter is pressed.
    child = _spawn(workspace, "plan", "run", "release")
    child.expect_exact("? Which channel?")
    child.expect("channel")
    child.sendintr()
    child.expect("interrupted", timeout=5)
    child.expect(pexpect_eof(), timeout=5)
    child.close()
    assert child.exitstatus == 130


def pexpect_eof():  # type: ignore[no-untyped-def]
    import pexpect

    return pexpect.EOF


@pytest.mark.process
def test_a_no_model_run_imports_neither_litellm_nor_mcp(workspace: Path, plans: Path) -> None:
    code = (
        "import sys, runpy\n"
        "sys.argv = ['graphchat', '--home', sys.argv[1], 'plan', 'run', 'pick', '--input', 'numbers=[12]']\n"
        "from graphchat.cli.main import main\n"
        "rc = main()\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('litellm', 'mcp', 'openai'))\n"
        "print('IMPORTED', bad, file=sys.stderr)\n"
        "sys.exit(rc)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, str(workspace)],
        env=clean_env(None, workspace.parent),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(workspace),
    )
    assert run.returncode == 0, run.stderr
    assert "IMPORTED []" in run.stderr
    assert json.loads(run.stdout) == {"big": [12], "first": 12}


def test_missing_required_servers_are_named(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "plans" / "clock.yaml").write_text(
        "identifier: clock\nname: Clock\ndescription: needs time\nrequires_servers: [time, calendar]\n"
        "steps:\n  - id: E0\n    tool_name: time__get_current_time\n    input: {timezone: UTC}\n"
    )
    run = cli("plan", "run", "clock")
    assert run.returncode == 1 and run.stdout == ""
    assert "needs MCP servers that are not configured: time, calendar" in run.stderr


def _unread_plans(workspace: Path) -> None:
    gate = {
        "id": "E0",
        "tool_name": "exit",
        "input": {"when": {"value": 1, "op": "eq", "to": 2}, "status": "error"},
    }
    (workspace / "plans" / "reads_a.yaml").write_text(
        yaml.safe_dump(
            {
                "identifier": "reads_a",
                "name": "A",
                "description": "Reads a, declares b.",
                "input_schema": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                },
                "steps": [gate],
                "output": {"a": "{{input.a}}"},
            }
        )
    )
    (workspace / "plans" / "no_inputs.yaml").write_text(
        yaml.safe_dump(
            {
                "identifier": "no_inputs",
                "name": "N",
                "description": "Reads nothing.",
                "steps": [gate],
                "output": {"ok": True},
            }
        )
    )


def test_an_input_the_plan_never_reads_is_a_warning_and_strict_makes_it_exit_3(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 21 item 4: graph accepts such keys; graphchat says which keys the plan does read."""
    _unread_plans(workspace)
    ran = cli("plan", "run", "reads_a", "--input", "a=1", "--input", "b=2")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"a": 1}
    assert "plan 'reads_a' never reads input 'b'; the inputs it reads: a (ignored)" in ran.stderr
    strict = cli("plan", "run", "reads_a", "--input", "a=1", "--input", "b=2", "--strict")
    assert strict.returncode == 3 and strict.stdout == ""
    assert "plan 'reads_a' never reads input 'b'; the inputs it reads: a" in strict.stderr
    quiet = cli("plan", "run", "reads_a", "--input", "a=1", "--strict")
    assert quiet.returncode == 0 and "never reads" not in quiet.stderr

    none = cli("plan", "run", "no_inputs", "--input", "timezone=Europe/Paris")
    assert none.returncode == 0, none.stderr
    assert (
        "plan 'no_inputs' (it has no input_schema) never reads input 'timezone'; the inputs it reads: none"
        in none.stderr
    )
    doc = cli("plan", "run", "no_inputs", '{"zone": "UTC"}', "--strict")
    assert doc.returncode == 3 and "never reads input 'zone'" in doc.stderr
