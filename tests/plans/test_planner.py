"""`plan_and_execute` and `plan go` (issue 13): the planner drafts a plan over the catalog, it
runs, a broken step is repaired keeping what ran. Against the real command, the scripted model
server (the planner, solver and chat roles) and real MCP servers (calls counted at the server).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.chat.test_pty import Spawn, leave, send_message
from tests.chat.test_pty import chat as chat  # noqa: F401 - the pseudo-terminal fixture
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import SERVERS, stdio, write_servers

CATALOG_SERVER = str(SERVERS / "catalog_server.py")


def request_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


def is_planner(body: dict[str, Any]) -> bool:
    fmt = body.get("response_format") or {}
    return fmt.get("type") == "json_schema" and fmt.get("json_schema", {}).get("name") == "plan"


def shop(workspace: Path, tmp_path: Path) -> Path:
    """The catalog MCP server as `c`, logging its calls to the returned file."""
    log = tmp_path / "calls.jsonl"
    write_servers(workspace, {"c": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(log)})})
    return log


def calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def price_plan(path: str, identifier: str = "first_price") -> dict[str, Any]:
    """List books, then get the first one reading `{{E0.<path>}}`; output its price."""
    return {
        "identifier": identifier,
        "name": "First price",
        "description": "The price of the first book.",
        "steps": [
            {"id": "E0", "tool_name": "c__list_items", "input": {"category": "books", "count": 2}},
            {"id": "E1", "tool_name": "c__get_item", "input": {"id": "{{E0." + path + "}}"}},
        ],
        "output": {"price": "{{E1.price}}", "id": "{{E1.id}}"},
    }


GOAL = "what does the first book cost?"


def test_a_broken_reference_is_replanned_keeping_the_step_that_ran(
    workspace: Path, tmp_path: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace, tmp_path)
    model_server.push({"json": price_plan("products.0.id")}, {"json": price_plan("items.0.id")})
    result = cli("plan", "go", GOAL, env=model_server.env())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"price": 50, "id": "boo-0"}
    assert "replanning after E1: {{E0.products.0.id}}: no key 'products'" in result.stderr
    # E0's tool ran exactly once: the repaired plan reused its result.
    assert [c["tool"] for c in calls(log)] == ["list_items", "get_item"]
    assert len(model_server.requests) == 2 and all(is_planner(r) for r in model_server.requests)
    second = request_text(model_server.requests[1])
    assert "# The failing step\nE1 (c__get_item)" in second
    assert "# The error\nstep E1 (c__get_item): {{E0.products.0.id}}: no key 'products'" in second
    assert "E0: {category: string, items: [{id: string, name: string}] (2)}" in second
    assert "products.0.id" in second  # the plan that failed is shown


def test_the_replan_is_an_event_and_the_budget_ends_in_a_one_line_error(
    workspace: Path, tmp_path: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace, tmp_path)
    model_server.push(*({"json": price_plan(f"wrong{n}.id")} for n in range(3)))
    env = {**model_server.env(), "GRAPHCHAT_EVENTS": "jsonl"}
    result = cli("plan", "go", GOAL, "--json", env=env)
    assert result.returncode == 1
    assert len(model_server.requests) == 3  # the draft and planning_attempts (2) replans
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    replans = [e for e in events if e["event"] == "replan"]
    assert [(e["step"], e["attempt"], e["budget"]) for e in replans] == [("E1", 1, 2), ("E1", 2, 2)]
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: plan_and_execute gave up after 2 replans: plan failed at step E1 (c__get_item): "
        "{{E0.wrong2.id}}: no key 'wrong2' at E0 (available: category, items)"
    ]
    envelope = json.loads(result.stdout)
    assert envelope["degraded"] is True and envelope["plan"]["steps"][1]["input"] == {
        "id": "{{E0.wrong2.id}}"
    }
    assert [r["step"] for r in envelope["replans"]] == ["E1", "E1"]
    assert envelope["usage"]["by_role"]["planner"]["calls"] == 3
    assert [c["tool"] for c in calls(log)] == ["list_items"]  # never re-run


def test_empty_data_goes_to_the_solver_without_replanning(
    workspace: Path, tmp_path: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    shop(workspace, tmp_path)
    (workspace / "graphchat.yaml").write_text("user:\n  name: Ada\n  preferences: prices in euros\n")
    plan = price_plan("items.0.id")
    plan["steps"][0]["input"]["count"] = 0  # no books: E0.items is empty
    del plan["output"]
    plan["solver"] = {"query_to_answer": GOAL, "data": {"item": "{{E1}}"}}
    model_server.push({"json": plan}, {"text": "There are no books."})
    result = cli("plan", "go", GOAL, "--json", env=model_server.env())
    assert result.returncode == 0, result.stderr
    assert len(model_server.requests) == 2
    assert is_planner(model_server.requests[0]) and not is_planner(model_server.requests[1])
    # the planner sees the workspace's `user:` section; the solver is told what ran out
    assert "# The user\nname: Ada\npreferences: prices in euros" in request_text(model_server.requests[0])
    assert "{{E0.items.0.id}}" in request_text(model_server.requests[1])
    assert "replanning" not in result.stderr
    envelope = json.loads(result.stdout)
    assert envelope["answer"] == "There are no books." and envelope["degraded"] is False
    assert set(envelope["usage"]["by_role"]) == {"planner", "solver"}


def test_plan_go_save_writes_a_plan_that_validates_and_reruns_without_the_planner(
    workspace: Path, tmp_path: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace, tmp_path)
    model_server.push({"json": price_plan("products.0.id")}, {"json": price_plan("items.0.id")})
    result = cli("plan", "go", GOAL, "--save", "book_price", env=model_server.env())
    assert result.returncode == 0, result.stderr
    saved = workspace / "plans" / "book_price.yaml"
    assert f"✓ plan saved to {saved}" in result.stderr
    doc = yaml.safe_load(saved.read_text())
    assert doc["identifier"] == "book_price"
    assert doc["steps"][1]["input"] == {"id": "{{E0.items.0.id}}"}  # the final, repaired plan
    check = cli("plan", "validate", "book_price")
    assert check.returncode == 0, check.stderr
    planner_calls = len(model_server.requests)
    again = cli("plan", "run", "book_price", env=model_server.env())
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(result.stdout)
    assert len(model_server.requests) == planner_calls  # no planner (nor any model) call
    assert [c["tool"] for c in calls(log)] == ["list_items", "get_item"] * 2
    taken = cli("plan", "go", GOAL, "--save", "book_price", env=model_server.env())
    assert taken.returncode == 1 and "already exists" in taken.stderr
    assert len(model_server.requests) == planner_calls  # refused before any model call


def test_the_chat_model_calls_plan_and_execute_with_the_learned_shape_and_answers(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    write_servers(workspace, {"t": stdio()})
    called = cli("tools", "call", "t__shaped", "--input", "variant=1")  # learns its shape
    assert called.returncode == 0, called.stderr
    plan = {
        "identifier": "shaped_score",
        "name": "Shaped score",
        "description": "The score of the shaped record.",
        "steps": [{"id": "E0", "tool_name": "t__shaped", "input": {"variant": 1}}],
        "output": {"score": "{{E0.score}}"},
    }
    model_server.push(
        {"tool_calls": [{"name": "plan_and_execute", "arguments": {"query": "the shaped score"}}]},
        {"json": plan},
        {"text": "The score is in."},
    )
    result = cli("ask", "what is the shaped score?", "--json", env=model_server.env())
    assert result.returncode == 0, result.stderr
    chat, planner, answer = model_server.requests
    assert "plan_and_execute" in [t["function"]["name"] for t in chat["tools"]]
    assert is_planner(planner)
    assert "output (observed in earlier calls, may vary): {id: integer, name: string, score: number}" in (
        request_text(planner)
    )
    tool_message = answer["messages"][-1]
    assert tool_message["role"] == "tool"
    value = json.loads(tool_message["content"])
    assert value["degraded"] is False and value["steps_executed"] == 1
    assert (
        value["output"] == {"score": value["output"]["score"]}
        and value["plan"]["identifier"] == "shaped_score"
    )
    envelope = json.loads(result.stdout)
    assert envelope["content"] == "The score is in."
    assert envelope["usage"]["calls"] == 3  # the chat's two calls and the planner's
    assert {role: r["calls"] for role, r in envelope["usage"]["by_role"].items()} == {"chat": 2, "planner": 1}


def test_an_exhausted_budget_is_an_error_result_for_the_chat_not_a_crash(
    workspace: Path, tmp_path: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    shop(workspace, tmp_path)
    (workspace / "graphchat.yaml").write_text("settings:\n  planning_attempts: 1\n")
    model_server.push(
        {"tool_calls": [{"name": "plan_and_execute", "arguments": {"goal": GOAL}}]},
        {"json": price_plan("wrong.id")},
        {"json": price_plan("still_wrong.id")},
        {"text": "The planner could not do it."},
    )
    result = cli("ask", GOAL, env=model_server.env())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "The planner could not do it."
    assert len(model_server.requests) == 4  # planning_attempts: 1 → one replan
    tool_message = model_server.requests[-1]["messages"][-1]
    value = json.loads(tool_message["content"])
    assert value["error"].startswith("plan_and_execute gave up after 1 replan: plan failed at step E1")
    assert value["degraded"] is True


def test_freeze_inlines_the_final_plan_of_a_plan_and_execute_call() -> None:
    from graphchat.plans.freeze import freeze
    from graphchat.plans.loader import load_plan_text
    from tests.plans.test_freeze import make_events

    planned = price_plan("items.0.id")
    planned["input_schema"] = {
        "type": "object",
        "properties": {"category": {"type": "string", "default": "books"}},
    }
    planned["steps"][0]["input"]["category"] = "{{input.category}}"
    planned["steps"].append(
        {
            "id": "E2",
            "tool_name": "map",
            "input": {
                "over": "{{E0.items}}",
                "do": [
                    {"id": "B0", "tool_name": "c__get_item", "input": {"id": "{{item.id}}"}},
                    {"id": "B1", "tool_name": "c__get_item", "input": {"id": "{{B0.id}}"}},
                ],
            },
        }
    )
    result = {"answer": "", "degraded": False, "steps_executed": 3, "output": {}, "plan": planned}
    events = make_events(
        ("user", "price of the first book please"),
        ("round", [("c__list_items", {"category": "games"}, {"category": "games", "items": []})]),
        ("round", [("plan_and_execute", {"query": GOAL}, result)]),
        ("round", [("plan_and_execute", {"query": "again"}, {"error": "gave up"}, True)]),
    )
    frozen = freeze(events, thread_id="t1", finish="output")
    doc = yaml.safe_load(frozen.text)
    assert [(s["id"], s["tool_name"]) for s in doc["steps"]] == [
        ("E0", "c__list_items"),
        ("E1", "c__list_items"),
        ("E2", "c__get_item"),
        ("E3", "map"),
    ]
    assert doc["steps"][1]["input"] == {"category": "{{input.category}}", "count": 2}
    assert doc["input_schema"]["properties"]["category"] == {"type": "string", "default": "books"}
    assert doc["steps"][2]["input"] == {"id": "{{E1.items.0.id}}"}
    body = doc["steps"][3]["input"]
    assert body["over"] == "{{E1.items}}"
    assert [s["id"] for s in body["do"]] == ["E3_B0", "E3_B1"]
    assert body["do"][1]["input"] == {"id": "{{E3_B0.id}}"}
    assert "plan_and_execute (turn 1): failed: gave up" in frozen.text
    load_plan_text(frozen.text, "frozen.yaml")  # it loads: references and ids are sound


def test_chat_shows_the_plan_as_a_step_list_replans_visibly_and_freezes_the_final_plan(
    workspace: Path, tmp_path: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace, tmp_path)
    model_server.push(
        {"tool_calls": [{"name": "plan_and_execute", "arguments": {"query": GOAL}}]},
        {"json": price_plan("products.0.id")},
        {"json": price_plan("items.0.id")},
        {"text": "The first book costs 50."},
    )
    child = chat()
    send_message(child, "What does the first book cost?")
    child.expect_exact("The first book costs 50.")
    send_message(child, "/freeze book_price")
    child.expect_exact("saved to")
    child.expect_exact("E0  c__list_items")
    child.expect_exact('E1  c__get_item {"id":"{{E0.items.0.id}}"}')
    child.expect_exact("? Run it once now to check it?")
    child.expect_exact("answer>")
    child.sendline("no")
    out = leave(child)
    assert "replanning after E1: {{E0.products.0.id}}: no key 'products'" in out
    assert "plan first_price: ✓ E0 c__list_items · ✗ E1 c__get_item" in out  # the first plan, as it ended
    assert "plan first_price: ✓ E0 c__list_items · ✓ E1 c__get_item" in out  # the repaired one
    assert [c["tool"] for c in calls(log)] == ["list_items", "get_item"]
    doc = yaml.safe_load((workspace / "plans" / "book_price.yaml").read_text())
    assert [(s["id"], s["tool_name"]) for s in doc["steps"]] == [
        ("E0", "c__list_items"),
        ("E1", "c__get_item"),
    ]


# --- the pieces ---------------------------------------------------------------------------------


def test_only_an_identical_prefix_of_executed_steps_is_reused() -> None:
    from graphchat.plans.loader import load_plan_data
    from graphchat.plans.planner import reusable

    def plan(*inputs: dict[str, Any]) -> Any:
        steps = [{"id": f"E{n}", "tool_name": "c__get_item", "input": i} for n, i in enumerate(inputs)]
        return load_plan_data({"identifier": "p", "name": "p", "description": "p", "steps": steps})

    before = plan({"id": "a"}, {"id": "b"}, {"id": "c"})
    results = {"E0": 1, "E1": 2}  # E2 failed
    assert reusable(before, plan({"id": "a"}, {"id": "b"}, {"id": "x"}), results) == {"E0": 1, "E1": 2}
    # a changed step ends the prefix: the identical E1 after it runs again
    assert reusable(before, plan({"id": "z"}, {"id": "b"}, {"id": "c"}), results) == {}
    assert reusable(before, plan({"id": "a"}, {"id": "y"}, {"id": "b"}), results) == {"E0": 1}


def test_not_offered_in_agent_steps_and_a_plan_it_runs_cannot_start_it_again(workspace: Path) -> None:
    import asyncio

    from graphchat.catalog.base import CallContext
    from graphchat.sources import build_catalog
    from graphchat.workspace import load_settings

    settings = load_settings(workspace)  # no model configured: the guard answers before any model
    catalog = build_catalog(settings, include_mcp=False, record_shapes=False)
    spec = catalog.get("plan_and_execute")
    assert spec is not None and spec.source == "core"
    assert "plan_and_execute" in [t["function"]["name"] for t in catalog.model_tools()]
    assert "plan_and_execute" not in [t["function"]["name"] for t in catalog.model_tools(in_plan=True)]
    inner = CallContext(chain=("plan_and_execute", "first_price", "plan_x"))
    result = asyncio.run(catalog.call("plan_and_execute", {"query": GOAL}, inner))
    assert result.is_error
    assert result.error_message == (
        "plan_and_execute cannot run inside a plan_and_execute run: "
        "plan_and_execute → first_price → plan_x → plan_and_execute"
    )
    missing = asyncio.run(catalog.call("plan_and_execute", {"context": "x"}, CallContext()))
    assert missing.is_error and "requires a 'query'" in missing.error_message


def test_a_plan_file_may_call_plan_and_execute(workspace: Path, cli: GraphchatRunner) -> None:
    plan = {
        "identifier": "delegate",
        "name": "Delegate",
        "description": "Hands the job to the planner.",
        "steps": [{"id": "E0", "tool_name": "plan_and_execute", "input": {"query": "{{input.q}}"}}],
        "output": {"answer": "{{E0.answer}}"},
    }
    (workspace / "plans" / "delegate.yaml").write_text(yaml.safe_dump(plan))
    check = cli("plan", "validate", "delegate")
    assert check.returncode == 0, check.stderr
    # but a plan the planner writes for plan_and_execute may not: that goes back to the planner
    from graphchat.plans.loader import load_plan_data
    from graphchat.plans.planner import no_self_calls

    assert no_self_calls(load_plan_data(plan)) == [
        "step E0: tool_name: a plan written for plan_and_execute cannot call it; use the catalog's tools"
    ]


def test_plan_go_is_kept_in_a_thread_that_plan_freeze_and_chat_freeze_turn_into_the_plan_it_ran(
    workspace: Path,
    tmp_path: Path,
    cli: GraphchatRunner,
    chat: Spawn,
    model_server: ScriptedModelServer,
) -> None:
    log = shop(workspace, tmp_path)
    model_server.push({"json": price_plan("products.0.id")}, {"json": price_plan("items.0.id")})
    went = cli("plan", "go", GOAL, env=model_server.env())
    assert went.returncode == 0, went.stderr
    last = went.stderr.splitlines()[-1]
    assert last.startswith("✓ kept in thread ") and last.endswith(" saves this plan")
    thread_id = last.split()[4].rstrip(":")
    assert last == f"✓ kept in thread {thread_id}: `graphchat plan freeze {thread_id}` saves this plan"
    listed = json.loads(cli("threads", "list", "--json").stdout)["threads"]
    assert [(t["id"], t["title"]) for t in listed] == [(thread_id, GOAL)]

    froze = cli("plan", "freeze", thread_id, "--name", "go_price")
    assert froze.returncode == 0, froze.stderr
    doc = yaml.safe_load((workspace / "plans" / "go_price.yaml").read_text())
    final = price_plan("items.0.id")  # the repaired plan, not the first draft
    assert [(s["id"], s["tool_name"], s["input"]) for s in doc["steps"]] == [
        (s["id"], s["tool_name"], s["input"]) for s in final["steps"]
    ]
    assert doc["output"] == final["output"]  # it ends as the plan that ran ended
    planner_calls = len(model_server.requests)
    ran = cli("plan", "run", "go_price", env=model_server.env())
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == json.loads(went.stdout) == {"price": 50, "id": "boo-0"}
    assert len(model_server.requests) == planner_calls  # no model call
    # the latest thread is the plan go's: a plain `plan freeze` finds it, byte for byte the same plan
    again = cli("plan", "freeze", "--name", "go_price", "--stdout")
    assert again.stdout == (workspace / "plans" / "go_price.yaml").read_text()

    # a failed plan go is kept too, and says nothing about freezing
    model_server.push(*({"json": price_plan(f"wrong{n}.id")} for n in range(3)))
    failed = cli("plan", "go", "the price, wrongly", env=model_server.env())
    assert failed.returncode == 1 and "kept in thread" not in failed.stderr
    refused = cli("plan", "freeze")
    assert refused.returncode == 1 and "has no successful tool call" in refused.stderr

    # /freeze in a chat continuing the plan go's thread writes the same plan
    child = chat("--thread", thread_id)
    send_message(child, "/freeze chat_price")
    child.expect_exact("saved to")
    child.expect_exact("E0  c__list_items")
    child.expect_exact('E1  c__get_item {"id":"{{E0.items.0.id}}"}')
    child.expect_exact("? Run it once now to check it?")
    child.expect_exact("answer>")
    child.sendline("no")
    leave(child)
    chat_doc = yaml.safe_load((workspace / "plans" / "chat_price.yaml").read_text())
    assert chat_doc["steps"] == doc["steps"] and chat_doc["output"] == doc["output"]
    assert [c["tool"] for c in calls(log)] == ["list_items", "get_item"] * 2 + ["list_items"]


def test_plan_go_says_the_catalogs_warnings_as_every_host_does(
    workspace: Path, tmp_path: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """`plan go` gets its stack from `host.open_host`: a server the catalog skips is said."""
    shop(workspace, tmp_path)
    write_servers(workspace, {"c": stdio(CATALOG_SERVER), "plan": stdio(CATALOG_SERVER)})
    model_server.push({"json": price_plan("items.0.id")})
    result = cli("plan", "go", GOAL, env=model_server.env())
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"price": 50, "id": "boo-0"}
    assert "server name 'plan' is reserved" in result.stderr and "this server is skipped" in result.stderr
