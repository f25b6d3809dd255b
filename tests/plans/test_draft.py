"""`graphchat plan draft`: the real command against the scripted model server (the planner role)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

GOAL = "summarise a topic in two passes"


def two_pass(first: str = "E0", second: str = "E1", identifier: str = "two_pass") -> dict[str, Any]:
    """A plan of two builtin__infer calls where `second` reads `first` (E0 then E1 is valid)."""
    return {
        "identifier": identifier,
        "name": "Two passes",
        "description": "Summarise a topic, then shorten the summary.",
        "input_schema": {"type": "object", "properties": {"topic": {"type": "string", "default": "tides"}}},
        "steps": [
            {"id": first, "tool_name": "builtin__infer", "input": {"instruction": "Explain {{input.topic}}"}},
            {
                "id": second,
                "tool_name": "builtin__infer",
                "input": {"instruction": "Shorten: {{" + first + ".text}}"},
            },
        ],
        "output": {"summary": "{{" + second + ".text}}"},
    }


# E0 reads E1, which runs after it: a forward reference.
FORWARD = {**two_pass("E1", "E0"), "steps": list(reversed(two_pass("E1", "E0")["steps"]))}


def request_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content") or "") for m in body["messages"])


def plan_files(workspace: Path) -> list[str]:
    return sorted(p.name for p in (workspace / "plans").iterdir())


def test_a_forward_reference_is_sent_back_and_the_second_draft_is_saved(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"json": FORWARD}, {"json": two_pass()})
    result = cli("plan", "draft", GOAL, env=model_server.env())
    assert result.returncode == 0, result.stderr
    saved = workspace / "plans" / "two_pass.yaml"
    assert result.stdout == f"{saved}\n"
    assert "✗ draft 1: 1 problem; sent back to the planner" in result.stderr
    assert len(model_server.requests) == 2
    first, second = model_server.requests
    assert first["response_format"]["type"] == "json_schema"  # the plan document is asked for by schema
    assert "steps" in first["response_format"]["json_schema"]["schema"]["properties"]
    assert GOAL in request_text(first)
    # The second request carries the first draft and the problem, named.
    feedback = second["messages"][-1]
    assert feedback["role"] == "user"
    assert "step E0: input.instruction: forward reference to step 'E1'" in feedback["content"]
    assert second["messages"][-2] == {"role": "assistant", "content": json.dumps(FORWARD)}
    # The file is the second draft, and `plan validate` accepts it.
    doc = yaml.safe_load(saved.read_text())
    assert [s["id"] for s in doc["steps"]] == ["E0", "E1"]
    assert saved.read_text().startswith(f"# Drafted by `graphchat plan draft` for: {GOAL}\n")
    check = cli("plan", "validate", "two_pass")
    assert check.returncode == 0, check.stderr
    assert "✓ plan 'two_pass'" in check.stderr
    # And it runs: two builtin__infer calls, the second reading the first.
    model_server.push({"text": "Tides follow the moon."}, {"text": "Moon."})
    ran = cli("plan", "run", "two_pass", "--input", "topic=tides", env=model_server.env())
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {"summary": "Moon."}
    assert "Shorten: Tides follow the moon." in request_text(model_server.requests[-1])


def test_three_bad_drafts_exit_1_with_the_problems_and_leave_no_file(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    unknown_tool = two_pass()
    unknown_tool["steps"][0]["tool_name"] = "nope__search"
    model_server.push(
        {"json": unknown_tool},
        {"text": "I am sorry, I cannot write that plan."},
        {"json": FORWARD},
        {"json": two_pass()},  # never asked for: three attempts in all
    )
    result = cli("plan", "draft", GOAL, "--json", env=model_server.env())
    assert result.returncode == 1
    assert len(model_server.requests) == 3
    second, third = model_server.requests[1:]
    assert "MCP server 'nope' is not configured" in second["messages"][-1]["content"]
    assert "holds no plan document" in third["messages"][-1]["content"]
    assert (
        "error: the planner's draft still does not validate after 3 attempts; nothing saved" in result.stderr
    )
    assert "step E0: input.instruction: forward reference to step 'E1'" in result.stderr
    assert plan_files(workspace) == []
    envelope = json.loads(result.stdout)
    assert envelope == {
        "ok": False,
        "plan": None,
        "path": None,
        "attempts": 3,
        "problems": [envelope["problems"][0]],
    }
    assert "forward reference to step 'E1'" in envelope["problems"][0]


def test_the_planner_sees_a_learned_shape_after_a_tools_call(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    write_servers(workspace, {"t": stdio()})
    called = cli("tools", "call", "t__shaped", "--input", "variant=1")
    assert called.returncode == 0, called.stderr
    plan = {
        "identifier": "shaped_score",
        "name": "Shaped score",
        "description": "The score of the first shaped record.",
        "steps": [{"id": "E0", "tool_name": "t__shaped", "input": {"variant": 1}}],
        "output": {"score": "{{E0.score}}"},
    }
    model_server.push({"json": plan})
    result = cli("plan", "draft", "get the score", "--stdout", env=model_server.env())
    assert result.returncode == 0, result.stderr
    sent = request_text(model_server.requests[0])
    entries = {chunk.split("\n", 1)[0]: chunk for chunk in sent.split("\n## ")}
    shaped = entries["t__shaped"]
    assert (
        "output (observed in earlier calls, may vary): {id: integer, name: string, score: number}" in shaped
    )
    assert '"variant"' in shaped  # the input schema
    # Declared output schemas come first; tools never called and undeclared are "unknown".
    assert "output (declared): {total: integer, unit: string}" in entries["t__stamp"]
    assert "output: unknown — reference the whole result" in entries["t__whoami"]
    assert "ask_user" not in entries  # not allowed in plans: not offered
    # --stdout: the YAML, nothing written; the MCP server the plan calls is required.
    assert plan_files(workspace) == []
    doc = yaml.safe_load(result.stdout)
    assert doc["requires_servers"] == ["t"]
    assert doc["steps"] == plan["steps"]


def test_a_fenced_yaml_reply_without_structured_output_is_accepted(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    text = "Here is the plan:\n\n```yaml\n" + yaml.safe_dump(two_pass()) + "```\nIt runs two model calls."
    model_server.push({"text": text})
    result = cli(
        "plan",
        "draft",
        GOAL,
        "--name",
        "mine",
        "--json",
        env={**model_server.env(), "GRAPHCHAT_EVENTS": "jsonl"},
    )
    assert result.returncode == 0, result.stderr
    envelope = json.loads(result.stdout)
    assert set(envelope) == {"ok", "plan", "path", "attempts", "problems"}
    saved = workspace / "plans" / "mine.yaml"
    assert envelope["ok"] is True and envelope["attempts"] == 1 and envelope["problems"] == []
    assert envelope["path"] == str(saved)
    assert envelope["plan"]["identifier"] == "mine"  # --name wins over the planner's identifier
    assert envelope["plan"]["steps"] == two_pass()["steps"]
    assert yaml.safe_load(saved.read_text()) == envelope["plan"]
    assert "mine" in request_text(model_server.requests[0])
    events = [json.loads(line) for line in result.stderr.splitlines()]
    usage = [e for e in events if e["event"] == "usage_summary"]
    assert usage and usage[0]["usage"]["calls"] == 1
    assert any(e["event"] == "llm_call" and e["site"] == "planner" for e in events)


def test_an_existing_plan_is_never_overwritten_without_force(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    existing = workspace / "plans" / "taken.yaml"
    existing.write_text(yaml.safe_dump(two_pass(identifier="taken")))
    before = existing.read_text()
    refused = cli("plan", "draft", GOAL, "--name", "taken", env=model_server.env())
    assert refused.returncode == 1
    assert f"error: {existing} already exists" in refused.stderr
    assert model_server.requests == []  # refused before any model call
    # The planner picking a taken identifier (here: starting from that plan) is told to change it.
    model_server.push({"json": two_pass(identifier="taken")}, {"json": two_pass(identifier="taken_v2")})
    result = cli("plan", "draft", "the same, shorter", "--from-plan", "taken", env=model_server.env())
    assert result.returncode == 0, result.stderr
    first, second = model_server.requests
    assert "# The plan to start from (taken)" in request_text(first)
    assert before.strip() in request_text(first)
    assert f"identifier: {existing} already exists" in second["messages"][-1]["content"]
    assert existing.read_text() == before
    assert result.stdout == f"{workspace / 'plans' / 'taken_v2.yaml'}\n"
    # --force replaces the file.
    model_server.push({"json": two_pass(identifier="other")})
    forced = cli("plan", "draft", GOAL, "--name", "taken", "--force", env=model_server.env())
    assert forced.returncode == 0, forced.stderr
    assert existing.read_text() != before
    assert yaml.safe_load(existing.read_text())["identifier"] == "taken"


def test_from_thread_gives_the_planner_the_exchange(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "Tides are caused by the moon."})
    asked = cli("ask", "why are there tides in Brittany?", "--json", env=model_server.env())
    assert asked.returncode == 0, asked.stderr
    thread_id = json.loads(asked.stdout)["thread_id"]
    model_server.push({"json": two_pass()})
    result = cli("plan", "draft", GOAL, "--from-thread", thread_id, "--stdout", env=model_server.env())
    assert result.returncode == 0, result.stderr
    sent = request_text(model_server.requests[-1])
    assert f"# The conversation to start from (thread {thread_id})" in sent
    assert "user: why are there tides in Brittany?" in sent
    assert "assistant: Tides are caused by the moon." in sent
    unknown = cli("plan", "draft", GOAL, "--from-thread", "ffffffff", env=model_server.env())
    assert unknown.returncode == 1
    assert "unknown thread" in unknown.stderr
    assert len(model_server.requests) == 2


# --- the shared drafting API (what the replanner of plan_and_execute calls) ---------------------


async def test_draft_plan_takes_context_and_feedback_for_a_replan(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    from graphchat.llm.client import LLM
    from graphchat.plans.draft import draft_plan
    from graphchat.sources import build_catalog
    from graphchat.workspace import ModelConfig, load_settings

    settings = load_settings(workspace)
    catalog = build_catalog(settings, include_mcp=False, record_shapes=False)
    llm = LLM(
        ModelConfig(model="openai/scripted", api_base=model_server.url, api_key="sk-test", role="planner")
    )
    model_server.push({"json": FORWARD}, {"json": FORWARD})
    seen: list[tuple[int, list[str]]] = []
    result = await draft_plan(
        GOAL,
        llm=llm,
        catalog=catalog,
        settings=settings,
        context={"Failing step": "E1 (builtin__infer)", "Available keys of E0": "text"},
        feedback=["E1 failed: BadPath {{E0.summary}}"],
        attempts=2,
        on_attempt=lambda n, problems: seen.append((n, problems)),
    )
    assert not result.ok and result.plan_doc is None and result.plan is None
    assert result.attempts == 2 and len(model_server.requests) == 2
    assert result.problems == [
        "step E0: input.instruction: forward reference to step 'E1': it has not run yet here (only `input` and earlier steps)"
    ]
    assert [n for n, _ in seen] == [1, 2]
    assert result.usage is not None and result.usage.calls == 2
    sent = request_text(model_server.requests[0])
    assert "# Failing step\nE1 (builtin__infer)" in sent
    assert "# Available keys of E0\ntext" in sent
    assert "- E1 failed: BadPath {{E0.summary}}" in sent
    assert "## builtin__infer" in sent and "output (declared): {text: string}" in sent

    model_server.push({"json": two_pass()})
    fixed = await draft_plan(GOAL, llm=llm, catalog=catalog, settings=settings, identifier="kept_id")
    assert fixed.ok and fixed.attempts == 1
    assert fixed.plan is not None and fixed.plan.identifier == "kept_id"
    assert fixed.yaml is not None and yaml.safe_load(fixed.yaml) == fixed.plan_doc
    assert plan_files(workspace) == []  # drafting writes nothing: saving is the host's


def test_a_reply_is_read_as_json_a_fenced_block_or_a_wrapped_plan() -> None:
    import pytest

    from graphchat.plans.draft import read_plan_reply

    doc = two_pass()
    assert read_plan_reply(json.dumps(doc)) == doc
    assert read_plan_reply("Sure.\n```json\n" + json.dumps(doc) + "\n```") == doc
    assert read_plan_reply("```yaml\n" + yaml.safe_dump(doc) + "```\n") == doc
    assert read_plan_reply("```\n" + yaml.safe_dump(doc) + "```") == doc
    assert read_plan_reply(json.dumps({"plan": doc})) == doc
    with pytest.raises(ValueError, match="holds no plan document"):
        read_plan_reply("I cannot help with that.")
    with pytest.raises(
        ValueError, match=r"```yaml block does not parse .*quote strings that start with \{\{"
    ):
        read_plan_reply("```yaml\nsteps:\n- id: E0\n  input: {over: {{input.zones}}}\n```")
    with pytest.raises(ValueError, match="it is not valid JSON"):
        read_plan_reply('{"identifier": "cut short')
    with pytest.raises(ValueError, match="must be a JSON object, got list"):
        read_plan_reply("[1, 2]")
    with pytest.raises(ValueError, match="empty"):
        read_plan_reply("  ")


def test_output_shapes_are_sketched_compactly() -> None:
    from graphchat.plans.draft import sketch

    declared = {  # as pydantic writes an MCP tool's outputSchema
        "type": "object",
        "$defs": {"Item": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}},
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "next": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "by_zone": {"type": "object", "additionalProperties": {"type": "number"}},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["items"],
    }
    assert (
        sketch(declared)
        == '{items: [{id: integer}], next?: string | null, by_zone?: {<key>: number}, kind?: "a" | "b"}'
    )
    assert sketch({}) == "any"
    assert sketch({"type": ["string", "null"]}) == "string | null"


def test_the_prompts_example_plan_loads() -> None:
    """The example the planner is shown must itself be a valid plan (guards against drift)."""
    from graphchat.plans.draft import PLANNER_SYSTEM
    from graphchat.plans.loader import load_plan_data

    example = PLANNER_SYSTEM.split("# Example (its tools are illustrative)\n", 1)[1]
    plan = load_plan_data(json.loads(example))
    assert [s.tool_name for s in plan.steps] == ["map", "filter"] and plan.finish == "output"


def test_three_problems_of_three_tiers_come_back_in_one_retry(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """Issue 21: a load problem (an unknown op), a tool problem (a misspelt tool) and a data-flow
    problem (a misspelt field of a map's result) are all sent back on the first retry."""
    write_servers(workspace, {"t": stdio()})
    assert cli("tools", "call", "t__whoami").returncode == 0  # t's tool list is known

    def doc(op: str, tool: str, field: str) -> dict[str, Any]:
        return {
            "identifier": "stamped",
            "name": "Stamped",
            "description": "Shapes two records and stamps them.",
            "steps": [
                {
                    "id": "E0",
                    "tool_name": "map",
                    "input": {"over": [1, 2], "do": {"tool_name": "t__shaped", "input": {"variant": "{{item}}"}}},
                },
                {"id": "E1", "tool_name": tool, "input": {"n": 2}},
                {"id": "E2", "tool_name": "exit", "input": {"when": {"value": "{{E0.count}}", "op": op, "to": 1}, "status": "error"}},
            ],
            "output": {"n": "{{E0." + field + "}}", "total": "{{E1.total}}"},
        }  # fmt: skip

    model_server.push({"json": doc("less", "t__stmap", "cont")}, {"json": doc("lt", "t__stamp", "count")})
    result = cli("plan", "draft", "stamp two shaped records", env=model_server.env())
    assert result.returncode == 0, result.stderr
    assert "✗ draft 1: 3 problems; sent back to the planner" in result.stderr
    assert len(model_server.requests) == 2
    feedback = model_server.requests[1]["messages"][-1]["content"]
    assert "step E2: input.when: unknown op 'less'" in feedback
    assert "step E1: tool_name: server 't' has no tool 't__stmap': did you mean 't__stamp'?" in feedback
    assert "output.n: '{{E0.cont}}': no field 'cont': did you mean 'count'?" in feedback
    assert (workspace / "plans" / "stamped.yaml").is_file()
