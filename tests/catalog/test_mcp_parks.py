"""A server's own question during a tool call, with nobody to answer, parks the run (issue 25:
sampling; issue 19: elicitation): `requests` shows the server's question, `permit`/`answer`
resume, the call is made again and the stored answer settles the same question. Through the
real command (in process), the scripted model and real MCP servers (server-everything for sampling, the
tools test server for elicitation); the counting tool before it is the shop's `get_item`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.catalog.test_mcp_features import SAMPLE, _tool_texts, needs_everything
from tests.catalog.test_mcp_thirdparty import EVERYTHING
from tests.conftest import GraphchatRunner
from tests.runs.test_frames import CATALOG_SERVER, counts, waiting
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

SAMPLED = {"text": "autumn moon rises", "usage": {"prompt_tokens": 30, "completion_tokens": 7}}
BY_SERVER = {
    "server": "everything",
    "calls": 1,
    "input_tokens": 30,
    "output_tokens": 7,
    "cache_read_input_tokens": 0,
    "cache_creation_input_tokens": 0,
}


@pytest.fixture
def servers(workspace: Path) -> Path:
    write_servers(
        workspace,
        {
            "shop": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(workspace / "calls.jsonl")}),
            "everything": {"command": str(EVERYTHING), "args": ["stdio"]},
            "tools": stdio(),
        },
    )
    # the tools themselves are allowed: what waits is the server's own question
    (workspace / "graphchat.yaml").write_text("approvals:\n  allow: [everything__trigger-sampling-request]\n")
    return workspace


def plan(workspace: Path, call: str) -> None:
    (workspace / "plans" / "server_asks.yaml").write_text(
        "identifier: server_asks\nname: Server asks\ndescription: count, then a call whose server asks\n"
        "steps:\n"
        "  - id: T1\n    tool_name: shop__get_item\n    input: {id: before-0}\n"
        f"  - id: S\n{call}"
        "output:\n  said: '{{S}}'\n"
    )


SAMPLING_STEP = (
    "    tool_name: everything__trigger-sampling-request\n    input: {prompt: a haiku, maxTokens: 42}\n"
)
ELICIT_STEP = "    tool_name: tools__confirm_push\n    input: {name: main}\n"


@needs_everything
def test_headless_plan_sampling_parks_and_permit_serves_it_with_the_scripted_model(
    cli: GraphchatRunner, servers: Path, model_server: ScriptedModelServer
) -> None:
    plan(servers, SAMPLING_STEP)
    run = cli("plan", "run", "server_asks", "--json", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert model_server.requests == []  # nothing was sampled yet
    listed = cli("requests")
    assert "Allow MCP server everything to use your model (sampling, at most 42 tokens)" in listed.stdout
    assert "server: everything\n    during: everything__trigger-sampling-request\n" in listed.stdout
    assert (
        "at most: 42 tokens" in listed.stdout
        and "user: Resource trigger-sampling-request context: a haiku" in listed.stdout
    )
    (request,) = waiting(cli)
    assert request["kind"] == "approval" and request["source"]["server"] == "everything"
    assert request["source"]["step"] == "S"

    model_server.push(SAMPLED)
    done = cli("permit", request["id"], env=model_server.env())
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert "autumn moon rises" in json.dumps(body["output"]), body
    assert body["usage"]["by_server"] == [BY_SERVER]
    assert len(model_server.requests) == 1 and "a haiku" in json.dumps(model_server.requests[0]["messages"])
    assert counts(servers) == {"before-0": 1}  # the step before ran once


@needs_everything
def test_a_denied_sampling_request_is_refused_to_the_server(
    cli: GraphchatRunner, servers: Path, model_server: ScriptedModelServer
) -> None:
    plan(servers, SAMPLING_STEP)
    assert cli("plan", "run", "server_asks", "--json", env=model_server.env()).returncode == 5
    (request,) = waiting(cli)
    done = cli("deny", request["id"], "--reason", "not my budget", env=model_server.env())
    assert model_server.requests == []  # the model was never asked
    # the server got the refusal, and its tool failed with it: the plan fails at that step
    assert done.returncode == 1, done.stderr
    refused = "graphchat refused the sampling request of MCP server 'everything'"
    assert f"{refused}: the user refused the sampling request (not my budget)" in done.stderr
    assert counts(servers) == {"before-0": 1}


def test_headless_plan_elicitation_parks_and_the_answer_reaches_the_server(
    cli: GraphchatRunner, servers: Path
) -> None:
    plan(servers, ELICIT_STEP)
    run = cli("plan", "run", "server_asks", "--json")
    assert run.returncode == 5, run.stderr
    listed = cli("requests")
    assert "[tools · confirm_push] Push main?" in listed.stdout, listed.stdout
    assert "server: tools" in listed.stdout
    (request,) = waiting(cli)
    assert request["kind"] == "question" and request["source"]["step"] == "S"

    done = cli("answer", request["id"], "true")
    assert done.returncode == 0, done.stderr
    assert "pushed=True main" in json.dumps(json.loads(done.stdout)["output"])
    assert counts(servers) == {"before-0": 1}  # the step before ran once


def test_under_no_park_the_servers_question_is_cancelled_as_before(
    cli: GraphchatRunner, servers: Path
) -> None:
    plan(servers, ELICIT_STEP)
    run = cli("plan", "run", "server_asks", "--no-park", "--json")
    assert run.returncode == 0, run.stderr
    assert "not pushed (cancel)" in json.dumps(json.loads(run.stdout)["output"])
    assert waiting(cli) == []


# --- a headless `ask`: the turn parks at the call; resumed, the call is made again ---------------


@needs_everything
def test_headless_ask_sampling_parks_and_permit_gives_the_sampled_text_to_the_tool_result(
    cli: GraphchatRunner, servers: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"tool_calls": [SAMPLE]})
    run = cli("ask", "sample", "--json", env=model_server.env())
    assert run.returncode == 5, run.stderr
    assert len(model_server.requests) == 1  # the model's turn only: nothing was sampled
    (request,) = waiting(cli)
    assert request["kind"] == "approval" and request["source"]["server"] == "everything"
    assert "server: everything" in cli("requests").stdout

    model_server.push(SAMPLED, {"text": "The server wrote a haiku."})
    done = cli("permit", request["id"], env=model_server.env())
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["content"] == "The server wrote a haiku."
    assert body["usage"]["by_server"] == {"everything": {"calls": 1, "input_tokens": 30, "output_tokens": 7}}
    sampling, answer = model_server.requests[1:]
    assert "a haiku" in json.dumps(sampling["messages"])
    assert "autumn moon rises" in _tool_texts(answer)[0]


@needs_everything
def test_permitting_the_tool_does_not_permit_the_sampling_it_asks_for(
    cli: GraphchatRunner, servers: Path, model_server: ScriptedModelServer
) -> None:
    """Sampling runs only on a person's yes to the sampling itself (issue 25): a permit of the
    tool call that asks for it is not one — the resumed call parks again, on the sampling."""
    (servers / "graphchat.yaml").write_text("approvals:\n  mode: ask\n")  # the tool itself asks
    model_server.push({"tool_calls": [SAMPLE]})
    run = cli("ask", "sample", "--json", env=model_server.env())
    assert run.returncode == 5, run.stderr
    (tool,) = waiting(cli)
    assert tool["kind"] == "approval" and not (tool.get("source") or {}).get("park_as"), tool

    again = cli("permit", tool["id"], env=model_server.env())
    assert again.returncode == 5, again.stderr  # the call ran, and its server's sampling waits
    assert len(model_server.requests) == 1  # nothing was sampled on the tool's permit
    (sampling,) = waiting(cli)
    assert sampling["id"] != tool["id"] and sampling["source"]["server"] == "everything"

    model_server.push(SAMPLED, {"text": "The server wrote a haiku."})
    done = cli("permit", sampling["id"], env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"] == "The server wrote a haiku."
    assert "autumn moon rises" in _tool_texts(model_server.requests[-1])[0]


def test_headless_ask_elicitation_parks_and_the_answer_reaches_the_server(
    cli: GraphchatRunner, servers: Path, model_server: ScriptedModelServer
) -> None:
    push = {"name": "tools__confirm_push", "arguments": {"name": "main"}}
    model_server.push({"tool_calls": [push]})
    run = cli("ask", "push main", env=model_server.env())
    assert run.returncode == 5, run.stderr
    (request,) = waiting(cli)
    assert request["question"] == "[tools · confirm_push] Push main?"

    model_server.push({"text": "Pushed."})
    done = cli("answer", request["id"], "true", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "pushed=True main" in _tool_texts(model_server.requests[-1])[0]

    model_server.push({"tool_calls": [push]}, {"text": "Not pushed."})
    done = cli("ask", "push main", "--no-park", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "not pushed (cancel)" in _tool_texts(model_server.requests[-1])[0]


ASKING_SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "asking_server.py")


def test_a_server_that_asks_twice_in_one_call_parks_twice_and_gets_each_answer(
    cli: GraphchatRunner, workspace: Path
) -> None:
    log = str(workspace / "calls.jsonl")
    write_servers(
        workspace,
        {
            "shop": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": log}),
            "asks": stdio(ASKING_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": log}),
        },
    )
    plan(workspace, "    tool_name: asks__push_and_tag\n    input: {name: main}\n")
    assert cli("plan", "run", "server_asks", "--json").returncode == 5
    (first,) = waiting(cli)
    assert first["question"] == "[asks · push_and_tag] Push main?"
    again = cli("answer", first["id"], "true")
    assert again.returncode == 5, again.stderr  # the call was made again: its second question
    (second,) = waiting(cli)
    assert second["question"] == "[asks · push_and_tag] Tag main?"
    done = cli("answer", second["id"], "false")
    assert done.returncode == 0, done.stderr
    assert "pushed=True tagged=False main" in json.dumps(json.loads(done.stdout)["output"])
    # the step before ran once; the server's tool started once a park (its work repeats)
    assert counts(workspace) == {"before-0": 1, "main": 3}
