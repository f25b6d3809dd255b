"""`graphchat mcp serve` as a real stdio server, driven by the mcp SDK's own Client."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ElicitResult

from tests.conftest import clean_env
from tests.servers.support import stdio, write_servers

pytestmark = pytest.mark.process  # `graphchat mcp serve` is a process an MCP client talks to over its stdio

NUMBERS = """identifier: numbers
name: Numbers
description: The numbers above a limit.
exemplars: ["numbers above 2"]
input_schema:
  type: object
  required: [limit, label]
  properties:
    limit: {type: integer}
    label: {type: string}
steps:
  - id: E0
    tool_name: filter
    input: {over: [1, 2, 3, 4], where: {value: "{{item}}", op: gt, to: "{{input.limit}}"}}
output:
  label: "{{input.label}}"
  big: "{{E0.items}}"
"""

RELEASE = """identifier: release_%(when)s
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
      when_unanswered: %(when)s
%(default)soutput:
  asked: "{{E0}}"
"""

SLOW = """identifier: slow_echo
name: Slow echo
description: Echo a label through the test MCP server.
requires_servers: [t]
input_schema:
  type: object
  required: [label]
  properties:
    label: {type: string}
steps:
  - id: E0
    tool_name: t__slow
    input: {seconds: 0, label: "{{input.label}}"}
output:
  said: "{{E0.result}}"
"""

TOUCH = """identifier: touch_it
name: Touch
description: Create a file through the test MCP server (a destructive tool).
requires_servers: [t]
input_schema:
  type: object
  required: [path]
  properties:
    path: {type: string}
steps:
  - id: E0
    tool_name: t__touch
    input: {path: "{{input.path}}"}
output:
  done: "{{E0}}"
"""


def make_workspace(workspace: Path) -> Path:
    plans = workspace / "plans"
    (plans / "numbers.yaml").write_text(NUMBERS)
    (plans / "release_fail.yaml").write_text(RELEASE % {"when": "fail", "default": ""})
    default = "      default: {channel: stable}\n"
    (plans / "release_default.yaml").write_text(RELEASE % {"when": "default", "default": default})
    return workspace


def server_params(workspace: Path, env: dict[str, str] | None = None) -> StdioServerParameters:
    env = clean_env(env, home=workspace.parent)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "graphchat", "--home", str(workspace), "mcp", "serve"],
        env=env,
        cwd=str(workspace),
    )


Callback = Callable[[Any, Any], Awaitable[ElicitResult]]


@asynccontextmanager
async def serve(  # type: ignore[no-untyped-def]
    workspace: Path,
    *,
    mode: str = "legacy",
    elicit: Callback | None = None,
    env: dict[str, str] | None = None,
):
    with open(workspace.parent / "serve.err", "a") as errlog:
        transport = stdio_client(server_params(workspace, env), errlog=errlog)
        async with Client(transport, mode=mode, elicitation_callback=elicit) as client:  # type: ignore[arg-type]
            yield client


def answering(*results: ElicitResult) -> tuple[Callback, list[Any]]:
    """An elicitation callback giving `results` in turn; it records what it was asked."""
    seen: list[Any] = []

    async def callback(ctx: Any, params: Any) -> ElicitResult:
        seen.append(params)
        return results[len(seen) - 1]

    return callback, seen


def text_of(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def test_plans_are_listed_as_plan_tools_and_an_output_plan_returns_its_json(workspace: Path) -> None:
    make_workspace(workspace)
    async with serve(workspace) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools if t.name.startswith("plan_")}
        assert set(tools) == {"plan_numbers", "plan_release_fail", "plan_release_default"}
        numbers = tools["plan_numbers"]
        assert numbers.input_schema["required"] == ["limit", "label"]
        assert (
            numbers.description is not None and "Example requests:\n- numbers above 2" in numbers.description
        )
        assert numbers.annotations is not None and numbers.annotations.read_only_hint is True

        result = await client.call_tool("plan_numbers", {"limit": 2, "label": "x"})
        assert not result.is_error, text_of(result)
        assert result.structured_content["output"] == {"label": "x", "big": [3, 4]}
        assert json.loads(text_of(result)) == result.structured_content
        # graph's result body (mcp_server/run.rs), key for key
        assert result.structured_content == {
            "answer": None,
            "output": {"label": "x", "big": [3, 4]},
            "plan": "numbers",
            "steps_executed": 1,
            "exit": None,
            "usage": None,
        }

        # the list is rebuilt per request: a plan added while serving shows up
        (workspace / "plans" / "more.yaml").write_text(
            NUMBERS.replace("identifier: numbers", "identifier: more")
        )
        again = {t.name for t in (await client.list_tools()).tools}
        assert "plan_more" in again


async def test_missing_inputs_are_an_error_result_listing_every_problem(workspace: Path) -> None:
    make_workspace(workspace)
    async with serve(workspace) as client:
        result = await client.call_tool("plan_numbers", {})
        with pytest.raises(MCPError) as unknown:  # as graph: a JSON-RPC error, not an isError result
            await client.call_tool("plan_nope", {})
    assert result.is_error
    text = text_of(result)
    assert "plan_numbers" in text and "plan__numbers" not in text
    assert "'limit' is a required property" in text and "'label' is a required property" in text
    assert result.structured_content is not None
    assert len(result.structured_content["problems"]) == 2
    assert unknown.value.code == INVALID_PARAMS and unknown.value.message == "unknown tool 'plan_nope'"


async def test_an_ask_step_is_answered_through_elicitation_on_a_legacy_session(workspace: Path) -> None:
    make_workspace(workspace)
    callback, seen = answering(
        ElicitResult(action="accept", content={"channel": "beta", "count": 2}),
        ElicitResult(action="decline"),
        ElicitResult(action="cancel"),
    )
    async with serve(workspace, elicit=callback) as client:
        assert client.protocol_version == "2025-11-25"
        accepted = await client.call_tool("plan_release_fail", {})
        declined = await client.call_tool("plan_release_fail", {})
        cancelled = await client.call_tool("plan_release_default", {})
    assert seen[0].message == "Which channel?"
    assert seen[0].requested_schema["properties"]["channel"]["enum"] == ["stable", "beta", "nightly"]
    assert not accepted.is_error, text_of(accepted)
    assert accepted.structured_content["output"] == {
        "asked": {"answer": {"channel": "beta", "count": 2}, "answered": True}
    }
    assert declined.is_error and "not answered (declined)" in text_of(declined)
    assert cancelled.structured_content["output"] == {
        "asked": {"answer": {"channel": "stable"}, "answered": False, "declined": True, "reason": "declined"}
    }


async def test_without_the_elicitation_capability_a_question_is_unavailable(workspace: Path) -> None:
    make_workspace(workspace)
    async with serve(workspace) as client:  # no callback: no capability declared
        defaulted = await client.call_tool("plan_release_default", {})
        parked = await client.call_tool("plan_release_fail", {})
    assert defaulted.structured_content["output"] == {
        "asked": {"answer": {"channel": "stable"}, "answered": False, "reason": "unavailable"}
    }
    # no default settles it: the run waits for an answer (issue 19; test_serve_parks.py)
    assert not parked.is_error and parked.structured_content is not None
    assert parked.structured_content["parked"] is True


async def test_a_client_error_while_answering_is_unavailable(workspace: Path) -> None:
    make_workspace(workspace)

    async def broken(ctx: Any, params: Any) -> ElicitResult:
        raise RuntimeError("the client's form broke")

    async with serve(workspace, elicit=broken) as client:
        defaulted = await client.call_tool("plan_release_default", {})
    assert defaulted.structured_content is not None
    assert defaulted.structured_content["output"]["asked"]["reason"] == "unavailable"


async def test_a_client_that_never_answers_times_out_as_unavailable(workspace: Path) -> None:
    make_workspace(workspace)
    never = asyncio.Event()

    async def silent(ctx: Any, params: Any) -> ElicitResult:
        await never.wait()  # the person walked away
        return ElicitResult(action="cancel")

    async with serve(workspace, elicit=silent, env={"GRAPHCHAT_ELICIT_TIMEOUT": "0.3"}) as client:
        defaulted = await client.call_tool("plan_release_default", {})
    assert defaulted.structured_content is not None
    assert defaulted.structured_content["output"]["asked"]["reason"] == "unavailable"


async def test_the_default_protocol_answers_through_input_required_round_trips(workspace: Path) -> None:
    make_workspace(workspace)
    callback, seen = answering(
        ElicitResult(action="accept", content={"channel": "nightly"}),
        ElicitResult(action="decline"),
    )
    async with serve(workspace, mode="auto", elicit=callback) as client:
        assert client.protocol_version == "2026-07-28"  # no server push here: input round trips
        accepted = await client.call_tool("plan_release_fail", {})
        declined = await client.call_tool("plan_release_default", {})
        plain = await client.call_tool("plan_numbers", {"limit": 3, "label": "y"})
    assert len(seen) == 2
    assert accepted.structured_content["output"] == {
        "asked": {"answer": {"channel": "nightly"}, "answered": True}
    }
    assert declined.structured_content is not None
    assert declined.structured_content["output"]["asked"]["reason"] == "declined"
    assert plain.structured_content["output"] == {"label": "y", "big": [4]}


async def test_default_protocol_without_the_capability_is_unavailable(workspace: Path) -> None:
    make_workspace(workspace)
    async with serve(workspace, mode="auto") as client:
        defaulted = await client.call_tool("plan_release_default", {})
    assert defaulted.structured_content is not None
    assert defaulted.structured_content["output"]["asked"]["reason"] == "unavailable"


async def test_a_plan_calling_mcp_tools_runs_and_its_approval_is_elicited(workspace: Path) -> None:
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "slow_echo.yaml").write_text(SLOW)
    (workspace / "plans" / "touch_it.yaml").write_text(TOUCH)
    target = workspace / "touched.txt"
    callback, seen = answering(ElicitResult(action="accept", content={"answer": "once"}))
    async with serve(workspace, elicit=callback) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("plan_slow_echo", {"label": "hi"})
        touched = await client.call_tool("plan_touch_it", {"path": str(target)})
    assert tools["plan_touch_it"].annotations is not None
    assert tools["plan_touch_it"].annotations.read_only_hint is False
    assert not result.is_error, text_of(result)
    assert result.structured_content["output"] == {"said": "hi: slept 0.0s"}
    # the client's call of the plan is its consent; the destructive tool inside is asked about
    assert not touched.is_error, text_of(touched)
    assert target.exists()
    assert len(seen) == 1 and "t__touch" in seen[0].message
    assert seen[0].requested_schema["properties"]["answer"]["enum"] == ["once", "always", "refuse"]


async def test_without_anyone_to_approve_a_destructive_tool_is_refused(workspace: Path) -> None:
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "touch_it.yaml").write_text(TOUCH)
    target = workspace / "touched.txt"
    async with serve(workspace) as client:
        refused = await client.call_tool("plan_touch_it", {"path": str(target)})
    assert refused.is_error
    assert "t__touch was not run" in text_of(refused)
    assert not target.exists()


def test_stdout_carries_nothing_but_json_rpc(workspace: Path) -> None:
    """A raw pipe client: every stdout line parses as a JSON-RPC message, events go to stderr."""
    make_workspace(workspace)
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw"}},
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "plan_numbers", "arguments": {"limit": 1, "label": "z"}},
        },
    ]
    params = server_params(workspace)
    proc = subprocess.Popen(
        [params.command, *params.args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**params.env, "GRAPHCHAT_EVENTS": "jsonl"} if params.env else None,
        cwd=params.cwd,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[int, Any] = {}
    for message in lines:
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()
        if "id" in message:  # wait for this reply before the next request (EOF ends the server)
            reply = json.loads(proc.stdout.readline())
            assert reply["jsonrpc"] == "2.0"
            replies[reply["id"]] = reply
    proc.stdin.close()
    rest = proc.stdout.read()
    err = proc.stderr.read() if proc.stderr else ""
    assert proc.wait(timeout=10) == 0, err
    assert rest == ""
    assert replies[3]["result"]["structuredContent"]["output"] == {"label": "z", "big": [2, 3, 4]}
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any(e["event"] == "tool_started" and e["tool"] == "plan__numbers" for e in events)


# --- graph's authoring tools (issue 22, build 3) ------------------------------------------------


async def test_an_mcp_client_edits_a_plan_with_the_authoring_tools_and_hears_list_changed(
    workspace: Path,
) -> None:
    from mcp.types import ToolListChangedNotification

    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    params = server_params(workspace)
    with open(workspace.parent / "serve.err", "a") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog), mode="legacy", message_handler=on_message
        ) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"graph_plan_new", "graph_plan_step_add", "graph_tools_list", "graph_tools_test"} <= names
            tools_caps = client.server_capabilities.tools
            assert tools_caps is not None and tools_caps.list_changed is True

            made = await client.call_tool("graph_plan_new", {"identifier": "hello", "description": "say hi"})
            assert not made.is_error, text_of(made)
            assert made.structured_content["preExistingProblems"] == ["steps: the plan has no steps"]
            added = await client.call_tool(
                "graph_plan_step_add",
                {"target": "hello", "id": "E0", "tool": "builtin__reshape",
                 "input": {"shape": {"hi": "hello {{input.who}}"}}},
            )  # fmt: skip
            assert not added.is_error, text_of(added)
            out = await client.call_tool("graph_plan_set", {"target": "hello", "attribute": "output",
                                                            "value": {"said": "{{E0.hi}}"}})  # fmt: skip
            assert not out.is_error, text_of(out)
            await asyncio.sleep(0.2)
            assert len(heard) >= 3  # one tools/list_changed per accepted edit

            # the new plan is a tool of this very session; a run reports its steps as progress
            assert "plan_hello" in {t.name for t in (await client.list_tools()).tools}
            progress: list[tuple[float, Any, Any]] = []

            async def on_progress(done: float, total: Any, message: Any) -> None:
                progress.append((done, total, message))

            ran = await client.call_tool("plan_hello", {"who": "Ada"}, progress_callback=on_progress)
            assert ran.structured_content["output"] == {"said": "hello Ada"}
            assert progress == [(1.0, None, "step E0 (builtin__reshape) done")]

            # a plan file changed by someone else is announced too
            heard.clear()
            (workspace / "plans" / "other.yaml").write_text(
                NUMBERS.replace("identifier: numbers", "identifier: other")
            )
            for _ in range(50):
                if heard:
                    break
                await asyncio.sleep(0.1)
            assert heard, "no tools/list_changed after a plan file was added"
            assert "plan_other" in {t.name for t in (await client.list_tools()).tools}

            before = (workspace / "plans" / "hello.yaml").read_bytes()
            refused = await client.call_tool("graph_plan_step_rm", {"target": "hello", "id": "E0"})
            assert refused.is_error and refused.structured_content["ok"] is False
            assert (workspace / "plans" / "hello.yaml").read_bytes() == before
            checked = await client.call_tool("graph_plan_validate", {"target": "hello"})
            assert checked.structured_content["ok"] is True

            listed = await client.call_tool("graph_tools_list", {})
            sources = {t["source"] for t in listed.structured_content["tools"]}
            assert "(control)" in sources and listed.structured_content["count"] == len(
                listed.structured_content["tools"]
            )
            shown = await client.call_tool("graph_tools_show", {"name": "map"})  # as `tools show --json`
            assert (
                shown.structured_content["source"] == "(control)" and shown.structured_content["inputSchema"]
            )
            reshape = await client.call_tool("graph_tools_show", {"name": "builtin__reshape"})
            assert set(reshape.structured_content) == {
                "name", "source", "description", "readOnly", "inputSchema", "outputSchema", "outputExample"
            }  # fmt: skip
            probe = await client.call_tool("graph_tools_test", {"name": "builtin__reshape",
                                                                "input": {"shape": {"a": 1}}})  # fmt: skip
            assert probe.structured_content == {
                "tool": "builtin__reshape",
                "isError": False,
                "result": {"a": 1},
            }


GATE = """identifier: gate
name: Gate
description: Refuse an empty list.
input_schema:
  type: object
  properties:
    items: {type: array}
steps:
  - id: E0
    tool_name: exit
    input:
      when: {value: "{{input.items}}", op: empty}
      status: error
      message: no rows found
output:
  items: "{{input.items}}"
"""


async def test_a_fired_error_exit_is_an_error_result_with_graphs_body_and_the_exit_step(
    workspace: Path,
) -> None:
    (workspace / "plans" / "gate.yaml").write_text(GATE)
    async with serve(workspace) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        refused = await client.call_tool("plan_gate", {"items": []})
        passed = await client.call_tool("plan_gate", {"items": [1]})
    assert listed["plan_gate"].input_schema["properties"] == {"items": {"type": "array"}}
    assert refused.is_error
    assert refused.structured_content == {
        "answer": "no rows found",
        "output": None,
        "plan": "gate",
        "steps_executed": 0,  # as graph: a fired top-level exit counts 0
        "exit": {"status": "error", "message": "no rows found", "reason": None, "output": None, "step": "E0"},
        "usage": None,
    }
    assert json.loads(text_of(refused)) == refused.structured_content
    assert not passed.is_error and passed.structured_content["exit"] is None
    assert passed.structured_content["output"] == {"items": [1]}
