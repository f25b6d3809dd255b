"""Frames at every depth (issue 19): a step that finished before a run parked never runs again
when the run resumes — in a map body, a decide branch, a sub-plan — and an approval nobody can
give parks a headless `plan run` too. Through the real command and real MCP servers; the
counting tool is the shop server's `get_item`, whose every call is logged."""

from __future__ import annotations

import collections
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GraphchatRunner
from tests.servers.support import seed_cache, stdio, write_servers

CATALOG_SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "catalog_server.py")

QUESTION = """
          tool_name: ask
          input:
            prompt: "Keep {{item}}?"
            output_schema:
              type: object
              properties: {keep: {type: boolean}}
              required: [keep]"""


@pytest.fixture
def shop(workspace: Path) -> Path:
    write_servers(
        workspace,
        {
            "shop": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(workspace / "calls.jsonl")}),
            "tools": stdio(),
        },
    )
    seed_cache(workspace)
    return workspace


def counts(workspace: Path) -> collections.Counter[str]:
    """How many times each `get_item` id was called."""
    log = workspace / "calls.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return collections.Counter(json.loads(line)["args"]["id"] for line in lines if line.strip())


def waiting(cli: GraphchatRunner) -> list[dict[str, Any]]:
    listed = cli("requests", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout)["requests"])


def parked(run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 5, run.stderr
    assert "waiting for a person" in run.stderr


def answer_all(cli: GraphchatRunner, value: str) -> subprocess.CompletedProcess[str]:
    """Answer every waiting request; the last answer resumes the run (its result)."""
    requests = waiting(cli)
    assert requests
    last = None
    for request in requests:
        last = cli("answer", request["id"], value)
    assert last is not None
    return last


MAP = (
    """identifier: pick
name: Pick
description: Look each item up, ask whether to keep it, look it up again.
steps:
  - id: M
    tool_name: map
    input:
      over: [a, b]
      do:
        - id: T1
          tool_name: shop__get_item
          input: {id: "before-{{index}}"}
        - id: Q"""
    + QUESTION
    + """
        - id: T2
          tool_name: shop__get_item
          input: {id: "after-{{index}}"}
output:
  kept: "{{M.results}}"
"""
)


def test_a_question_in_a_map_body_resumes_without_rerunning_the_items_finished_body_steps(
    cli: GraphchatRunner, shop: Path
) -> None:
    (shop / "plans" / "pick.yaml").write_text(MAP)
    parked(cli("plan", "run", "pick"))
    assert counts(shop) == {"before-0": 1, "before-1": 1}
    done = answer_all(cli, "yes")
    assert done.returncode == 0, done.stderr
    assert [r["id"] for r in json.loads(done.stdout)["kept"]] == ["after-0", "after-1"]
    assert counts(shop) == {"before-0": 1, "before-1": 1, "after-0": 1, "after-1": 1}


DECIDE = (
    """identifier: branch
name: Branch
description: In a branch, look up, ask, look up again.
steps:
  - id: D
    tool_name: decide
    input:
      if: {value: 1, op: eq, to: 1}
      then:
        - id: T1
          tool_name: shop__get_item
          input: {id: "before-0"}
        - id: Q"""
    + QUESTION.replace("{{item}}", "it")
    + """
        - id: T2
          tool_name: shop__get_item
          input: {id: "after-0"}
output:
  branch: "{{D.result}}"
"""
)


def test_a_question_in_a_decide_branch_resumes_without_rerunning_the_branch_steps_before_it(
    cli: GraphchatRunner, shop: Path
) -> None:
    (shop / "plans" / "branch.yaml").write_text(DECIDE)
    parked(cli("plan", "run", "branch"))
    assert counts(shop) == {"before-0": 1}
    done = answer_all(cli, "yes")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["branch"]["id"] == "after-0"
    assert counts(shop) == {"before-0": 1, "after-0": 1}


INNER = (
    """identifier: inner
name: Inner
description: Look up, ask, look up again.
steps:
  - id: I1
    tool_name: shop__get_item
    input: {id: "inner-before-0"}
  - id: Q"""
    + QUESTION.replace("{{item}}", "it").replace("\n          ", "\n    ")
    + """
  - id: I2
    tool_name: shop__get_item
    input: {id: "inner-after-0"}
output:
  kept: "{{Q.answer.keep}}"
"""
)

OUTER = """identifier: outer
name: Outer
description: Look up, call the inner plan, look up again.
steps:
  - id: O1
    tool_name: shop__get_item
    input: {id: "outer-before-0"}
  - id: P
    tool_name: plan__inner
    input: {}
  - id: O2
    tool_name: shop__get_item
    input: {id: "outer-after-0"}
output:
  inner: "{{P}}"
"""


def test_a_question_in_a_sub_plan_parks_the_run_and_resumes_inside_it(
    cli: GraphchatRunner, shop: Path
) -> None:
    (shop / "plans" / "inner.yaml").write_text(INNER)
    (shop / "plans" / "outer.yaml").write_text(OUTER)
    run = cli("plan", "run", "outer")
    parked(run)  # was: exit 1, "unavailable"
    assert counts(shop) == {"outer-before-0": 1, "inner-before-0": 1}
    done = answer_all(cli, "yes")
    assert done.returncode == 0, done.stderr
    assert counts(shop) == {"outer-before-0": 1, "inner-before-0": 1, "inner-after-0": 1, "outer-after-0": 1}


NOTE = """identifier: jot
name: Jot
description: Look up, write a note (a sensitive tool), look up again.
steps:
  - id: T1
    tool_name: shop__get_item
    input: {id: "before-0"}
  - id: W
    tool_name: tools__note
    input: {path: "{{input.path}}", text: "one line"}
  - id: T2
    tool_name: shop__get_item
    input: {id: "after-0"}
output:
  wrote: "{{W}}"
"""

MAPPED_NOTE = """identifier: jot
name: Jot
description: In a map body, look up, write a note (a sensitive tool), look up again.
steps:
  - id: M
    tool_name: map
    input:
      over: [a]
      do:
        - id: T1
          tool_name: shop__get_item
          input: {id: "before-0"}
        - id: W
          tool_name: tools__note
          input: {path: "{{input.path}}", text: "one line"}
        - id: T2
          tool_name: shop__get_item
          input: {id: "after-0"}
output:
  wrote: "{{M.results}}"
"""


@pytest.mark.parametrize("plan", [NOTE, MAPPED_NOTE], ids=["top", "map-body"])
def test_a_sensitive_step_parks_a_headless_plan_and_permit_runs_exactly_that_call_once(
    cli: GraphchatRunner, shop: Path, tmp_path: Path, plan: str
) -> None:
    target = tmp_path / "notes.txt"
    (shop / "plans" / "jot.yaml").write_text(plan)
    run = cli("plan", "run", "jot", json.dumps({"path": str(target)}))
    parked(run)  # was: exit 1, refused
    assert not target.exists()
    listed = cli("requests")
    assert "tool: tools__note" in listed.stdout
    assert f'"path": "{target}"' in listed.stdout and '"text": "one line"' in listed.stdout
    (request,) = waiting(cli)
    assert request["kind"] == "approval"
    assert request["source"]["arguments"] == {"path": str(target), "text": "one line"}
    permitted = cli("permit", request["id"])
    assert permitted.returncode == 0, permitted.stderr
    assert target.read_text().splitlines() == ["one line"]  # ran once
    assert counts(shop) == {"before-0": 1, "after-0": 1}


def test_deny_fails_the_plan_at_that_step_with_the_reason_and_the_tool_does_not_run(
    cli: GraphchatRunner, shop: Path, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    (shop / "plans" / "jot.yaml").write_text(NOTE)
    parked(cli("plan", "run", "jot", json.dumps({"path": str(target)})))
    (request,) = waiting(cli)
    denied = cli("deny", request["id"], "--reason", "not on a Friday")
    assert denied.returncode == 1, denied.stderr
    assert re.search(r"plan failed at .*W.*the user refused it \(not on a Friday\)", denied.stderr), (
        denied.stderr
    )
    assert not target.exists()
    assert counts(shop) == {"before-0": 1}


def test_permit_refuses_a_call_whose_arguments_are_not_the_ones_the_person_saw(
    cli: GraphchatRunner, shop: Path, tmp_path: Path
) -> None:
    target, other = tmp_path / "notes.txt", tmp_path / "elsewhere.txt"
    (shop / "plans" / "jot.yaml").write_text(NOTE)
    parked(cli("plan", "run", "jot", json.dumps({"path": str(target)})))
    (request,) = waiting(cli)
    # the run's record is changed behind the person's back: the call would now write elsewhere
    (record,) = (shop / "requests" / "runs").glob("*.json")
    data = json.loads(record.read_text())
    data["inputs"] = {"path": str(other)}
    record.write_text(json.dumps(data))
    permitted = cli("permit", request["id"])
    assert permitted.returncode == 1, permitted.stderr
    assert f"request {request['id']} permitted W with other arguments" in permitted.stderr
    assert "path differ" in permitted.stderr and "Traceback" not in permitted.stderr
    assert not target.exists() and not other.exists()  # nothing else ran in its place
    assert counts(shop) == {"before-0": 1}
