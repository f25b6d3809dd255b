"""Budgets in the model layer (graphchat.llm.budget), against the scripted server: every request
is charged, fallbacks included; a reached budget refuses every later request without sending it;
a scope nests in the enclosing one; the wall clock cancels what runs inside. The same limits
through the real command are in tests/adversarial/test_budgets.py."""

from __future__ import annotations

import asyncio

import pytest

from graphchat.errors import GraphchatError
from graphchat.llm.budget import Budget, BudgetExceeded, budget_scope, current
from graphchat.llm.client import LLM
from graphchat.workspace import ModelConfig
from tests.scripted_server import ScriptedModelServer

HI = [{"role": "user", "content": "hi"}]
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}


class Limits:
    """What budget_scope reads from Settings."""

    def __init__(self, **values: object) -> None:
        self.max_model_calls = values.get("max_model_calls", 1000)
        self.max_cost_usd = values.get("max_cost_usd")
        self.max_run_seconds = values.get("max_run_seconds")


def make_llm(server: ScriptedModelServer, **config: object) -> LLM:
    return LLM(ModelConfig(model="openai/scripted", api_base=server.url, api_key="sk-test", **config))  # type: ignore[arg-type]


async def test_a_reached_budget_refuses_every_later_request_without_sending_it(
    model_server: ScriptedModelServer,
) -> None:
    llm = make_llm(model_server)
    async with budget_scope(Limits(max_model_calls=2), "run") as (budget, owned):
        assert owned and current() is budget
        await llm.complete(HI)
        await llm.complete(HI)
        for _ in range(2):  # sticky: whoever caught the first error cannot spend past it
            with pytest.raises(BudgetExceeded) as hit:
                await llm.complete(HI)
            assert hit.value.exit_code == 1
            assert hit.value.message == (
                "the run reached settings.max_model_calls (2 model calls); it stops here"
            )
    assert len(model_server.requests) == 2
    assert current() is None


async def test_a_structured_fallback_is_charged_as_its_own_request(model_server: ScriptedModelServer) -> None:
    model_server.push({"error": 400}, {"json": {"ok": True}})  # json_schema refused, then the plain call
    async with budget_scope(None, "turn") as (budget, _):
        assert await make_llm(model_server).structured(HI, SCHEMA, site="judge") == {"ok": True}
    assert budget.calls == len(model_server.requests) == 2


async def test_cost_is_counted_from_known_prices_and_stops_the_next_request(
    model_server: ScriptedModelServer,
) -> None:
    model_server.default = {"text": "ok", "usage": {"prompt_tokens": 1000, "completion_tokens": 0}}
    llm = make_llm(model_server, input_cost_per_token=0.001)  # $1 a call
    async with budget_scope(Limits(max_cost_usd=1.5), "turn") as (budget, _):
        await llm.complete(HI)
        await llm.complete(HI)
        assert budget.cost_usd == pytest.approx(2.0)
        with pytest.raises(BudgetExceeded, match=r"settings\.max_cost_usd \(\$2\.0000 spent of \$1\.5\)"):
            await llm.complete(HI)
    assert len(model_server.requests) == 2


async def test_a_scope_inside_another_spends_the_enclosing_budget_unless_fresh() -> None:
    async with budget_scope(Limits(max_model_calls=7), "turn") as (outer, owned):
        async with budget_scope(Limits(max_model_calls=1), "run") as (inner, inner_owned):
            assert inner is outer and owned and not inner_owned
        async with budget_scope(Limits(), "turn", fresh=True) as (fresh, fresh_owned):
            assert fresh is not outer and fresh_owned and fresh.max_model_calls == 1000
        assert current() is outer


async def test_max_run_seconds_cancels_the_work_inside_and_names_the_setting() -> None:
    seen: list[bool] = []
    with pytest.raises(BudgetExceeded, match=r"the run reached settings\.max_run_seconds \(0\.2 s\)"):
        async with budget_scope(Limits(max_run_seconds=0.2), "run") as (budget, _):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen.append(budget.timed_out)  # a handler can tell the deadline from a Ctrl-C
                raise
    assert seen == [True]
    with pytest.raises(BudgetExceeded):  # and nothing more is charged to it
        budget.charge("m")


async def test_an_answer_over_max_output_tokens_is_an_error_streamed_or_not(
    model_server: ScriptedModelServer,
) -> None:
    long = " ".join(f"word{n}" for n in range(400))
    model_server.push({"text": long}, {"text": long}, {"text": long})
    with pytest.raises(GraphchatError, match=r"passed settings\.max_output_tokens \(50 tokens\)"):
        await make_llm(model_server, max_output_tokens=50).complete(HI)
    with pytest.raises(GraphchatError, match=r"passed settings\.max_output_tokens \(50 tokens\)"):
        await make_llm(model_server, max_output_tokens=50).complete(HI, stream=False)
    assert (await make_llm(model_server, max_output_tokens=5000).complete(HI)).content == long


async def test_unpriced_models_are_said_once_when_a_cost_budget_is_set() -> None:
    warnings: list[str] = []

    class Sink:
        def warning(self, message: str) -> None:
            warnings.append(message)

    budget = Budget(max_cost_usd=1.0)
    budget.spent(None, "openai/unpriced", Sink())  # type: ignore[arg-type]
    budget.spent(None, "openai/unpriced", Sink())  # type: ignore[arg-type]
    assert (
        len(warnings) == 1 and "settings.max_cost_usd: no price is known for openai/unpriced" in warnings[0]
    )
