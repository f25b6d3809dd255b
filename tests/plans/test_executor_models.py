"""Model-backed plan parts through the real litellm path, against the scripted model server:
infer gates (judge role, structured), the agent step (shared loop, forced last round), the
solver finish (streamed), builtin__infer as a step, and the solver finish on `plan run`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphchat.catalog.base import CallContext, Catalog
from graphchat.catalog.native import NativeSource
from graphchat.cli.front import envelope
from graphchat.plans.executor import llm_factory_for, run_plan
from graphchat.workspace import load_settings
from tests.conftest import GraphchatRunner
from tests.plan_support import FakeTools, Recorder, plan_from_yaml
from tests.scripted_server import ScriptedModelServer

HEAD = "identifier: m\nname: M\ndescription: model plan\nsteps:\n"


@pytest.fixture
def settings(workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in model_server.env().items():
        monkeypatch.setenv(key, value)
    return load_settings(workspace)


async def run(text: str, settings: Any, inputs: Any = None, **kw: Any) -> Any:
    catalog = Catalog([FakeTools(), NativeSource(settings)])
    return await run_plan(
        plan_from_yaml(text),
        inputs,
        catalog=catalog,
        ctx=CallContext(),
        llm_factory=llm_factory_for(settings),
        **kw,
    )


async def test_infer_decide_asks_the_judge_once(settings: Any, model_server: ScriptedModelServer) -> None:
    model_server.push({"json": {"verdict": True, "reason": "it says blocked"}})
    text = HEAD + (
        "  - id: E1\n    tool_name: decide\n    input:\n      infer: 'Is this blocked? {{input.status}}'\n"
        "      then: {tool_name: t__echo, input: {escalate: true}}\n"
        "output:\n  d: '{{E1}}'\n"
    )
    rec = Recorder()
    out = await run(text, settings, {"status": "blocked on legal review"}, events=rec)
    assert out.kind == "ok", out.error
    assert out.output == {
        "d": {"branch": "then", "verdict": True, "reason": "it says blocked", "result": {"escalate": True}}
    }
    assert len(model_server.requests) == 1
    sent = json.dumps(model_server.requests[0]["messages"])
    assert "blocked on legal review" in sent
    assert out.usage is not None and out.usage["calls"] == 1
    assert any(e == "llm_call" for e, _ in rec.events)


async def test_agent_step_result_shape(settings: Any, model_server: ScriptedModelServer) -> None:
    model_server.push(
        {"tool_calls": [{"name": "t__double", "arguments": {"n": 4}}]},
        {"text": '{"hours": 8}'},
    )
    text = HEAD + (
        "  - id: E0\n    tool_name: agent\n    input:\n      prompt: 'Double 4 for {{input.who}}'\n"
        "      tools: ['t__d*']\n      max_iterations: 4\n      system_prompt: Use the tool.\n"
        "      output_schema: {type: object, required: [hours], properties: {hours: {type: number}}}\n"
        "output:\n  a: '{{E0}}'\n"
    )
    out = await run(text, settings, {"who": "me"})
    assert out.kind == "ok", out.error
    assert out.output == {
        "a": {
            "output": {"hours": 8},
            "iterations": 2,
            "tools_called": [{"tool": "t__double", "round": 1}],
            "final": True,
        }
    }
    first = model_server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["ask_user", "t__double"]
    assert "Use the tool." in first["messages"][0]["content"]
    tool_msg = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_msg[0]["content"]) == {"value": 8}
    # graph: pipeline/agent.rs adds an agent's tool calls to steps_executed: the agent and its call
    assert out.steps_executed == 2


async def test_agent_last_round_withdraws_tools_and_forces_schema(
    settings: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        {"tool_calls": [{"name": "t__double", "arguments": {"n": 1}}]},
        {"json": {"hours": 2}},
    )
    text = HEAD + (
        "  - id: E0\n    tool_name: agent\n    input:\n      prompt: go\n      tools: ['t__double']\n"
        "      max_iterations: 2\n"
        "      output_schema: {type: object, required: [hours], properties: {hours: {type: number}}}\n"
        "output:\n  a: '{{E0}}'\n"
    )
    out = await run(text, settings)
    assert out.output["a"]["output"] == {"hours": 2} and out.output["a"]["final"] is True
    assert out.output["a"]["iterations"] == 2
    last = model_server.requests[-1]
    assert "tools" not in last
    assert last.get("response_format", {}).get("type") == "json_schema"


async def test_agent_pattern_matching_nothing_fails_naming_it(
    settings: Any, model_server: ScriptedModelServer
) -> None:
    text = HEAD + (
        "  - id: E0\n    tool_name: agent\n    input:\n      prompt: go\n      tools: ['linear__*']\n"
        "      output_schema: {type: object}\n"
    )
    out = await run(text, settings)
    assert (
        out.error
        == "plan failed at step E0 (agent): `tools` pattern 'linear__*' matches no tool in the catalog"
    )
    assert model_server.requests == []


async def test_solver_streams_and_builtin_infer_step(
    settings: Any, model_server: ScriptedModelServer
) -> None:
    model_server.push({"json": {"label": "bug"}}, {"text": "One bug was found in the report."})
    text = HEAD + (
        "  - id: E0\n    tool_name: builtin__infer\n    input:\n      instruction: 'Label: {{input.text}}'\n"
        "      output_schema: {type: object, required: [label], properties: {label: {type: string}}}\n"
        "solver:\n  query_to_answer: What was found?\n  data: {label: '{{E0.label}}'}\n"
    )
    chunks: list[str] = []
    out = await run(text, settings, {"text": "crash on save"}, on_text=chunks.append)
    assert out.kind == "ok", out.error
    assert out.answer == "One bug was found in the report."
    assert "".join(chunks) == out.answer and len(chunks) > 1  # streamed in pieces
    assert model_server.requests[1]["stream"] is True
    assert '"label": "bug"' in model_server.requests[1]["messages"][-1]["content"]
    assert out.usage is not None and out.usage["calls"] == 2
    data = envelope(out)
    assert data["answer"] == out.answer and data["output"] is None and data["plan"] == "m"
    assert data["steps_executed"] == 1 and data["usage"]["calls"] == 2


SOLVER_PLAN = """identifier: report
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


def test_plan_run_solver_streams_only_the_report(
    cli: GraphchatRunner, workspace: Path, model_server: ScriptedModelServer
) -> None:
    (workspace / "plans" / "report.yaml").write_text(SOLVER_PLAN)
    model_server.push({"text": "Two numbers are above one: 2 and 3."})
    run = cli("plan", "run", "report", env=model_server.env())
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Two numbers are above one: 2 and 3.\n"
    assert "[\n  2,\n  3\n]" in model_server.requests[0]["messages"][-1]["content"]
