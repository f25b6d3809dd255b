"""Issue 19, build 8: a plan `ask`'s form fields may be `secret: true` (masked when typed,
redacted wherever written, the value reaches the step) and `multiple: true` with options (a list
answer); a decline's reason reaches the plan as `{declined: true, reason}`. Through the real
command: `plan run`, `graphchat answer`/`decline`/`resume`, and a pseudo-terminal for masking."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner, clean_env
from tests.servers.support import SERVERS, stdio, write_servers

SECRET = "s3cret-Value-77"

LOGIN = """identifier: login
name: Login
description: Ask a token, use it, ask again, use it again.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: Your token?
      output_schema:
        type: object
        required: [token]
        properties:
          token: {type: string, secret: true, description: the API token}
  - id: E1
    tool_name: c__get_item
    input: {id: "{{E0.answer.token}}-1"}
  - id: E2
    tool_name: ask
    input:
      prompt: Go on?
      output_schema:
        type: object
        required: [go]
        properties:
          go: {type: boolean}
  - id: E3
    tool_name: c__get_item
    input: {id: "{{E0.answer.token}}-2"}
output:
  first: "{{E1.stock}}"
  second: "{{E3.stock}}"
"""

TOPPINGS = """identifier: pizza
name: Pizza
description: Choose toppings.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: Which toppings?
      output_schema:
        type: object
        required: [toppings]
        properties:
          toppings: {enum: [olives, ham, basil], multiple: true}
output:
  chose: "{{E0.answer.toppings}}"
"""


def request_of(run: object) -> str:
    match = re.search(r"request ([0-9a-f]{6,}): ", getattr(run, "stderr", ""))
    assert match, getattr(run, "stderr", "")
    return match.group(1)


def every_file_text(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): p.read_text(errors="replace")
        for p in folder.rglob("*")
        if p.is_file() and not p.name.endswith(".lock")
    }


def test_a_secret_answer_reaches_its_steps_and_is_written_nowhere_once_the_run_ends(
    workspace: Path, cli: GraphchatRunner
) -> None:
    log = workspace.parent / "calls.jsonl"
    write_servers(
        workspace, {"c": stdio(str(SERVERS / "catalog_server.py"), env={"GRAPHCHAT_TEST_CALL_LOG": str(log)})}
    )
    (workspace / "plans" / "login.yaml").write_text(LOGIN)
    events = {"GRAPHCHAT_EVENTS": "jsonl"}
    first = cli("plan", "run", "login", env=events)
    assert first.returncode == 5, first.stderr
    token_request = json.loads(cli("requests", "--json").stdout)["requests"][0]["id"]

    second = cli("answer", token_request, SECRET, env=events)
    assert second.returncode == 5, second.stderr  # E1 ran with the token, E2 parks
    assert SECRET not in second.stderr and "[redacted]" in second.stderr  # the tool_started args
    (record,) = (workspace / "requests" / "runs").glob("*.json")
    assert SECRET not in record.read_text() and "[redacted]" in record.read_text()
    assert record.stat().st_mode & 0o777 == 0o600
    stored = workspace / "requests" / f"{token_request}.json"
    assert json.loads(stored.read_text())["answer"] == {"token": SECRET}  # kept until the run ends
    assert stored.stat().st_mode & 0o777 == 0o600

    go_request = json.loads(cli("requests", "--json").stdout)["requests"][0]["id"]
    recorded = cli("answer", go_request, "yes", "--no-resume")
    assert recorded.returncode == 0, recorded.stderr
    done = cli("resume", go_request, env=events)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"first": 7, "second": 7}
    assert SECRET not in done.stderr

    calls = [json.loads(line)["args"]["id"] for line in log.read_text().splitlines()]
    assert calls == [f"{SECRET}-1", f"{SECRET}-2"]  # the value reached both steps, each once
    leaks = [name for name, text in every_file_text(workspace).items() if SECRET in text]
    assert leaks == []  # request files, claims, shapes: [redacted]
    assert json.loads(stored.read_text())["answer"] == {"token": "[redacted]"}


@pytest.mark.process  # a terminal: pexpect
def test_a_secret_field_typed_on_a_terminal_is_not_shown(workspace: Path) -> None:
    import pexpect

    (workspace / "plans" / "login.yaml").write_text(
        LOGIN.split("  - id: E1")[0] + 'output:\n  answered: "{{E0.answered}}"\n'
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "plan", "run", "login"],
        env=clean_env({"TERM": "dumb", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=60,
    )
    child.expect_exact("? Your token?")
    child.expect_exact("token (string")
    child.expect_exact(": ")
    child.sendline(SECRET)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    seen = child.before or ""
    assert SECRET not in seen  # never echoed
    assert '"answered": true' in seen


def test_a_multiple_field_takes_a_list_of_its_options(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "plans" / "pizza.yaml").write_text(TOPPINGS)
    parked = cli("plan", "run", "pizza")
    assert parked.returncode == 5, parked.stderr
    request_id = request_of(parked)
    listed = cli("requests")
    assert "one or more of olives, ham, basil" in listed.stdout
    wrong = cli("answer", request_id, "olives, pineapple")
    assert wrong.returncode == 1 and "choose one of: olives, ham, basil" in wrong.stderr
    assert "stays open" in wrong.stderr
    done = cli("answer", request_id, "basil, 1")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"chose": ["basil", "olives"]}


def test_the_plan_loader_refuses_multiple_without_options_and_a_secret_that_is_not_text(
    workspace: Path, cli: GraphchatRunner
) -> None:
    bad = TOPPINGS.replace("{enum: [olives, ham, basil], multiple: true}", "{type: string, multiple: true}")
    (workspace / "plans" / "pizza.yaml").write_text(bad)
    run = cli("plan", "run", "pizza")
    assert run.returncode == 1
    assert "property 'toppings': `multiple: true` needs options (an `enum`)" in run.stderr
    assert "Traceback" not in run.stderr
    (workspace / "plans" / "pizza.yaml").write_text(
        TOPPINGS.replace("{enum: [olives, ham, basil], multiple: true}", "{type: integer, secret: true}")
    )
    run = cli("plan", "validate", "pizza")
    assert run.returncode != 0 and "`secret: true` is for a string field" in run.stdout + run.stderr
