"""A plan a headless `ask` turn calls keeps its frames (issue 19): when its `ask` step waits, the
turn parks; answering resumes the turn from its thread and the plan call inside its frames — the
plan's finished steps do not run again, the answer reaches its `ask` step, and the plan's output
is the tool result the model sees. Through the real command (in process), the scripted model and
real MCP servers; the counting tool is the shop server's `get_item`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import GraphchatRunner
from tests.runs.test_frames import counts, waiting
from tests.runs.test_frames import shop as shop  # noqa: F401 - the fixture
from tests.scripted_server import ScriptedModelServer


def question(step: str, prompt: str) -> str:
    return f"""
  - id: {step}
    tool_name: ask
    input:
      prompt: "{prompt}"
      output_schema:
        type: object
        properties: {{keep: {{type: boolean}}}}
        required: [keep]"""


def lookup(step: str, item: str) -> str:
    return f"""
  - id: {step}
    tool_name: shop__get_item
    input: {{id: "{item}"}}"""


PICK = (
    """identifier: pick
name: Pick
description: Look up, ask whether to keep it, look up again.
steps:"""
    + lookup("T1", "before-0")
    + question("Q", "Keep it?")
    + lookup("T2", "after-0")
    + """
output:
  kept: "{{Q.answer.keep}}"
  after: "{{T2.id}}"
"""
)

TWICE = (
    """identifier: twice
name: Twice
description: Look up, ask, look up, ask again, look up.
steps:"""
    + lookup("T1", "before-0")
    + question("Q1", "Keep the first?")
    + lookup("T2", "between-0")
    + question("Q2", "Keep the second?")
    + lookup("T3", "after-0")
    + """
output:
  first: "{{Q1.answer.keep}}"
  second: "{{Q2.answer.keep}}"
  last: "{{T3.id}}"
"""
)


def tool_results(body: dict[str, Any]) -> list[Any]:
    return [json.loads(m["content"]) for m in body["messages"] if m.get("role") == "tool"]


def only_request(cli: GraphchatRunner) -> dict[str, Any]:
    (request,) = waiting(cli)
    return dict(request)


def assert_frames_gone_turn_kept(cli: GraphchatRunner, shop: Path) -> None:  # noqa: F811
    """The plan call's frames went when it finished; the turn's own record is kept as finished
    (`graphchat runs`), and the frames folder is not listed as a run."""
    frames = shop / "requests" / "runs" / "frames"
    assert not list(frames.glob("*.json")) and not list(frames.glob("*.journal"))
    (kept,) = json.loads(cli("runs", "--json").stdout)["runs"]
    assert kept["state"] == "finished" and kept["thread"] is not None


def test_a_plan_called_from_a_headless_ask_resumes_inside_its_frames(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    model_server: ScriptedModelServer,
) -> None:
    (shop / "plans" / "pick.yaml").write_text(PICK)
    model_server.push({"tool_calls": [{"name": "plan__pick", "arguments": {}}]}, {"text": "Picked."})
    run = cli("ask", "Pick one.", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert counts(shop) == {"before-0": 1}
    request = only_request(cli)
    assert request["question"] == "Keep it?" and request["source"]["step"] == "Q"
    answered = cli("answer", request["id"], "yes", env=model_server.env())
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "Picked.\n"
    assert counts(shop) == {"before-0": 1, "after-0": 1}  # the plan's first lookup did not run again
    assert len(model_server.requests) == 2
    assert tool_results(model_server.requests[1]) == [{"kept": True, "after": "after-0"}]  # the plan's output
    assert_frames_gone_turn_kept(cli, shop)


def test_a_plan_called_from_a_headless_ask_that_asks_again_parks_the_turn_again(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    model_server: ScriptedModelServer,
) -> None:
    (shop / "plans" / "twice.yaml").write_text(TWICE)
    model_server.push({"tool_calls": [{"name": "plan__twice", "arguments": {}}]}, {"text": "Done."})
    assert cli("ask", "Pick twice.", env=model_server.env()).returncode == 5
    first = only_request(cli)
    again = cli("answer", first["id"], "yes", env=model_server.env())
    assert again.returncode == 5, again.stderr  # the plan's second question: the turn waits again
    assert counts(shop) == {"before-0": 1, "between-0": 1}
    second = only_request(cli)
    assert second["question"] == "Keep the second?"
    thread = first["source"]["thread"]
    busy = cli("ask", "More?", "--thread", thread, env=model_server.env())
    assert busy.returncode == 1 and f"waits on request {second['id']}" in busy.stderr
    done = cli("answer", second["id"], "no", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done.\n"
    assert counts(shop) == {"before-0": 1, "between-0": 1, "after-0": 1}
    assert len(model_server.requests) == 2
    assert tool_results(model_server.requests[1]) == [{"first": True, "second": False, "last": "after-0"}]


def test_cancelling_a_turn_parked_inside_a_plan_call_drops_the_plans_frames_too(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    model_server: ScriptedModelServer,
) -> None:
    (shop / "plans" / "pick.yaml").write_text(PICK)
    model_server.push({"tool_calls": [{"name": "plan__pick", "arguments": {}}]})
    assert cli("ask", "Pick one.", env=model_server.env()).returncode == 5
    assert list((shop / "requests" / "runs" / "frames").glob("*.json"))  # the plan call's frames
    request = only_request(cli)
    cancelled = cli("cancel", request["id"])
    assert cancelled.returncode == 0, cancelled.stderr
    assert not list((shop / "requests" / "runs").rglob("*.json")) and not list(
        (shop / "requests" / "runs").rglob("*.journal")
    )
    assert waiting(cli) == []


def test_plan_and_execute_called_from_a_headless_ask_resumes_inside_the_plan_it_was_running(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
    model_server: ScriptedModelServer,
) -> None:
    import yaml

    drafted = yaml.safe_load(PICK)
    model_server.push(
        {"tool_calls": [{"name": "plan_and_execute", "arguments": {"query": "pick one"}}]},  # the turn
        {"json": drafted},  # the planner
        {"text": "Picked."},  # the turn, resumed
    )
    run = cli("ask", "Pick one.", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert counts(shop) == {"before-0": 1}
    request = only_request(cli)
    assert request["question"] == "Keep it?"
    answered = cli("answer", request["id"], "yes", env=model_server.env())
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "Picked.\n"
    assert counts(shop) == {"before-0": 1, "after-0": 1}
    assert len(model_server.requests) == 3  # the planner was not asked again
    (result,) = tool_results(model_server.requests[2])
    assert "after-0" in json.dumps(result)
    assert_frames_gone_turn_kept(cli, shop)
