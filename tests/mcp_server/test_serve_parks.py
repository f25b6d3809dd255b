"""Issue 19, build 5: `mcp serve` parks a plan whose client cannot elicit, and answers it later.

A real MCP client (the SDK's Client over stdio, no elicitation callback) calls a plan whose
question nobody can answer: the result says the run waits (not an error). `graphchat_requests`
lists the request as `graphchat requests --json` does; `graphchat_answer`, in a NEW server
process, resumes the run and returns the plan's output. The counting step before the question
ran once (its server logs every call)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GraphchatRunner, run_states
from tests.mcp_server.test_serve import serve, text_of
from tests.servers.support import SERVERS, stdio, write_servers

pytestmark = pytest.mark.process  # `graphchat mcp serve` is a process an MCP client talks to over its stdio

SHIP = """identifier: ship
name: Ship
description: Look an item up, ask which channel, look another up.
steps:
  - id: E0
    tool_name: c__get_item
    input: {id: "a-1"}
  - id: E1
    tool_name: ask
    input:
      prompt: Which channel?
      output_schema:
        type: object
        required: [channel]
        properties:
          channel: {enum: [stable, beta]}
  - id: E2
    tool_name: c__get_item
    input: {id: "b-2"}
output:
  channel: "{{E1.answer.channel}}"
  first: "{{E0.id}}"
  second: "{{E2.id}}"
"""


def make_workspace(workspace: Path) -> Path:
    log = workspace.parent / "calls.jsonl"
    server = stdio(str(SERVERS / "catalog_server.py"), env={"GRAPHCHAT_TEST_CALL_LOG": str(log)})
    write_servers(workspace, {"c": server})
    (workspace / "plans" / "ship.yaml").write_text(SHIP)
    return log


def calls(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_a_parked_plan_is_answered_from_a_new_server_process_and_its_first_step_ran_once(
    workspace: Path, cli: GraphchatRunner
) -> None:
    log = make_workspace(workspace)

    async def first() -> tuple[str, Any]:
        async with serve(workspace) as client:  # no elicitation callback: nobody to ask here
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"graphchat_requests", "graphchat_answer"} <= names
            parked = await client.call_tool("plan_ship", {})
            assert not parked.is_error, text_of(parked)
            content = parked.structured_content
            assert content is not None and content["parked"] is True
            (request,) = content["requests"]
            assert request["question"] == "Which channel?" and request["kind"] == "question"
            line = text_of(parked)
            assert "\n" not in line and request["id"] in line and "Which channel?" in line
            return request["id"], await client.call_tool("graphchat_requests", {})

    request, listed = asyncio.run(first())
    assert [c["args"] for c in calls(log)] == [{"id": "a-1"}]

    # the same shape as `graphchat requests --json`
    requests = cli("requests", "--json")
    assert requests.returncode == 0, requests.stderr
    assert listed.structured_content == json.loads(requests.stdout)
    assert listed.structured_content is not None and listed.structured_content["count"] == 1

    async def later() -> tuple[Any, Any]:
        async with serve(workspace) as later:  # a new server process: the record is on disk
            done = await later.call_tool("graphchat_answer", {"id": request, "value": "beta"})
            assert not done.is_error, text_of(done)
            assert done.structured_content is not None  # graph's result body, as a plan_* call returns it
            assert done.structured_content["output"] == {"channel": "beta", "first": "a-1", "second": "b-2"}
            after = await later.call_tool("graphchat_requests", {})
            again = await later.call_tool("graphchat_answer", {"id": request, "value": "stable"})
            return after, again

    after, again = asyncio.run(later())
    assert [c["args"] for c in calls(log)] == [{"id": "a-1"}, {"id": "b-2"}]  # each step once
    assert after.structured_content == {"requests": [], "count": 0}
    assert again.is_error and f"request {request} was already answered" in text_of(again)
    assert run_states(workspace) == ["finished"]  # the run ended: kept as finished


def test_a_refused_answer_leaves_the_request_open_and_only_this_servers_runs_are_seen(
    workspace: Path, cli: GraphchatRunner
) -> None:
    make_workspace(workspace)
    from_cli = cli("plan", "run", "ship")  # a run a person started: not the client's
    assert from_cli.returncode == 5, from_cli.stderr
    cli_request = json.loads(cli("requests", "--json").stdout)["requests"][0]["id"]

    async def client_calls() -> tuple[str, Any, Any, Any, Any, Any, Any]:
        async with serve(workspace) as client:
            parked = await client.call_tool("plan_ship", {})
            assert parked.structured_content is not None
            (request,) = parked.structured_content["requests"]
            listed = await client.call_tool("graphchat_requests", {})
            wrong = await client.call_tool("graphchat_answer", {"id": request["id"], "value": "nightly"})
            foreign = await client.call_tool("graphchat_answer", {"id": cli_request, "value": "beta"})
            unknown = await client.call_tool("graphchat_answer", {"id": "abcdef", "value": "beta"})
            still = await client.call_tool("graphchat_requests", {})
            as_object = await client.call_tool(
                "graphchat_answer", {"id": request["id"], "value": {"channel": "stable"}}
            )
            return request["id"], listed, wrong, foreign, unknown, still, as_object

    request, listed, wrong, foreign, unknown, still, as_object = asyncio.run(client_calls())
    assert listed.structured_content is not None
    assert [r["id"] for r in listed.structured_content["requests"]] == [request]
    assert wrong.is_error and "answer refused" in text_of(wrong) and "stays open" in text_of(wrong)
    assert foreign.is_error and "not one of a plan this server started" in text_of(foreign)
    assert unknown.is_error and "no request 'abcdef'" in text_of(unknown)
    assert still.structured_content == listed.structured_content  # nothing was settled
    assert not as_object.is_error, text_of(as_object)
    assert (
        as_object.structured_content is not None
        and as_object.structured_content["output"]["channel"] == "stable"
    )
    # the person's own run still waits for the person
    assert json.loads(cli("requests", "--json").stdout)["count"] == 1


async def test_a_client_that_can_elicit_is_asked_and_nothing_parks(workspace: Path) -> None:
    from mcp.types import ElicitResult

    from tests.mcp_server.test_serve import answering

    make_workspace(workspace)
    callback, seen = answering(ElicitResult(action="accept", content={"channel": "stable"}))
    async with serve(workspace, elicit=callback) as client:
        done = await client.call_tool("plan_ship", {})
    assert done.structured_content is not None
    assert done.structured_content["output"] == {"channel": "stable", "first": "a-1", "second": "b-2"}
    assert len(seen) == 1
    assert not (workspace / "requests").exists() or not list((workspace / "requests").glob("*.json"))


async def test_graphchat_answer_never_settles_an_approval(workspace: Path) -> None:
    """The client's model must not approve its own call: an approval of a run this server
    started is listed, but only a person settles it (`graphchat permit`)."""
    from graphchat.runs.requests import RequestStore

    make_workspace(workspace)
    async with serve(workspace) as client:
        parked = await client.call_tool("plan_ship", {})
        assert parked.structured_content is not None
        (question,) = parked.structured_content["requests"]
        # an approval of the same run (as build 4 opens for a sensitive step)
        approval = RequestStore(workspace).open(
            kind="approval",
            mode="approval",
            question="Allow c__get_item (read) with these arguments?",
            source={"plan": "ship", "step": "E2", "tool": "c__get_item", "arguments": {"id": "b-2"}},
            run=question["run"],
            key="E2",
        )
        listed = await client.call_tool("graphchat_requests", {})
        refused = await client.call_tool("graphchat_answer", {"id": approval.id, "value": "once"})
    assert listed.structured_content is not None
    assert {r["id"] for r in listed.structured_content["requests"]} == {question["id"], approval.id}
    assert refused.is_error
    assert f"only a person settles it (graphchat permit {approval.id})" in text_of(refused)
    assert RequestStore(workspace).get(approval.id).state == "open"
