"""Frames below a tool call (issue 19): the plan a `plan_and_execute` step was running is kept
in the parked run, so permitting an approval opened inside it runs exactly the approved call —
never a plan the planner drafts anew. Through the real command (in process), the scripted model
and real MCP servers; the counting tool is the shop server's `get_item`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import GraphchatRunner
from tests.runs.test_frames import counts, waiting
from tests.runs.test_frames import shop as shop  # noqa: F401 - the fixture
from tests.scripted_server import ScriptedModelServer

DELEGATE = {
    "identifier": "delegate",
    "name": "Delegate",
    "description": "Hands the job to the planner.",
    "steps": [{"id": "E0", "tool_name": "plan_and_execute", "input": {"query": "write the note"}}],
    "output": {"done": "{{E0}}"},
}


def drafted(path: str, text: str) -> dict[str, Any]:
    """A planner's plan: look up, write a note (a sensitive tool), look up again."""
    return {
        "identifier": "jot",
        "name": "Jot",
        "description": "Write a note.",
        "steps": [
            {"id": "T1", "tool_name": "shop__get_item", "input": {"id": "before-0"}},
            {"id": "W", "tool_name": "tools__note", "input": {"path": path, "text": text}},
            {"id": "T2", "tool_name": "shop__get_item", "input": {"id": "after-0"}},
        ],
        "output": {"wrote": "{{W}}"},
    }


def test_permitting_a_call_inside_plan_and_execute_runs_that_call_of_the_plan_it_was_running(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    target = tmp_path / "notes.txt"
    (shop / "plans" / "delegate.yaml").write_text(yaml.safe_dump(DELEGATE))
    # the planner would draft a different plan if it were asked again
    model_server.push({"json": drafted(str(target), "call A")}, {"json": drafted(str(target), "call B")})
    run = cli("plan", "run", "delegate", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert counts(shop) == {"before-0": 1}
    listed = cli("requests", "--json")
    (request,) = json.loads(listed.stdout)["requests"]
    assert request["kind"] == "approval"
    assert request["source"]["arguments"] == {"path": str(target), "text": "call A"}
    permitted = cli("permit", request["id"], env=model_server.env())
    assert permitted.returncode == 0, permitted.stderr
    assert target.read_text().splitlines() == ["call A"]  # exactly the approved call, once
    assert counts(shop) == {"before-0": 1, "after-0": 1}
    assert len(model_server.requests) == 1  # the planner was not asked again


AGENT = {
    "identifier": "helper",
    "name": "Helper",
    "description": "An agent that looks up, then writes a note (a sensitive tool).",
    "steps": [
        {
            "id": "A",
            "tool_name": "agent",
            "input": {
                "prompt": "look it up and write the note",
                "tools": ["shop__get_item", "tools__note"],
                "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
            },
        }
    ],
    "output": {"agent": "{{A.output}}"},
}


def agent_script(model_server: ScriptedModelServer, target: Path) -> None:
    """The agent: look up (round 1), write the note (round 2: parks), then answer (round 3)."""
    model_server.push(
        {"tool_calls": [{"name": "shop__get_item", "arguments": {"id": "before-0"}}]},
        {"tool_calls": [{"name": "tools__note", "arguments": {"path": str(target), "text": "agent"}}]},
        {"json": {"ok": True}},
    )


def test_an_approval_inside_an_agent_step_resumes_the_agent_where_it_was(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    target = tmp_path / "notes.txt"
    (shop / "plans" / "helper.yaml").write_text(yaml.safe_dump(AGENT))
    agent_script(model_server, target)
    run = cli("plan", "run", "helper", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert counts(shop) == {"before-0": 1} and not target.exists()
    (request,) = waiting(cli)
    assert request["source"]["arguments"] == {"path": str(target), "text": "agent"}
    permitted = cli("permit", request["id"], env=model_server.env())
    assert permitted.returncode == 0, permitted.stderr
    assert json.loads(permitted.stdout) == {"agent": {"ok": True}}
    assert counts(shop) == {"before-0": 1}  # the agent did not start over
    assert target.read_text().splitlines() == ["agent"]
    assert len(model_server.requests) == 3
    resumed = model_server.requests[2]["messages"]
    assert resumed[-1]["role"] == "tool" and "before-0" in json.dumps(resumed)


def test_a_denied_call_inside_an_agent_step_is_a_refusal_the_agent_goes_on_from(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    target = tmp_path / "notes.txt"
    (shop / "plans" / "helper.yaml").write_text(yaml.safe_dump(AGENT))
    agent_script(model_server, target)
    assert cli("plan", "run", "helper", env=model_server.env()).returncode == 5
    (request,) = waiting(cli)
    denied = cli("deny", request["id"], "--reason", "not today", env=model_server.env())
    assert denied.returncode == 0, denied.stderr  # the agent went on
    assert json.loads(denied.stdout) == {"agent": {"ok": True}}
    assert not target.exists()
    assert counts(shop) == {"before-0": 1}
    refusal = model_server.requests[2]["messages"][-1]
    assert refusal["role"] == "tool" and "not today" in refusal["content"]


def test_a_models_ask_user_inside_an_agent_step_parks_and_the_agent_gets_the_answer(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    model_server: ScriptedModelServer,
) -> None:
    (shop / "plans" / "helper.yaml").write_text(yaml.safe_dump(AGENT))
    model_server.push(
        {"tool_calls": [{"name": "shop__get_item", "arguments": {"id": "before-0"}}]},
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour?"}}]},
        {"tool_calls": [{"name": "shop__get_item", "arguments": {"id": "after-0"}}]},
        {"json": {"ok": True}},
    )
    run = cli("plan", "run", "helper", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert counts(shop) == {"before-0": 1}
    (request,) = waiting(cli)
    assert request["kind"] == "question" and request["question"] == "Which colour?"
    answered = cli("answer", request["id"], "blue", env=model_server.env())
    assert answered.returncode == 0, answered.stderr
    assert json.loads(answered.stdout) == {"agent": {"ok": True}}
    assert counts(shop) == {"before-0": 1, "after-0": 1}  # the agent did not start over
    assert len(model_server.requests) == 4
    resumed = model_server.requests[2]["messages"][-1]
    assert resumed["role"] == "tool" and json.loads(resumed["content"]) == {
        "answer": "blue",
        "answered": True,
    }


def test_two_approvals_in_one_agent_step_are_two_requests_each_permitted_call_runs_once(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    tmp_path: Path,
    model_server: ScriptedModelServer,
) -> None:
    first, second, third = (tmp_path / f"{n}.txt" for n in ("first", "second", "third"))
    (shop / "plans" / "helper.yaml").write_text(yaml.safe_dump(AGENT))
    note = "tools__note"
    model_server.push(
        {"tool_calls": [{"name": "shop__get_item", "arguments": {"id": "before-0"}}]},
        {  # two sensitive calls in one round
            "tool_calls": [
                {"name": note, "arguments": {"path": str(first), "text": "one"}},
                {"name": note, "arguments": {"path": str(second), "text": "two"}},
            ]
        },
        {
            "tool_calls": [{"name": note, "arguments": {"path": str(third), "text": "three"}}]
        },  # the next round
        {"json": {"ok": True}},
    )
    assert cli("plan", "run", "helper", env=model_server.env()).returncode == 5
    requests = waiting(cli)
    assert sorted(r["source"]["arguments"]["text"] for r in requests) == ["one", "two"]
    assert len({r["id"] for r in requests}) == 2
    one = cli("permit", requests[0]["id"], env=model_server.env())
    assert one.returncode == 0 and "1 more still wait" in one.stderr, one.stderr
    assert not first.exists() and not second.exists()  # nothing runs before both are settled
    again = cli("permit", requests[1]["id"], env=model_server.env())
    assert again.returncode == 5, again.stderr  # the next round's call waits in turn
    (last,) = waiting(cli)
    assert last["source"]["arguments"]["text"] == "three"
    done = cli("permit", last["id"], env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"agent": {"ok": True}}
    assert [p.read_text().splitlines() for p in (first, second, third)] == [["one"], ["two"], ["three"]]
    assert counts(shop) == {"before-0": 1}
    assert len(model_server.requests) == 4
