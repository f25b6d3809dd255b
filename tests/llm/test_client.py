"""The model layer against the scripted server: streaming assembly, retries, errors, usage, structured."""

from __future__ import annotations

import pytest

from graphchat.errors import GraphchatError
from graphchat.llm.client import LLM
from graphchat.llm.jsonreply import parse_json_reply
from graphchat.llm.stream import StreamAssembler
from graphchat.llm.types import Usage
from graphchat.workspace import ModelConfig
from tests.scripted_server import ScriptedModelServer

TOOLS = [
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "b", "parameters": {"type": "object"}}},
]
HI = [{"role": "user", "content": "hi"}]


def make_llm(server: ScriptedModelServer, **config: object) -> LLM:
    return LLM(ModelConfig(model="openai/scripted", api_base=server.url, api_key="sk-test", **config))  # type: ignore[arg-type]


# --- stream assembly (pure) ----------------------------------------------------------------------


def _delta(**delta: object) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def test_assembler_joins_interleaved_fragments_of_several_calls_by_index() -> None:
    seen: list[str] = []
    asm = StreamAssembler(seen.append)
    for chunk in [
        _delta(content="Let me "),
        _delta(content="look."),
        _delta(tool_calls=[{"index": 0, "id": "c0", "function": {"name": "a", "arguments": ""}}]),
        _delta(tool_calls=[{"index": 1, "id": "c1", "function": {"name": "b", "arguments": '{"y"'}}]),
        _delta(tool_calls=[{"index": 0, "function": {"arguments": '{"x": '}}]),
        _delta(tool_calls=[{"index": 1, "function": {"arguments": ": 2}"}}]),
        _delta(tool_calls=[{"index": 0, "function": {"arguments": "1}"}}]),
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},  # finish_reason lies
        {"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 17}},
    ]:
        asm.feed(chunk)
    assert seen == ["Let me ", "look."]
    assert asm.content == "Let me look."
    calls = asm.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [("c0", "a", '{"x": 1}'), ("c1", "b", '{"y": 2}')]
    assert asm.usage == {"prompt_tokens": 42, "completion_tokens": 17}


def test_assembler_new_id_on_a_reused_index_is_a_new_call() -> None:
    asm = StreamAssembler()
    asm.feed(_delta(tool_calls=[{"index": 0, "id": "x", "function": {"name": "a", "arguments": "{}"}}]))
    asm.feed(_delta(tool_calls=[{"index": 0, "id": "y", "function": {"name": "b", "arguments": "{}"}}]))
    assert [(c.id, c.name) for c in asm.tool_calls()] == [("x", "a"), ("y", "b")]


def test_parse_json_reply_finds_fenced_or_embedded_json() -> None:
    assert parse_json_reply('{"a": 1}') == {"a": 1}
    assert parse_json_reply('```json\n{"a": 2}\n```') == {"a": 2}
    assert parse_json_reply('Sure: {"a": 3} hope it helps') == {"a": 3}
    with pytest.raises(ValueError):
        parse_json_reply("no json here")


def test_usage_adds_and_keeps_cost_only_when_known() -> None:
    total = Usage(10, 5, None, 1) + Usage(1, 2, None, 1)
    assert total.to_dict() == {"calls": 2, "input_tokens": 11, "output_tokens": 7}
    priced = total + Usage(0, 0, 0.5, 1)
    assert priced.to_dict()["cost_usd"] == 0.5
    assert (priced - total).to_dict() == {"calls": 1, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.5}


# --- calls over HTTP ------------------------------------------------------------------------------


async def test_streamed_text_and_tool_calls_over_http(model_server: ScriptedModelServer) -> None:
    model_server.push(
        {"text": "hello there, streaming world", "usage": {"prompt_tokens": 12, "completion_tokens": 4}},
        {
            "text": "calling",
            "tool_calls": [
                {"name": "a", "arguments": {"x": "a long argument value split over fragments"}},
                {"name": "b", "arguments": {"y": [1, 2, 3]}},
                {"name": "a", "arguments": {}},
            ],
        },
    )
    llm = make_llm(model_server)
    pieces: list[str] = []
    first = await llm.complete(HI, on_text=pieces.append)
    assert first.content == "hello there, streaming world"
    assert len(pieces) > 1 and "".join(pieces) == first.content
    assert (first.usage.input_tokens, first.usage.output_tokens) == (12, 4)  # the server's, not estimated
    assert model_server.requests[0]["stream_options"] == {"include_usage": True}
    second = await llm.complete(HI, tools=TOOLS)
    assert [c.name for c in second.tool_calls] == ["a", "b", "a"]
    assert second.tool_calls[0].arguments == '{"x": "a long argument value split over fragments"}'
    assert second.tool_calls[1].arguments == '{"y": [1, 2, 3]}'
    assert llm.usage.calls == 2


async def test_non_streaming_call(model_server: ScriptedModelServer) -> None:
    model_server.push({"tool_calls": [{"name": "b", "arguments": {"k": 1}}]})
    completion = await make_llm(model_server).complete(HI, tools=TOOLS, stream=False)
    assert [(c.name, c.arguments) for c in completion.tool_calls] == [("b", '{"k": 1}')]
    assert not model_server.requests[0].get("stream")


async def test_429_is_retried_once_then_answers(model_server: ScriptedModelServer) -> None:
    model_server.push({"error": 429, "retry_after": 0}, {"text": "after the wait"})
    completion = await make_llm(model_server).complete(HI)
    assert completion.content == "after the wait"
    assert len(model_server.requests) == 2


async def test_429_retry_waits_as_long_as_retry_after_says(model_server: ScriptedModelServer) -> None:
    import time

    arrivals: list[float] = []

    def at(reply: dict[str, object]) -> object:
        def serve(body: dict[str, object]) -> dict[str, object]:
            arrivals.append(time.monotonic())
            return reply

        return serve

    model_server.push(at({"error": 429, "retry_after": 2}), at({"text": "patient"}))
    assert (await make_llm(model_server).complete(HI)).content == "patient"
    assert arrivals[1] - arrivals[0] >= 1.9  # the provider's Retry-After, not an immediate retry


async def test_retries_stop_after_num_retries(model_server: ScriptedModelServer) -> None:
    model_server.default = {"error": 500}
    llm = LLM(ModelConfig(model="openai/scripted", api_base=model_server.url, api_key="k"), num_retries=1)
    with pytest.raises(GraphchatError) as info:
        await llm.complete(HI)
    assert len(model_server.requests) == 2  # num_retries=1 → one retry
    assert "(500)" in info.value.message and "\n" not in info.value.message


async def test_401_is_not_retried_and_names_the_key(model_server: ScriptedModelServer) -> None:
    model_server.push({"error": 401})
    with pytest.raises(GraphchatError) as info:
        await make_llm(model_server).complete(HI)
    assert len(model_server.requests) == 1
    assert "401" in info.value.message and "Incorrect API key provided" in info.value.message
    assert "GRAPHCHAT_API_KEY" in (info.value.hint or "")
    assert info.value.exit_code == 2  # a configuration mistake, not an outage


async def test_401_without_a_configured_key_names_the_provider_variable(
    model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    model_server.push({"error": 401})
    llm = LLM(ModelConfig(model="openai/scripted", api_base=model_server.url))
    with pytest.raises(GraphchatError) as info:
        await llm.complete(HI)
    assert "OPENAI_API_KEY" in (info.value.hint or "")


async def test_context_window_error_says_how_long_the_history_was(model_server: ScriptedModelServer) -> None:
    model_server.push({"error": "context"})
    history = [{"role": "user", "content": f"message {i} " * 20} for i in range(7)]
    with pytest.raises(GraphchatError) as info:
        await make_llm(model_server).complete(history)
    assert len(model_server.requests) == 1
    assert "context window" in info.value.message
    assert "7 messages" in info.value.message and "tokens" in info.value.message


async def test_cost_from_the_configured_price(model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "x", "usage": {"prompt_tokens": 100, "completion_tokens": 10}})
    llm = make_llm(model_server, input_cost_per_token=1e-6, output_cost_per_token=2e-6)
    completion = await llm.complete(HI)
    assert completion.usage.cost_usd == pytest.approx(100e-6 + 20e-6)


async def test_unpriced_model_has_no_cost(
    model_server: ScriptedModelServer, capsys: pytest.CaptureFixture[str]
) -> None:
    model_server.push({"text": "x"})
    completion = await make_llm(model_server).complete(HI)
    assert completion.usage.cost_usd is None
    assert "cost_usd" not in completion.usage.to_dict()
    assert capsys.readouterr().out == ""  # no "Provider List" banner on stdout


async def test_events_report_each_call(model_server: ScriptedModelServer) -> None:
    from graphchat.events import EventSink

    class Recorder(EventSink):
        def __init__(self) -> None:
            self.seen: list[tuple[str, dict[str, object]]] = []

        def emit(self, event: str, **fields: object) -> None:
            self.seen.append((event, fields))

    sink = Recorder()
    model_server.push({"text": "x", "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
    llm = LLM(ModelConfig(model="openai/scripted", api_base=model_server.url, api_key="k"), events=sink)
    await llm.complete(HI, site="gate")
    [(event, fields)] = sink.seen
    assert event == "llm_call"
    assert (fields["site"], fields["input_tokens"], fields["output_tokens"]) == ("gate", 7, 3)


SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def test_structured_repairs_once_with_the_validation_error(model_server: ScriptedModelServer) -> None:
    model_server.push({"json": {"n": "three"}}, {"json": {"n": 3}})
    assert await make_llm(model_server).structured(HI, SCHEMA, site="test") == {"n": 3}
    assert len(model_server.requests) == 2
    repair = model_server.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": '{"n": "three"}'}
    assert "not of type 'integer'" in repair[-1]["content"]
    assert model_server.requests[0]["response_format"]["json_schema"]["schema"] == SCHEMA


async def test_structured_fails_clearly_after_the_repair_pass(model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "no idea"}, {"json": {"m": 1}})
    with pytest.raises(GraphchatError) as info:
        await make_llm(model_server).structured(HI, SCHEMA, site="test")
    assert len(model_server.requests) == 2
    assert "'n' is a required property" in info.value.message


async def test_context_window_prefers_the_configured_value() -> None:
    from graphchat.llm.client import context_window

    assert context_window(ModelConfig(model="openai/scripted", context_window=5000)) == 5000
    assert context_window(ModelConfig(model="openai/scripted")) is None
    assert (context_window(ModelConfig(model="openai/gpt-4o-mini")) or 0) > 100_000


async def test_a_stream_that_breaks_mid_reply_is_one_clear_error(model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "the start of a long answer", "dropmid": True}, {"text": "never sent"})
    shown: list[str] = []
    with pytest.raises(GraphchatError) as info:
        await make_llm(model_server).complete(HI, on_text=shown.append)
    assert "broke off mid-reply" in info.value.message
    assert shown == ["the star"]
    assert len(model_server.requests) == 1  # not retried: the person already saw part of it


async def test_cost_from_litellm_prices_for_a_known_model(model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "x", "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
    llm = LLM(ModelConfig(model="openai/gpt-4o-mini", api_base=model_server.url, api_key="k"))
    completion = await llm.complete(HI)
    assert completion.usage.cost_usd is not None and completion.usage.cost_usd > 0
