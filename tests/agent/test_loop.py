"""The tool-calling loop, in process: parallel rounds, call order, errors, limits, cancellation."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from graphchat.agent.loop import run_loop
from graphchat.catalog.base import CallContext, Catalog, ToolResult, ToolSource, ToolSpec
from graphchat.errors import GraphchatError
from graphchat.events import EventSink
from graphchat.llm.client import LLM
from graphchat.workspace import ModelConfig
from tests.scripted_server import ScriptedModelServer


class SleepySource(ToolSource):
    """Test tools: `sleep` (sleeps then echoes), `boom` (raises), `big` (a long result)."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.log: list[tuple[str, Any]] = []  # ("start" | "end", tag) in the order they happened
        self.first_started = asyncio.Event()

    def specs(self) -> list[ToolSpec]:
        obj = {"type": "object"}
        return [
            ToolSpec(
                "sleep",
                "sleep",
                {"type": "object", "properties": {"s": {"type": "number"}}},
                "native",
                "read",
            ),
            ToolSpec("boom", "fails", obj, "native", "read"),
            ToolSpec("big", "long result", obj, "native", "read"),
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        self.started.append(spec.name)
        self.first_started.set()
        if spec.name == "boom":
            raise RuntimeError("kaput")
        if spec.name == "big":
            return ToolResult("x" * 5000)
        self.log.append(("start", arguments.get("tag")))
        await asyncio.sleep(arguments.get("s", 0))
        self.log.append(("end", arguments.get("tag")))
        return ToolResult({"slept": arguments.get("s", 0), "tag": arguments.get("tag")})

    async def aclose(self) -> None:
        pass


def _ts(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def sleep_call(seconds: float, tag: str) -> dict[str, Any]:
    return {"name": "sleep", "arguments": {"s": seconds, "tag": tag}}


@pytest.fixture
def catalog() -> Catalog:
    return Catalog([SleepySource()])


def llm_for(server: ScriptedModelServer) -> LLM:
    return LLM(ModelConfig(model="openai/scripted", api_base=server.url, api_key="k"))


async def loop(server: ScriptedModelServer, catalog: Catalog, **kw: Any) -> Any:
    events: list[dict[str, Any]] = []
    kw.setdefault("max_iterations", 5)
    result = await run_loop(
        llm=llm_for(server),
        catalog=catalog,
        messages=[{"role": "user", "content": "go"}],
        ctx=CallContext(),
        record=events.append,
        **kw,
    )
    return result, events


async def test_a_round_runs_all_calls_at_once_and_returns_results_in_call_order(
    model_server: ScriptedModelServer, catalog: Catalog
) -> None:
    # the first call is the slowest: completion order (c, b, a) differs from call order (a, b, c)
    model_server.push(
        {"tool_calls": [sleep_call(0.6, "a"), sleep_call(0.3, "b"), sleep_call(0.05, "c")]}, {"text": "done"}
    )
    result, events = await loop(model_server, catalog)
    assert result.content == "done" and result.rounds == 2
    assert result.tool_calls_made == [{"tool": "sleep", "round": 1}] * 3
    second = model_server.requests[1]["messages"]
    calls = second[1]["tool_calls"]
    tool_messages = second[2:]
    assert [m["tool_call_id"] for m in tool_messages] == [c["id"] for c in calls]
    assert [json.loads(m["content"])["tag"] for m in tool_messages] == ["a", "b", "c"]
    # all three were running at once: every call started before the first one ended, and they
    # ended fastest first (run one after another, each would end before the next starts)
    log = catalog.sources[0].log  # type: ignore[attr-defined]
    assert log == [("start", "a"), ("start", "b"), ("start", "c"), ("end", "c"), ("end", "b"), ("end", "a")]
    kinds = [e["kind"] for e in events]
    assert kinds == ["assistant", "tool_result", "tool_result", "tool_result", "assistant"]
    # each result is recorded the moment its call ends (a kill mid-round loses only the calls
    # still running), naming the call it answers
    recorded = [e for e in events if e["kind"] == "tool_result"]
    assert [json.loads(e["content"])["tag"] for e in recorded] == ["c", "b", "a"]
    ids = {c["id"]: json.loads(c["function"]["arguments"])["tag"] for c in calls}
    assert [ids[e["tool_call_id"]] for e in recorded] == ["c", "b", "a"]


async def test_one_failing_call_does_not_cancel_the_others(
    model_server: ScriptedModelServer, catalog: Catalog
) -> None:
    model_server.push(
        {
            "tool_calls": [
                {"name": "boom", "arguments": {}},
                sleep_call(0.1, "ok"),
                {"name": "nope", "arguments": {}},
            ]
        },
        {"text": "done"},
    )
    _, events = await loop(model_server, catalog)
    [assistant] = [e for e in events if e["kind"] == "assistant" and e["tool_calls"]]
    by_id = {e["tool_call_id"]: e for e in events if e["kind"] == "tool_result"}
    results = [by_id[c["id"]] for c in assistant["tool_calls"]]
    assert [r["is_error"] for r in results] == [True, False, True]
    assert "kaput" in results[0]["content"]
    assert "unknown tool: nope" in results[2]["content"]


async def test_bad_json_arguments_become_an_error_the_model_sees(
    model_server: ScriptedModelServer, catalog: Catalog
) -> None:
    model_server.push({"tool_calls": [{"name": "sleep", "arguments": '{"s": 0,'}]}, {"text": "fixed"})
    result, _ = await loop(model_server, catalog)
    assert result.content == "fixed"
    tool_message = model_server.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and "not valid JSON" in tool_message["content"]
    assert catalog.sources[0].started == []  # type: ignore[attr-defined]


async def test_long_results_are_shortened_for_the_model_but_recorded_whole(
    model_server: ScriptedModelServer, catalog: Catalog
) -> None:
    model_server.push({"tool_calls": [{"name": "big", "arguments": {}}]}, {"text": "ok"})
    _, events = await loop(model_server, catalog, max_tool_result_chars=1000)
    sent = model_server.requests[1]["messages"][-1]["content"]
    assert sent.startswith("x" * 1000) and len(sent) < 1200 and "shortened" in sent
    [recorded] = [e for e in events if e["kind"] == "tool_result"]
    assert recorded["content"] == "x" * 5000


async def test_max_iterations_bounds_the_rounds(model_server: ScriptedModelServer, catalog: Catalog) -> None:
    model_server.default = {"tool_calls": [sleep_call(0, "again")]}
    with pytest.raises(GraphchatError) as info:
        await loop(model_server, catalog, max_iterations=3)
    assert "3 rounds" in info.value.message
    assert len(model_server.requests) == 3


async def test_output_schema_last_round_withdraws_tools_and_forces_the_schema(
    model_server: ScriptedModelServer, catalog: Catalog
) -> None:
    schema = {"type": "object", "properties": {"total": {"type": "integer"}}, "required": ["total"]}
    model_server.push({"tool_calls": [sleep_call(0, "x")]}, {"json": {"total": 4}})
    result, _ = await loop(model_server, catalog, max_iterations=2, output_schema=schema)
    assert result.output == {"total": 4}
    last = model_server.requests[-1]
    assert "tools" not in last and last["response_format"]["json_schema"]["schema"] == schema


async def test_output_schema_text_answer_that_fits_is_parsed(
    model_server: ScriptedModelServer, catalog: Catalog
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    model_server.push({"json": {"ok": True}})
    result, _ = await loop(model_server, catalog, output_schema=schema)
    assert result.output == {"ok": True} and len(model_server.requests) == 1


async def test_cancellation_cancels_in_flight_calls_and_keeps_the_completed_ones(
    model_server: ScriptedModelServer,
) -> None:
    source = SleepySource()
    catalog = Catalog([source])
    # call 0 is slow (in flight at Ctrl-C), call 1 completes quickly
    model_server.push({"tool_calls": [sleep_call(30, "slow"), sleep_call(0, "quick")]})
    events: list[dict[str, Any]] = []
    quick_finished = asyncio.Event()

    class Watch(EventSink):
        def emit(self, event: str, **fields: Any) -> None:
            if event == "tool_finished" and not fields["is_error"]:
                quick_finished.set()  # emitted as the quick call's task returns

    task = asyncio.create_task(
        run_loop(
            llm=llm_for(model_server),
            catalog=catalog,
            messages=[{"role": "user", "content": "go"}],
            ctx=CallContext(events=Watch()),
            record=events.append,
            max_iterations=5,
        )
    )
    await quick_finished.wait()
    await asyncio.sleep(0.2)  # the slow call runs a while before Ctrl-C: its result says how long
    task.cancel()
    started = time.perf_counter()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.perf_counter() - started < 1  # the 30 s call was cancelled, not awaited
    [assistant] = [e for e in events if e["kind"] == "assistant"]
    slow_id, quick_id = (c["id"] for c in assistant["tool_calls"])
    results = {e["tool_call_id"]: e for e in events if e["kind"] == "tool_result"}
    assert len(results) == 2  # one per call, naming it, so replay pairs them right
    assert results[slow_id]["is_error"] and "cancelled" in results[slow_id]["content"]
    assert results[slow_id]["ms"] >= 200  # the time it ran (issue 11 point 14), not 0
    assert not results[quick_id]["is_error"] and json.loads(results[quick_id]["content"])["tag"] == "quick"
