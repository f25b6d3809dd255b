"""`graphchat plan freeze` and `/freeze`: a thread's successful tool calls become a plan.

The unit tests drive the pure function over event lists (the precedence rules one by one); the
end-to-end tests freeze REAL threads, made by the real `graphchat ask`/`chat` against the
scripted model server and a real MCP server, then run the frozen plan with `plan run`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from graphchat.plans.freeze import FreezeError, freeze, is_trivial, value_key, varying_place
from graphchat.plans.loader import load_plan_text
from graphchat.threads import lines as ev
from tests.chat.test_pty import Spawn, leave, send_message
from tests.chat.test_pty import chat as chat  # noqa: F401 - the pseudo-terminal fixture
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import seed_cache, stdio, write_servers

# --- unit tests of the pure function -----------------------------------------------------------


def make_events(*items: Any) -> list[dict[str, Any]]:
    """("user", text) | ("round", [(name, args, result, is_error?)…]) | ("answer", text)."""
    out: list[dict[str, Any]] = []
    n = 0
    for item in items:
        kind = item[0]
        if kind == "user":
            if out:
                out.append(dict(ev.turn_end({}, "m")))
            out.append(dict(ev.user(item[1])))
        elif kind == "round":
            calls = []
            for spec in item[1]:
                n += 1
                calls.append({"id": f"c{n}", "name": spec[0], "arguments": json.dumps(spec[1])})
            out.append(dict(ev.assistant(None, calls)))  # type: ignore[arg-type]
            for call, spec in zip(calls, item[1], strict=True):
                error = len(spec) > 3 and spec[3]
                content = spec[2] if isinstance(spec[2], str) else json.dumps(spec[2])
                out.append(dict(ev.tool_result(call["id"], spec[0], content, is_error=error)))
        elif kind == "answer":
            out.append(dict(ev.assistant(item[1])))
    out.append(dict(ev.turn_end({}, "m")))
    return out


def plan_of(*items: Any, **kwargs: Any) -> tuple[dict[str, Any], str]:
    frozen = freeze(make_events(*items), thread_id="abc123", **kwargs)
    plan = load_plan_text(frozen.text, "frozen.yaml")  # it loads: structure and templates check
    assert plan.identifier == frozen.identifier
    return yaml.safe_load(frozen.text), frozen.text


ITEMS = {"items": [{"id": "it-100", "name": "alpha"}, {"id": "it-200", "name": "beta"}]}


def test_a_value_from_an_earlier_result_becomes_a_reference_keeping_its_type() -> None:
    doc, _ = plan_of(
        ("user", "look up the first item"),
        ("round", [("s__list", {"category": "tools"}, ITEMS)]),
        ("round", [("s__get", {"id": "it-100", "whole": ITEMS["items"][1], "n": 2}, {"price": 12})]),
        ("answer", "It costs 12."),
    )
    assert [s["id"] for s in doc["steps"]] == ["E0", "E1"]
    assert doc["steps"][1]["input"] == {"id": "{{E0.items.0.id}}", "whole": "{{E0.items.1}}", "n": 2}
    assert doc["steps"][0]["input"] == {"category": "tools"}  # not typed by the user: a literal


def test_reference_precedence_nearest_round_then_lowest_call_then_shortest_then_smallest_path() -> None:
    events = (
        ("user", "go"),
        ("round", [("s__a", {}, {"x": "val-1"})]),
        ("round", [("s__b", {}, {"deep": {"y": "val-1"}, "z": "val-1"}), ("s__c", {}, {"w": "val-1"})]),
        ("round", [("s__d", {"q": "val-1"}, {})]),
    )
    doc, text = plan_of(*events)
    # round 2 is nearer than round 1; in it call E1 comes before E2; in E1 `z` is shorter than deep.y
    assert doc["steps"][3]["input"] == {"q": "{{E1.z}}"}
    assert "chosen among 4 equal values; also at E1.deep.y, E2.w, E0.x" in text
    line = next(line for line in text.splitlines() if "{{E1.z}}" in line)
    assert "# chosen among" in line  # the comment is on that very line
    # equal lengths: the smaller path wins, array indexes in number order
    doc, _ = plan_of(
        ("user", "go"),
        ("round", [("s__a", {}, {"b": "val-2", "a": "val-2", "l": ["n", *["x"] * 10, "val-3", "val-3"]})]),
        ("round", [("s__d", {"q": "val-2", "r": "val-3"}, {})]),
    )
    assert doc["steps"][1]["input"] == {"q": "{{E0.a}}", "r": "{{E0.l.11}}"}


def test_calls_of_one_round_never_reference_each_other() -> None:
    doc, _ = plan_of(
        ("user", "go"),
        ("round", [("s__a", {}, {"x": "val-1"}), ("s__b", {"q": "val-1"}, {})]),
    )
    assert doc["steps"][1]["input"] == {"q": "val-1"}


def test_equality_is_typed_and_trivial_values_stay_literal() -> None:
    assert value_key(5) == value_key(5.0)
    assert value_key("5") != value_key(5)
    assert value_key(True) != value_key(1)
    assert all(is_trivial(v) for v in (True, None, 1, -1, 0.5, "ab", [], {}))
    assert not any(is_trivial(v) for v in (2, -1.5, "abc", [0], {"a": None}))
    doc, _ = plan_of(
        ("user", "ab 55 count to 1"),
        ("round", [("s__a", {}, {"n": 7, "s": "7", "t": True, "ab": "ab", "one": 1, "f": 7.0})]),
        ("round", [("s__b", {"n": 7.0, "s": "7", "t": True, "ab": "ab", "one": 1, "m": 55}, {})]),
    )
    assert doc["steps"][1]["input"] == {
        "n": "{{E0.f}}",  # 7.0 equals 7 and 7.0: same length, `f` is the smaller path
        "s": "7",  # a one-character string is trivial
        "t": True,
        "ab": "ab",
        "one": 1,
        "m": "{{input.m}}",  # a number typed as a whole token
    }
    assert doc["input_schema"]["properties"] == {"m": {"type": "integer", "default": 55}}


def test_typed_values_become_inputs_named_after_their_key_with_collisions_numbered() -> None:
    doc, _ = plan_of(
        ("user", "weather in Paris and Tokyo, and 420 widgets"),
        ("round", [("s__w", {"city": "Paris", "count": 42}, {"ok": "yes"})]),
        ("round", [("s__w", {"city": "Tokyo", "count": 420}, {"ok": "yes"})]),
        ("round", [("s__w", {"city": "Paris", "unit": "Celsius"}, {"ok": "yes"})]),
    )
    steps = doc["steps"]
    assert steps[0]["input"] == {"city": "{{input.city}}", "count": 42}  # 42 is not a whole token
    assert steps[1]["input"] == {"city": "{{input.city_2}}", "count": "{{input.count}}"}
    assert steps[2]["input"] == {"city": "{{input.city}}", "unit": "Celsius"}  # same value, same input
    assert doc["input_schema"]["properties"] == {
        "city": {"type": "string", "default": "Paris"},
        "city_2": {"type": "string", "default": "Tokyo"},
        "count": {"type": "integer", "default": 420},
    }


def test_a_reference_wins_over_an_input_and_a_secret_becomes_a_required_input() -> None:
    doc, text = plan_of(
        ("user", "fetch report-2024 with my key"),
        ("round", [("s__a", {"name": "report-2024"}, {"file": "report-2024"})]),
        ("round", [("s__b", {"file": "report-2024", "token": "Bearer [redacted]"}, {})]),
    )
    assert doc["steps"][0]["input"] == {"name": "{{input.name}}"}
    assert doc["steps"][1]["input"] == {"file": "{{E0.file}}", "token": "{{input.token}}"}
    schema = doc["input_schema"]
    assert schema["properties"]["token"] == {"type": "string"}  # no default: never a literal
    assert schema["required"] == ["token"]
    assert "[redacted]" not in text


def test_a_round_over_an_earlier_array_becomes_one_map_and_later_references_read_its_results() -> None:
    listing = {"items": [{"id": f"it-{i}", "name": f"n{i}"} for i in range(4)]}
    doc, text = plan_of(
        ("user", "details of the items"),
        ("round", [("s__list", {}, listing)]),
        (
            "round",
            [
                ("s__get", {"id": "it-2", "verbose": True}, {"price": 302}),
                ("s__get", {"id": "it-0", "verbose": True}, {"price": 300}),
                ("s__get", {"id": "it-3", "verbose": True}, {"price": 303}),
                ("s__other", {"q": "it-1"}, {"r": 5}),
            ],
        ),
        ("round", [("s__buy", {"price": 303}, {})]),
    )
    steps = doc["steps"]
    assert [s["tool_name"] for s in steps] == ["s__list", "map", "s__other", "s__buy"]
    assert steps[1]["input"] == {
        "over": "{{E0.items}}",
        "concurrency": 3,
        "do": {"tool_name": "s__get", "input": {"id": "{{item.id}}", "verbose": True}},
    }
    assert steps[2]["input"] == {"q": "{{E0.items.1.id}}"}
    assert steps[3]["input"] == {"price": "{{E1.results.3.price}}"}
    assert "the chat called s__get for 3 of 4 elements (skipped 1)" in text


def test_whole_elements_and_calls_that_vary_in_two_places_or_over_typed_lists() -> None:
    doc, _ = plan_of(
        ("user", "go"),
        ("round", [("s__zones", {}, {"zones": ["Europe/Paris", "Asia/Tokyo"]})]),
        ("round", [("s__t", {"tz": "Asia/Tokyo"}, {}), ("s__t", {"tz": "Europe/Paris"}, {})]),
    )
    assert doc["steps"][1]["input"]["do"]["input"] == {"tz": "{{item}}"}
    assert doc["steps"][1]["input"]["over"] == "{{E0.zones}}"
    # two places vary: no map
    doc, _ = plan_of(
        ("user", "go"),
        ("round", [("s__zones", {}, {"zones": ["Europe/Paris", "Asia/Tokyo"]})]),
        ("round", [("s__t", {"tz": "Asia/Tokyo", "n": 5}, {}), ("s__t", {"tz": "Europe/Paris", "n": 6}, {})]),
    )
    assert [s["tool_name"] for s in doc["steps"]] == ["s__zones", "s__t", "s__t"]
    # a list the person typed is not mapped: each call keeps its own input
    doc, _ = plan_of(
        ("user", "time in Europe/Paris and Asia/Tokyo"),
        ("round", [("s__t", {"tz": "Europe/Paris"}, {}), ("s__t", {"tz": "Asia/Tokyo"}, {})]),
    )
    assert [s["input"] for s in doc["steps"]] == [{"tz": "{{input.tz}}"}, {"tz": "{{input.tz_2}}"}]
    assert varying_place([{"a": {"x": 1, "y": 2}}, {"a": {"x": 3, "y": 4}}]) == ("a",)
    assert varying_place([{"a": 1, "b": 2}, {"a": 3, "b": 4}]) is None


def test_failed_cancelled_and_unanswered_calls_are_dropped_and_listed() -> None:
    doc, text = plan_of(
        ("user", "go"),
        (
            "round",
            [
                ("s__a", {}, {"x": "val-1"}),
                ("s__bad", {}, {"error": "it broke"}, True),
                ("s__slow", {}, {"error": "cancelled (Ctrl-C) before it finished"}, True),
                ("ask_user", {"question": "Sure?"}, {"answered": False, "reason": "declined"}),
            ],
        ),
    )
    assert [s["tool_name"] for s in doc["steps"]] == ["s__a"]
    assert "#   - s__bad (turn 1): failed: it broke" in text
    assert "#   - s__slow (turn 1): cancelled" in text
    assert "#   - ask_user (turn 1): not answered (declined)" in text
    with pytest.raises(FreezeError, match="no successful tool call"):
        freeze(make_events(("user", "x"), ("round", [("s__bad", {}, {"error": "no"}, True)])), thread_id="t1")


def test_an_answered_ask_user_becomes_an_ask_step_whose_answer_later_steps_read() -> None:
    doc, _ = plan_of(
        ("user", "pick a colour"),
        (
            "round",
            [
                (
                    "ask_user",
                    {"question": "Which colour?", "options": ["red", "blue"]},
                    {"answer": "blue", "answered": True},
                )
            ],
        ),
        ("round", [("s__paint", {"colour": "blue"}, {"ok": "done"})]),
    )
    ask = doc["steps"][0]
    assert ask["tool_name"] == "ask"
    assert ask["input"] == {
        "prompt": "Which colour?",
        "output_schema": {
            "type": "object",
            "required": ["answer"],
            "properties": {"answer": {"enum": ["red", "blue"]}},
        },
        "when_unanswered": "default",
        "default": {"answer": "blue"},
    }
    assert doc["steps"][1]["input"] == {"colour": "{{E0.answer.answer}}"}


def test_finish_turns_identity_and_determinism() -> None:
    items = (
        ("user", "first: list {{things}}"),
        ("round", [("s__a", {}, {"x": "val-1"})]),
        ("answer", "done"),
        ("user", "second"),
        ("round", [("s__b", {}, {"y": "val-2"})]),
    )
    doc, text = plan_of(*items)
    assert "output" in doc and "solver" not in doc  # the last turn ended without a written answer
    assert doc["output"] == {"E0": "{{E0}}", "E1": "{{E1}}"}
    assert doc["identifier"] == "first_list_things"
    assert doc["exemplars"] == ["first: list {{things}}"]
    doc, _ = plan_of(*items, turns="1", name="mine")
    assert doc["identifier"] == "mine"
    assert [s["tool_name"] for s in doc["steps"]] == ["s__a"]
    assert doc["solver"] == {"query_to_answer": "first: list { {things}}", "data": {"E0": "{{E0}}"}}
    doc, _ = plan_of(*items, turns="2..2", finish="silent")
    assert "solver" not in doc and "output" not in doc
    assert doc["steps"][0]["tool_name"] == "s__b"
    with pytest.raises(FreezeError, match="turns 1..2"):
        plan_of(*items, turns="2..3")
    assert plan_of(*items)[1] == plan_of(*items)[1]


# --- end to end: real threads from the real `ask`, a real MCP server, the real `plan run` ------

CATALOG_SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "catalog_server.py")


def shop(workspace: Path) -> Path:
    """Configure the catalog MCP server as `shop`; returns the file its calls are logged to."""
    log = workspace / "calls.jsonl"
    write_servers(workspace, {"shop": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(log)})})
    seed_cache(workspace)
    return log


def take_calls(log: Path) -> list[dict[str, Any]]:
    """The calls logged since the last look (the log starts over)."""
    if not log.exists():
        return []
    calls = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    log.unlink()
    return calls


def frozen_plan(done: subprocess.CompletedProcess[str]) -> tuple[Path, dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent.name == "plans"
    return path, yaml.safe_load(path.read_text())


def test_a_two_round_chat_freezes_into_a_plan_that_makes_the_same_calls_and_takes_typed_inputs(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace)
    model_server.push(
        {"tool_calls": [{"name": "shop__list_items", "arguments": {"category": "books", "count": 3}}]},
        {"tool_calls": [{"name": "shop__get_item", "arguments": {"id": "boo-0"}}]},
        {"text": "The first book costs 30."},
    )
    asked = cli("ask", "What does the first item of the books category cost?", env=model_server.env())
    assert asked.returncode == 0, asked.stderr
    chat_calls = take_calls(log)
    assert chat_calls == [
        {"tool": "list_items", "args": {"category": "books", "count": 3}},
        {"tool": "get_item", "args": {"id": "boo-0"}},
    ]

    path, plan = frozen_plan(cli("plan", "freeze", "--finish", "output"))
    name = plan["identifier"]
    assert path == workspace / "plans" / f"{name}.yaml"
    assert [s["tool_name"] for s in plan["steps"]] == ["shop__list_items", "shop__get_item"]
    assert plan["steps"][1]["input"] == {"id": "{{E0.items.0.id}}"}  # the value came from E0's result
    assert plan["steps"][0]["input"] == {"category": "{{input.category}}", "count": 3}  # typed / not typed
    assert plan["input_schema"]["properties"] == {"category": {"type": "string", "default": "books"}}
    assert plan["requires_servers"] == ["shop"]
    assert plan["output"] == {"E0": "{{E0}}", "E1": "{{E1}}"}
    assert plan["exemplars"] == ["What does the first item of the books category cost?"]
    assert cli("plan", "validate", name).returncode == 0

    # the plan runs without a model and makes exactly the chat's calls
    ran = cli("plan", "run", name)
    assert ran.returncode == 0, ran.stderr
    assert take_calls(log) == chat_calls
    assert json.loads(ran.stdout)["E1"]["id"] == "boo-0"
    assert len(model_server.requests) == 3  # the chat's three; the plan asked no model

    # another input changes the call's argument, and the reference follows the new result
    ran = cli("plan", "run", name, "--input", "category=games")
    assert ran.returncode == 0, ran.stderr
    assert take_calls(log) == [
        {"tool": "list_items", "args": {"category": "games", "count": 3}},
        {"tool": "get_item", "args": {"id": "gam-0"}},
    ]

    # freezing twice gives the same bytes; an existing file needs --force
    first = path.read_bytes()
    again = cli("plan", "freeze", "--finish", "output", "--stdout")
    assert again.returncode == 0, again.stderr
    assert again.stdout.encode() == first
    refused = cli("plan", "freeze", "--finish", "output")
    assert refused.returncode == 1
    assert refused.stderr.startswith(f"error: {path} already exists\n")
    forced = cli("plan", "freeze", "--finish", "output", "--force")
    assert forced.returncode == 0, forced.stderr
    assert path.read_bytes() == first
    # the default finish: the chat ended in a written answer, so a solver over every result, asked
    # the question with the input in it
    solver = yaml.safe_load(cli("plan", "freeze", "--stdout").stdout)["solver"]
    assert solver == {
        "query_to_answer": "What does the first item of the {{input.category}} category cost?",
        "data": {"E0": "{{E0}}", "E1": "{{E1}}"},
    }


def test_a_round_of_calls_over_an_earlier_array_freezes_into_one_map_over_every_element(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace)
    model_server.push(
        {"tool_calls": [{"name": "shop__list_items", "arguments": {"category": "tools", "count": 3}}]},
        {
            "tool_calls": [
                {"name": "shop__get_item", "arguments": {"id": item}} for item in ("too-2", "too-0", "too-1")
            ]
        },
        {"text": "They cost 32, 30 and 31."},
    )
    asked = cli("ask", "What do the 3 tools cost?", env=model_server.env())
    assert asked.returncode == 0, asked.stderr
    assert len(take_calls(log)) == 4

    _, plan = frozen_plan(cli("plan", "freeze", "--name", "tool_prices", "--finish", "output"))
    steps = plan["steps"]
    assert [s["tool_name"] for s in steps] == ["shop__list_items", "map"]
    assert steps[0]["input"] == {"category": "{{input.category}}", "count": "{{input.count}}"}
    assert steps[1]["input"] == {
        "over": "{{E0.items}}",
        "concurrency": 3,
        "do": {"tool_name": "shop__get_item", "input": {"id": "{{item.id}}"}},
    }

    ran = cli("plan", "run", "tool_prices", "--input", "count=5")
    assert ran.returncode == 0, ran.stderr
    calls = take_calls(log)
    assert calls[0] == {"tool": "list_items", "args": {"category": "tools", "count": 5}}
    assert sorted(c["args"]["id"] for c in calls[1:]) == [f"too-{i}" for i in range(5)]
    output = json.loads(ran.stdout)
    assert output["E1"]["count"] == 5
    assert [r["id"] for r in output["E1"]["results"]] == [f"too-{i}" for i in range(5)]


def test_an_answered_ask_user_freezes_into_an_ask_step_that_answers_files_answer(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace)
    chat_answers = workspace / "chat_answers.yaml"
    chat_answers.write_text("Which category?: garden\n")
    model_server.push(
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which category?"}}]},
        {"tool_calls": [{"name": "shop__list_items", "arguments": {"category": "garden", "count": 2}}]},
        {"text": "Two garden items."},
    )
    asked = cli("ask", "List a category I pick", "--answers", str(chat_answers), env=model_server.env())
    assert asked.returncode == 0, asked.stderr
    take_calls(log)

    _, plan = frozen_plan(cli("plan", "freeze", "--name", "pick", "--finish", "output"))
    ask, listing = plan["steps"]
    assert ask["tool_name"] == "ask"
    assert ask["input"]["prompt"] == "Which category?"
    assert ask["input"]["output_schema"]["properties"] == {"answer": {"type": "string"}}
    assert listing["input"] == {"category": "{{E0.answer.answer}}", "count": 2}

    plan_answers = workspace / "plan_answers.yaml"
    plan_answers.write_text("E0: {answer: kitchen}\n")
    ran = cli("plan", "run", "pick", "--answers", str(plan_answers))
    assert ran.returncode == 0, ran.stderr
    assert take_calls(log) == [{"tool": "list_items", "args": {"category": "kitchen", "count": 2}}]
    assert json.loads(ran.stdout)["E0"] == {"answer": {"answer": "kitchen"}, "answered": True}


def test_freeze_refuses_unknown_threads_and_threads_without_a_successful_call(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    none_yet = cli("plan", "freeze")
    assert none_yet.returncode == 1
    assert none_yet.stderr.startswith("error: there are no threads yet")
    log = shop(workspace)
    model_server.push(
        {"tool_calls": [{"name": "shop__broken", "arguments": {"reason": "jammed"}}]},
        {"text": "The tool is broken."},
    )
    asked = cli("ask", "try the broken tool", env=model_server.env())
    assert asked.returncode == 0, asked.stderr
    assert take_calls(log) == [{"tool": "broken", "args": {"reason": "jammed"}}]
    refused = cli("plan", "freeze")
    assert refused.returncode == 1
    assert refused.stderr.startswith("error: thread ") and "has no successful tool call" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert list((workspace / "plans").iterdir()) == []
    unknown = cli("plan", "freeze", "0123456789ab")
    assert unknown.returncode == 1
    assert unknown.stderr.startswith("error: unknown thread '0123456789ab'")
    bad = cli("plan", "freeze", "--turns", "3..1")
    assert bad.returncode == 2 and "--turns" in bad.stderr


# --- /freeze in chat, through a pseudo-terminal -------------------------------------------------


def test_freeze_in_chat_saves_the_plan_shows_it_and_runs_it_once(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    log = shop(workspace)
    model_server.push(
        {"tool_calls": [{"name": "shop__list_items", "arguments": {"category": "books", "count": 2}}]},
        {"tool_calls": [{"name": "shop__get_item", "arguments": {"id": "boo-1"}}]},
        {"text": "The second book costs 31."},
        {"text": "Solver report: still 31."},  # the frozen plan's solver finish, when it runs
    )
    child = chat()
    send_message(child, "What does the second of the books cost?")
    child.expect_exact("The second book costs 31.")
    assert len(take_calls(log)) == 2
    send_message(child, "/freeze second_book")
    path = workspace / "plans" / "second_book.yaml"
    child.expect_exact("saved to")
    child.expect_exact("E0  shop__list_items")
    child.expect_exact('E1  shop__get_item {"id":"{{E0.items.1.id}}"}')
    child.expect_exact('category (string, default "books")')
    child.expect_exact("? Run it once now to check it?")
    child.expect_exact("answer>")
    child.sendline("yes")
    child.expect_exact("Solver report: still 31.")
    # a second /freeze under the same name is refused, and says how to overwrite
    send_message(child, "/freeze second_book")
    child.expect_exact("already exists")
    child.expect_exact("--force overwrites it")
    out = leave(child)
    assert "→ plan__second_book" in out and "✓ plan 'second_book' ran" in out
    assert take_calls(log) == [
        {"tool": "list_items", "args": {"category": "books", "count": 2}},
        {"tool": "get_item", "args": {"id": "boo-1"}},
    ]
    plan = load_plan_text(path.read_text(), str(path))
    assert plan.finish == "solver" and [s.tool_name for s in plan.steps] == [
        "shop__list_items",
        "shop__get_item",
    ]
    solver_request = model_server.requests[3]
    assert "What does the second of the books cost?" in json.dumps(solver_request["messages"])


def test_a_map_body_reads_earlier_results_and_an_ask_with_a_form_keeps_its_schema() -> None:
    form = {"type": "object", "required": ["shelf"], "properties": {"shelf": {"type": "string"}}}
    doc, _ = plan_of(
        ("user", "restock"),
        (
            "round",
            [
                (
                    "ask_user",
                    {"question": "Which shelf?", "schema": form},
                    {"answer": {"shelf": "top-shelf"}, "answered": True},
                )
            ],
        ),
        ("round", [("s__list", {}, {"store": "north-store", "ids": ["x-10", "x-11"]})]),
        (
            "round",
            [
                ("s__stock", {"id": "x-11", "store": "north-store", "shelf": "top-shelf"}, {"n": 4}),
                ("s__stock", {"id": "x-10", "store": "north-store", "shelf": "top-shelf"}, {"n": 5}),
            ],
        ),
    )
    ask, _, mapped = doc["steps"]
    assert ask["input"]["output_schema"] == form
    assert ask["input"]["default"] == {"shelf": "top-shelf"}
    assert mapped["input"]["do"]["input"] == {
        "id": "{{item}}",
        "store": "{{E1.store}}",
        "shelf": "{{E0.answer.shelf}}",
    }


# --- the question with the inputs (issue 21) ---------------------------------------------------


def test_the_question_names_every_input_longest_value_first_and_numbers_as_whole_tokens() -> None:
    doc, _ = plan_of(
        ("user", "compare Asia/Tokyo with Tokyo-Bay in 2024, not 20245: top 15 of 150"),
        ("round", [("s__a", {"zone": "Asia/Tokyo", "place": "Tokyo-Bay", "year": 2024, "top": 15}, {})]),
        ("round", [("s__b", {"city": "Tokyo-Bay", "n": 150}, {})]),
        ("answer", "done"),
    )
    assert doc["solver"]["query_to_answer"] == (
        "compare {{input.zone}} with {{input.place}} in {{input.year}}, not 20245: top {{input.top}} of {{input.n}}"
    )
    # a value that became two inputs (named after two keys) is the first one's in the question
    assert doc["steps"][1]["input"] == {"city": "{{input.city}}", "n": "{{input.n}}"}
    assert doc["name"] == "Compare Asia/Tokyo with Tokyo-Bay in 2024, not 20245"
    assert doc["description"] == (
        'Answers "compare <zone> with <place> in <year>, not 20245: top <top> of <n>" from s__a and s__b. '
        "Inputs: zone, place, year, top, city, n."
    )


def test_the_name_is_at_most_60_characters_cut_after_a_word_else_the_tools() -> None:
    long = "please look up every open issue labelled regression in the payments service and summarise them"
    doc, _ = plan_of(("user", long), ("round", [("s__issues", {"label": "regression"}, {})]))
    assert doc["name"] == "Please look up every open issue labelled regression in the…"
    assert len(doc["name"]) <= 60 and long.startswith(doc["name"][:-1].lower())
    doc, _ = plan_of(("user", "go"), ("round", [("s__a", {}, {}), ("s__b", {}, {}), ("s__a", {"x": 5}, {})]))
    assert doc["name"] == "Calls s__a and s__b"
    assert doc["description"] == 'Returns what s__a (×2) and s__b give for "go".'
    url = "https://example.com/" + "a" * 80
    doc, _ = plan_of(("user", url), ("round", [("s__fetch", {"url": url}, {})]))
    assert doc["name"] == "Calls s__fetch"  # one word longer than a name: never cut inside it


def test_a_secret_typed_in_the_chat_is_never_a_name_identifier_description_or_default() -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    items = (
        ("user", f"list my repos with token {token} please, and my password hunter2hunter"),
        ("round", [("gh__repos", {"auth": token, "password": "hunter2hunter", "owner": "my repos"}, {})]),
        ("round", [("gh__login", {"header": f"Bearer {token}"}, {})]),
        ("answer", "You have 3 repositories."),
    )
    frozen = freeze(make_events(*items), thread_id="abc123")
    assert token not in frozen.text and "hunter2hunter" not in frozen.text
    doc = yaml.safe_load(frozen.text)
    assert doc["identifier"] == "list_my_repos_with_token_please_and_my"
    assert doc["name"] == "List my repos with token please, and my password"
    assert doc["exemplars"] == ["list my repos with token please, and my password"]
    assert doc["steps"][0]["input"] == {
        "auth": "{{input.auth}}",
        "password": "{{input.password}}",
        "owner": "{{input.owner}}",
    }
    assert doc["input_schema"]["properties"]["auth"] == {"type": "string"}  # no default
    assert doc["input_schema"]["required"] == ["auth", "password", "header"]
    assert doc["solver"]["query_to_answer"] == (
        "list {{input.owner}} with token [redacted] please, and my password [redacted]"
    )
    assert doc["description"] == (
        'Answers "list <owner> with token <auth> please, and my password <password>" from gh__repos and '
        "gh__login. Inputs: auth (required), password (required), owner, header (required)."
    )
    assert "give auth, password, header with --input" in frozen.text
    assert frozen.input_lines()[0] == "auth (string, required: a secret, not kept)"


# --- the question with the inputs: the real time server, the real commands -----------------------


def time_server(workspace: Path) -> None:
    """mcp-server-time (installed with graphchat) as `time`."""
    import sys

    write_servers(
        workspace,
        {"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}},
    )


def sent_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


CLOCKS = "what time is it in Asia/Tokyo and America/Lima? which one is earlier?"


def test_a_frozen_chat_asks_the_solver_the_new_question_with_a_short_name_and_a_description_of_its_inputs(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    time_server(workspace)
    model_server.push(
        {
            "tool_calls": [
                {"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}},
                {"name": "time__get_current_time", "arguments": {"timezone": "America/Lima"}},
            ]
        },
        {"text": "Lima is 14 hours behind Tokyo."},
        {"text": "Paris is 3.5 hours behind Kolkata."},  # the frozen plan's solver, when it runs
    )
    asked = cli("ask", CLOCKS, env=model_server.env())
    assert asked.returncode == 0, asked.stderr

    path, plan = frozen_plan(cli("plan", "freeze"))
    assert plan["name"] == "What time is it in Asia/Tokyo and America/Lima"  # the first clause, ≤ 60
    assert plan["description"] == (
        'Answers "what time is it in <timezone> and <timezone_2>? which one is earlier?" '
        "from time__get_current_time (×2). Inputs: timezone, timezone_2."
    )
    assert plan["solver"]["query_to_answer"] == (
        "what time is it in {{input.timezone}} and {{input.timezone_2}}? which one is earlier?"
    )
    assert plan["input_schema"]["properties"] == {
        "timezone": {"type": "string", "default": "Asia/Tokyo"},
        "timezone_2": {"type": "string", "default": "America/Lima"},
    }
    assert "Nothing was left out" in path.read_text()

    ran = cli(
        "plan", "run", plan["identifier"], "--input", "timezone=Europe/Paris", "--input", "timezone_2=Asia/Kolkata",
        env=model_server.env(),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "Paris is 3.5 hours behind Kolkata."
    assert "warning" not in ran.stderr
    solver = sent_text(model_server.requests[-1])
    assert "what time is it in Europe/Paris and Asia/Kolkata? which one is earlier?" in solver
    assert "Europe/Paris" in solver.split("which one is earlier?", 1)[1]  # the data is Paris's too
    assert "Asia/Tokyo" not in solver and "America/Lima" not in solver

    # the plan as the model and the planner see it: plan__<id>, described in terms of its inputs
    shown = cli("tools", "show", f"plan__{plan['identifier']}")
    assert shown.returncode == 0, shown.stderr
    assert "<timezone> and <timezone_2>" in shown.stdout
    # deterministic: the same bytes again, and no model call
    before = len(model_server.requests)
    again = cli("plan", "freeze", "--stdout")
    assert again.returncode == 0 and again.stdout.encode() == path.read_bytes()
    assert len(model_server.requests) == before


def test_a_value_typed_in_another_form_is_named_and_a_plan_without_inputs_warns_about_input(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    time_server(workspace)
    model_server.push(
        {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
        {"text": "It is 21:00 in Tokyo."},
    )
    asked = cli("ask", "what time is it in Tokyo right now?", env=model_server.env())
    assert asked.returncode == 0, asked.stderr

    froze = cli("plan", "freeze", "--finish", "output")
    path, plan = frozen_plan(froze)
    note = "'Tokyo' was typed, the tool took 'Asia/Tokyo': left as a literal"
    assert f"  note: E0 timezone: {note}\n" in froze.stderr
    text = path.read_text()
    assert f"#   - E0 timezone: {note}\n" in text  # in the header, which no longer says nothing was left out
    assert "Nothing was left out" not in text
    assert f"timezone: Asia/Tokyo  # {note}\n" in text
    assert "input_schema" not in plan and plan["steps"][0]["input"] == {"timezone": "Asia/Tokyo"}
    assert plan["name"] == "What time is it in Tokyo right now"

    ran = cli("plan", "run", plan["identifier"], "--input", "timezone=Europe/Paris")
    assert ran.returncode == 0, ran.stderr  # exit unchanged: graph passes the key through
    assert (
        f"warning: plan '{plan['identifier']}' (it has no input_schema) never reads input 'timezone'; "
        "the inputs it reads: none (ignored)\n" in ran.stderr
    )
    assert json.loads(ran.stdout)["E0"]["timezone"] == "Asia/Tokyo"
    quiet = cli("plan", "run", plan["identifier"])
    assert quiet.returncode == 0 and "warning" not in quiet.stderr


def test_a_value_inside_a_word_of_the_question_stays_as_typed() -> None:
    doc, _ = plan_of(
        ("user", "in the bookstore, list the books"),
        ("round", [("s__list", {"category": "books"}, {})]),
        ("answer", "Three books."),
    )
    assert doc["steps"][0]["input"] == {"category": "{{input.category}}"}
    assert doc["solver"]["query_to_answer"] == "in the bookstore, list the {{input.category}}"
