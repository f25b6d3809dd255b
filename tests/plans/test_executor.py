"""The executor: each control step's exact result shape (edge cases included), map concurrency
and failure attribution, asks, nesting limits, inputs and finishes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from graphchat.asks import Answer, Asker, ScriptedAsker, UnavailableAsker
from graphchat.catalog.base import Catalog
from graphchat.cli.front import exit_code
from graphchat.llm.types import Completion, ModelClient, Usage
from graphchat.plans.executor import run_plan
from graphchat.plans.plan_tools import PlanSource
from tests.plan_support import FakeTools, Recorder, plan_from_yaml, run_yaml

HEAD = "identifier: t\nname: T\ndescription: test plan\n"


def plan_text(steps: str, *, output: str | None = None, extra: str = "") -> str:
    text = HEAD + extra + "steps:\n" + steps
    if output is not None:
        text += "output:\n" + output
    return text


class FakeLLM:
    """A stand-in model for unit tests (the scripted-server tests cover the real path): a
    `ModelClient` whose verdicts and report text are given up front."""

    def __init__(self, verdicts: list[dict[str, Any]] | None = None, text: str = "report") -> None:
        self.verdicts = list(verdicts or [])
        self.text = text
        self.usage = Usage()
        self.structured_calls: list[list[dict[str, Any]]] = []
        self.complete_calls: list[list[dict[str, Any]]] = []
        self.roles: list[str] = []

    def factory(self, role: str, model: str | None, events: Any) -> ModelClient:
        self.roles.append(role if model is None else f"{role}:{model}")
        return self

    async def structured(
        self, messages: list[dict[str, Any]], schema: dict[str, Any], *, site: str, name: str = "output"
    ) -> dict[str, Any]:
        self.structured_calls.append(messages)
        return self.verdicts.pop(0)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
        tool_choice: Any = None,
        response_format: Any = None,
        site: str = "chat",
        stream: bool = True,
    ) -> Completion:
        self.complete_calls.append(messages)
        if on_text:
            on_text(self.text)
        return Completion(content=self.text)


# --- exit ----------------------------------------------------------------------------------


async def test_exit_not_fired_result_shape() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: exit\n    input:\n      when: {value: 1, op: eq, to: 2}\n"
            "      status: error\n",
            output="  e0: '{{E0}}'\n",
        )
    )
    assert out.kind == "ok"
    assert out.output == {"e0": {"passed": True, "verdict": False, "reason": None}}


async def test_exit_fired_success_skips_rest_and_finish() -> None:
    tools = FakeTools()
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: exit\n    input:\n      when: {value: '{{input.n}}', op: eq, to: 0}\n"
            "      status: success\n      message: 'nothing to do ({{input.n}})'\n      output: {count: 0}\n"
            "  - id: E1\n    tool_name: t__echo\n    input: {}\n",
            output="  x: '{{E1}}'\n",
        ),
        {"n": 0},
        tools=tools,
    )
    assert out.kind == "exit" and exit_code(out) == 0
    assert out.exit == {
        "status": "success",
        "message": "nothing to do (0)",
        "step": "E0",
        "output": {"count": 0},
    }
    assert out.output == {"count": 0}
    assert tools.calls == []
    result = out.tool_result()
    assert not result.is_error
    assert result.value == {
        "exited": True,
        "status": "success",
        "message": "nothing to do (0)",
        "output": {"count": 0},
    }


async def test_exit_unconditional_error_and_exit_code_4() -> None:
    out = await run_yaml(
        plan_text("  - id: E0\n    tool_name: exit\n    input: {status: error, message: bad}\n")
    )
    assert out.kind == "exit" and exit_code(out) == 4
    assert out.exit == {"status": "error", "message": "bad", "step": "E0"}
    assert out.tool_result().is_error
    assert "bad" in out.tool_result().error_message


async def test_exit_inside_branch_names_the_body_path() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E4\n    tool_name: decide\n    input:\n      if: {value: 1, op: eq, to: 1}\n"
            "      then:\n        - id: bail\n          tool_name: exit\n          input: {status: success}\n"
        )
    )
    assert out.exit is not None and out.exit["step"] == "E4/then/bail"
    assert out.exit["message"] == "plan exited early"


async def test_infer_exit_uses_the_judge_and_appends_reason() -> None:
    llm = FakeLLM([{"verdict": True, "reason": "clearly blocked"}])
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: exit\n    input:\n      infer: 'Is {{input.s}} blocked?'\n"
            "      status: error\n      message: blocked\n"
        ),
        {"s": "waiting on legal"},
        llm_factory=llm.factory,
    )
    assert out.exit == {
        "status": "error",
        "message": "blocked (clearly blocked)",
        "reason": "clearly blocked",
        "step": "E0",
    }
    assert llm.roles == ["judge"]
    assert "waiting on legal" in llm.structured_calls[0][-1]["content"]


async def test_infer_exit_not_fired_keeps_the_reason() -> None:
    llm = FakeLLM([{"verdict": False, "reason": "on track"}])
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: exit\n    input: {infer: 'blocked?', status: error}\n",
            output="  e: '{{E0}}'\n",
        ),
        llm_factory=llm.factory,
    )
    assert out.output == {"e": {"passed": True, "verdict": False, "reason": "on track"}}


# --- decide --------------------------------------------------------------------------------

DECIDE = """  - id: E0
    tool_name: t__list
    input: {items: "{{input.items}}"}
  - id: E1
    tool_name: decide
    input:
      if: {value: "{{E0.items.length}}", op: gt, to: 0}
      then:
        tool_name: t__echo
        input: {first: "{{E0.items.0}}"}
%s
"""
ELSE = """      else:
        - id: B0
          tool_name: t__echo
          input: {n: 1}
        - id: B1
          tool_name: t__echo
          input: {prev: "{{B0.n}}"}"""


async def test_decide_then_branch_shape() -> None:
    out = await run_yaml(plan_text(DECIDE % ELSE, output="  d: '{{E1}}'\n"), {"items": [5, 6]})
    assert out.output == {"d": {"branch": "then", "verdict": True, "reason": None, "result": {"first": 5}}}
    assert out.steps_executed == 3


async def test_decide_else_list_branch_and_untaken_branch_not_rendered() -> None:
    # `then` reads E0.items.0, which would be EmptyData: it must never be rendered.
    out = await run_yaml(plan_text(DECIDE % ELSE, output="  d: '{{E1}}'\n"), {"items": []})
    assert out.kind == "ok", out.error
    assert out.output == {"d": {"branch": "else", "verdict": False, "reason": None, "result": {"prev": 1}}}
    assert out.steps_executed == 4  # E0, decide, two branch steps


async def test_decide_false_without_else_is_branch_null() -> None:
    out = await run_yaml(plan_text(DECIDE % "", output="  d: '{{E1}}'\n"), {"items": []})
    assert out.output == {"d": {"branch": None, "verdict": False, "reason": None, "result": None}}


async def test_decide_branch_failure_names_branch_and_tool() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E1\n    tool_name: decide\n    input:\n      if: {value: 1, op: eq, to: 1}\n"
            "      then: {tool_name: t__fail, input: {message: nope}}\n"
        )
    )
    assert out.kind == "failed" and exit_code(out) == 1
    assert out.error == "plan failed at step E1 (decide): then (t__fail): nope"


async def test_decide_infer_carries_reason() -> None:
    llm = FakeLLM([{"verdict": True, "reason": "urgent"}])
    out = await run_yaml(
        plan_text(
            "  - id: E1\n    tool_name: decide\n    input:\n      infer: urgent?\n"
            "      then: {tool_name: t__echo, input: {a: 1}}\n",
            output="  d: '{{E1}}'\n",
        ),
        llm_factory=llm.factory,
    )
    assert out.output == {"d": {"branch": "then", "verdict": True, "reason": "urgent", "result": {"a": 1}}}


# --- filter --------------------------------------------------------------------------------

FILTER = """  - id: E1
    tool_name: filter
    input:
      over: "{{input.files}}"
      where: {value: "{{item.status}}", op: ne, to: deleted}
"""


async def test_filter_shape_in_input_order() -> None:
    files = [{"p": "a", "status": "added"}, {"p": "b", "status": "deleted"}, {"p": "c", "status": "modified"}]
    out = await run_yaml(plan_text(FILTER, output="  f: '{{E1}}'\n"), {"files": files})
    assert out.output == {
        "f": {"count": 2, "items": [files[0], files[2]], "dropped": [files[1]], "dropped_count": 1}
    }
    assert out.steps_executed == 1


async def test_filter_empty_over() -> None:
    out = await run_yaml(plan_text(FILTER, output="  f: '{{E1}}'\n"), {"files": []})
    assert out.output == {"f": {"count": 0, "items": [], "dropped": [], "dropped_count": 0}}


async def test_filter_non_array_over_and_bad_item_fail_with_index() -> None:
    out = await run_yaml(plan_text(FILTER, output="  f: '{{E1}}'\n"), {"files": {"a": 1}})
    assert out.error == "plan failed at step E1 (filter): `over` must render to an array, got an object"
    out = await run_yaml(
        plan_text(FILTER, output="  f: '{{E1}}'\n"), {"files": [{"status": "x"}, {"nope": 1}]}
    )
    assert out.error is not None and out.error.startswith(
        "plan failed at step E1 (filter): item 1: {{item.status}}"
    )


async def test_filter_infer_asks_the_judge_per_item() -> None:
    llm = FakeLLM([{"verdict": True, "reason": "code"}, {"verdict": False, "reason": "docs"}])
    out = await run_yaml(
        plan_text(
            "  - id: E1\n    tool_name: filter\n    input:\n      over: '{{input.xs}}'\n"
            "      infer: 'Is {{item}} code?'\n      concurrency: 2\n",
            output="  f: '{{E1}}'\n",
        ),
        {"xs": ["a.py", "b.md"]},
        llm_factory=llm.factory,
    )
    assert out.output == {"f": {"count": 1, "items": ["a.py"], "dropped": ["b.md"], "dropped_count": 1}}
    assert len(llm.structured_calls) == 2


# --- map -----------------------------------------------------------------------------------

MAP = """  - id: E1
    tool_name: map
    input:
      over: "{{input.xs}}"
      concurrency: %d
      do:
        tool_name: t__slow
        input: {n: "{{item.n}}", seconds: "{{item.s}}", fail: "{{item.fail}}"}
"""


def items(count: int, seconds: float, fail: tuple[int, ...] = ()) -> list[dict[str, Any]]:
    return [{"n": i, "s": seconds, "fail": i in fail} for i in range(count)]


async def test_map_shape_and_empty_over() -> None:
    out = await run_yaml(plan_text(MAP % 1, output="  m: '{{E1}}'\n"), {"xs": items(3, 0)})
    assert out.output == {"m": {"count": 3, "results": [{"n": 0}, {"n": 1}, {"n": 2}]}}
    assert out.steps_executed == 4
    out = await run_yaml(plan_text(MAP % 1, output="  m: '{{E1}}'\n"), {"xs": []})
    assert out.output == {"m": {"count": 0, "results": []}}
    assert out.steps_executed == 1


async def test_map_concurrency_keeps_input_order_and_is_faster() -> None:
    tools = FakeTools()
    start = time.perf_counter()
    out = await run_yaml(
        plan_text(MAP % 1, output="  m: '{{E1.results}}'\n"), {"xs": items(20, 0.05)}, tools=tools
    )
    sequential = time.perf_counter() - start
    assert tools.peak == 1
    # Uneven durations: later items finish first, results must still be in input order.
    xs = [{"n": i, "s": 0.05 + 0.01 * ((i * 7) % 5), "fail": False} for i in range(20)]
    tools = FakeTools()
    start = time.perf_counter()
    out = await run_yaml(plan_text(MAP % 5, output="  m: '{{E1.results}}'\n"), {"xs": xs}, tools=tools)
    concurrent = time.perf_counter() - start
    assert out.output == {"m": [{"n": i} for i in range(20)]}
    assert tools.peak == 5
    assert sequential >= 20 * 0.05
    assert concurrent < sequential / 2.5  # about a quarter of the sequential time


async def test_map_failure_reports_lowest_index_and_skips_unstarted() -> None:
    tools = FakeTools()
    xs = items(20, 0.02, fail=(7, 3))
    xs[7]["s"] = 0.0  # item 7 fails first in time; item 3 is still the one reported
    out = await run_yaml(plan_text(MAP % 5), {"xs": xs}, tools=tools)
    assert out.kind == "failed"
    assert out.error == "plan failed at step E1 (map): do item 3 (t__slow): item 3 broke"
    started = sorted(args["n"] for _, args in tools.calls)
    assert started == list(range(len(started))) and len(started) < 20  # unstarted items skipped
    assert tools.active == 0  # in-flight items finished


async def test_map_multi_step_body_counts_and_isolates() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E1\n    tool_name: map\n    input:\n      over: '{{input.xs}}'\n      do:\n"
            "        - id: A\n          tool_name: t__double\n          input: {n: '{{item}}'}\n"
            "        - id: B\n          tool_name: t__echo\n          input: {i: '{{index}}', v: '{{A.value}}'}\n",
            output="  m: '{{E1}}'\n",
        ),
        {"xs": [1, 2, 3]},
    )
    assert out.output == {
        "m": {"count": 3, "results": [{"i": 0, "v": 2}, {"i": 1, "v": 4}, {"i": 2, "v": 6}]}
    }
    assert out.steps_executed == 7


async def test_map_progress_events_are_throttled() -> None:
    rec = Recorder()
    await run_yaml(plan_text(MAP % 4), {"xs": items(200, 0)}, events=rec)
    progress = [f for e, f in rec.events if e == "progress"]
    assert progress and progress[-1] == {"step": "E1", "done": 200, "total": 200}
    assert len(progress) < 20


# --- reduce --------------------------------------------------------------------------------

REDUCE = """  - id: E1
    tool_name: reduce
    input:
      over: "{{input.xs}}"
      initial: {total: 0}
      do:
        tool_name: t__add
        input: {total: "{{accumulator.total}}", item: "{{item}}", seen: "{{index}}"}
"""


async def test_reduce_threads_the_accumulator() -> None:
    out = await run_yaml(plan_text(REDUCE, output="  r: '{{E1}}'\n"), {"xs": [5, 7, 9]})
    assert out.output == {"r": {"count": 3, "result": {"total": 21, "seen": 2}}}
    assert out.steps_executed == 4


async def test_reduce_empty_over_keeps_initial_and_default_null() -> None:
    out = await run_yaml(plan_text(REDUCE, output="  r: '{{E1}}'\n"), {"xs": []})
    assert out.output == {"r": {"count": 0, "result": {"total": 0}}}
    text = plan_text(
        "  - id: E1\n    tool_name: reduce\n    input:\n      over: '{{input.xs}}'\n"
        "      do: {tool_name: t__echo, input: {a: 1}}\n",
        output="  r: '{{E1}}'\n",
    )
    out = await run_yaml(text, {"xs": []})
    assert out.output == {"r": {"count": 0, "result": None}}


# --- ask -----------------------------------------------------------------------------------

ASK = """  - id: E0
    tool_name: ask
    input:
      prompt: "Which channel for {{input.v}}?"
      output_schema:
        type: object
        required: [channel]
        properties:
          channel: {enum: [stable, beta]}
          confirm: {type: boolean}
%s
"""


class ListAsker(Asker):
    def __init__(self, answers: list[Answer]) -> None:
        super().__init__()
        self.answers = answers
        self.prompts: list[str] = []
        self.keys: list[str | None] = []

    async def _ask(self, question: Any) -> Answer:
        self.prompts.append(question.prompt)
        self.keys.append(question.key)
        return self.answers.pop(0)


async def test_ask_answered_shape_and_key() -> None:
    asker = ListAsker([Answer(True, {"channel": "beta", "confirm": True})])
    out = await run_yaml(plan_text(ASK % "", output="  a: '{{E0}}'\n"), {"v": "1.2"}, asker=asker)
    assert out.output == {"a": {"answer": {"channel": "beta", "confirm": True}, "answered": True}}
    assert asker.prompts == ["Which channel for 1.2?"] and asker.keys == ["E0"]
    assert out.steps_executed == 1


async def test_ask_declined_with_default() -> None:
    extra = "      when_unanswered: default\n      default: {channel: '{{input.fallback}}', confirm: false}"
    asker = ListAsker([Answer.declined()])
    out = await run_yaml(
        plan_text(ASK % extra, output="  a: '{{E0}}'\n"), {"v": 1, "fallback": "stable"}, asker=asker
    )
    assert out.output == {
        "a": {
            "answer": {"channel": "stable", "confirm": False},
            "answered": False,
            "declined": True,
            "reason": "declined",
        }
    }


async def test_ask_unavailable_fails_by_default() -> None:
    out = await run_yaml(plan_text(ASK % "", output="  a: '{{E0}}'\n"), {"v": 1}, asker=UnavailableAsker())
    assert out.kind == "failed"
    assert (
        out.error
        == "plan failed at step E0 (ask): the question was not answered (unavailable): Which channel for 1?"
    )


async def test_ask_without_any_asker_is_unavailable() -> None:
    extra = "      when_unanswered: default\n      default: {channel: stable}"
    out = await run_yaml(plan_text(ASK % extra, output="  a: '{{E0}}'\n"), {"v": 1})
    assert out.output == {"a": {"answer": {"channel": "stable"}, "answered": False, "reason": "unavailable"}}


async def test_ask_answer_is_validated() -> None:
    out = await run_yaml(
        plan_text(ASK % "", output="  a: '{{E0}}'\n"),
        {"v": 1},
        asker=ScriptedAsker({"E0": {"channel": "nightly"}}),
    )
    assert out.kind == "failed"
    assert "the answer does not fit the schema" in (out.error or "")


async def test_ask_templated_default_is_validated_after_rendering() -> None:
    extra = "      when_unanswered: default\n      default: {channel: '{{input.fallback}}'}"
    out = await run_yaml(plan_text(ASK % extra), {"v": 1, "fallback": "weekly"}, asker=UnavailableAsker())
    assert out.kind == "failed" and "default answer does not fit" in (out.error or "")


async def test_asks_in_a_concurrent_map_come_in_item_order() -> None:
    class Slow(Asker):
        def __init__(self) -> None:
            super().__init__()
            self.order: list[str] = []
            self.active = 0
            self.peak = 0

        async def _ask(self, question: Any) -> Answer:
            self.active += 1
            self.peak = max(self.peak, self.active)
            await asyncio.sleep(0.005)
            self.active -= 1
            self.order.append(question.prompt)
            return Answer(True, {"keep": True})

    asker = Slow()
    # Later items reach their question first (shorter sleep); order must still be by item.
    text = plan_text(
        "  - id: E1\n    tool_name: map\n    input:\n      over: '{{input.xs}}'\n      concurrency: 6\n      do:\n"
        "        - id: W\n          tool_name: t__slow\n          input: {seconds: '{{item.s}}'}\n"
        "        - id: Q\n          tool_name: ask\n          input:\n            prompt: 'keep {{index}}?'\n"
        "            output_schema: {type: object, properties: {keep: {type: boolean}}}\n",
        output="  n: '{{E1.count}}'\n",
    )
    xs = [{"s": 0.06 - 0.01 * i} for i in range(6)]
    out = await run_yaml(text, {"xs": xs}, asker=asker)
    assert out.kind == "ok", out.error
    assert asker.order == [f"keep {i}?" for i in range(6)]
    assert asker.peak == 1


# --- nesting, inputs, finishes -------------------------------------------------------------


def _nested_catalog(texts: list[str]) -> Catalog:
    catalog = Catalog([FakeTools()])
    catalog.add_source(PlanSource(None, catalog, plans=[plan_from_yaml(t) for t in texts], servers=set()))
    return catalog


async def test_plan_cycle_fails_at_once_and_names_the_chain() -> None:
    a = "identifier: a\nname: A\ndescription: a\nsteps:\n  - id: E0\n    tool_name: plan__b\n    input: {}\n"
    b = "identifier: b\nname: B\ndescription: b\nsteps:\n  - id: E0\n    tool_name: plan__a\n    input: {}\n"
    catalog = _nested_catalog([a, b])
    out = await run_plan(plan_from_yaml(a), {}, catalog=catalog, ctx=_ctx(), llm_factory=None)
    assert out.kind == "failed"
    assert "plan cycle: a → b → a" in (out.error or "")
    assert out.error is not None and out.error.startswith("plan failed at step E0 (plan__b): ")


async def test_depth_limit_of_eight() -> None:
    """As graph's MAX_PLAN_DEPTH (pipeline/mod.rs): a top-level plan and 8 nested ones run."""
    texts = []
    for i in range(11):
        step = (
            f"  - id: E0\n    tool_name: plan__p{i + 1}\n    input: {{}}\n"
            if i < 10
            else ("  - id: E0\n    tool_name: t__echo\n    input: {deep: true}\n")
        )
        texts.append(
            f"identifier: p{i}\nname: P{i}\ndescription: p\nsteps:\n{step}output:\n  r: '{{{{E0}}}}'\n"
        )
    catalog = _nested_catalog(texts)
    out = await run_plan(plan_from_yaml(texts[0]), {}, catalog=catalog, ctx=_ctx(), llm_factory=None)
    assert out.kind == "failed"
    assert "deeper than 8: p0 → p1 → p2 → p3 → p4 → p5 → p6 → p7 → p8 → p9" in (out.error or "")
    ok = await run_plan(plan_from_yaml(texts[2]), {}, catalog=catalog, ctx=_ctx(), llm_factory=None)
    assert ok.kind == "ok"  # p2 and eight nested plans, p3 … p10


def _ctx() -> Any:
    from graphchat.catalog.base import CallContext

    return CallContext()


async def test_inputs_defaults_then_validation() -> None:
    extra = (
        "input_schema:\n  type: object\n  required: [name]\n  properties:\n"
        "    name: {type: string}\n    n: {type: integer, default: 3}\n"
    )
    text = plan_text(
        "  - id: E0\n    tool_name: t__echo\n    input: {n: '{{input.n}}'}\n",
        output="  r: '{{E0}}'\n",
        extra=extra,
    )
    tools = FakeTools()
    out = await run_yaml(text, {"name": "x"}, tools=tools)
    assert out.output == {"r": {"n": 3}}
    out = await run_yaml(text, {"n": "many"}, tools=(tools := FakeTools()))
    assert out.kind == "input" and exit_code(out) == 3
    assert any("'name' is a required property" in p for p in out.problems)
    assert any("'many' is not of type 'integer'" in p for p in out.problems)
    assert tools.calls == []


async def test_step_error_names_step_and_tool() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: t__echo\n    input: {}\n"
            "  - id: E2\n    tool_name: t__fail\n    input: {message: 'server went away'}\n"
        )
    )
    assert out.error == "plan failed at step E2 (t__fail): server went away"
    assert out.steps_executed == 1  # as graph (state.rs): a failed step has no result, is not counted


async def test_unknown_plan_tool_fails_before_any_step() -> None:
    tools = FakeTools()
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: t__echo\n    input: {}\n  - id: E1\n    tool_name: plan__nope\n    input: {}\n"
        ),
        tools=tools,
    )
    assert out.error == "plan failed at step E1 (plan__nope): unknown tool: plan__nope"
    assert tools.calls == [] and out.steps_executed == 0


async def test_empty_data_in_output_mode_is_a_failure() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: t__list\n    input: {items: []}\n",
            output="  first: '{{E0.items.0}}'\n",
        )
    )
    assert out.kind == "failed" and out.empty_data and exit_code(out) == 1
    assert "E0.items is an empty array" in (out.error or "")


async def test_empty_data_in_a_step_of_a_silent_plan_fails() -> None:
    out = await run_yaml(
        plan_text(
            "  - id: E0\n    tool_name: t__list\n    input: {items: []}\n"
            "  - id: E1\n    tool_name: t__echo\n    input: {x: '{{E0.items.0.id}}'}\n"
        )
    )
    assert out.kind == "failed" and out.empty_data
    assert out.error is not None and out.error.startswith(
        "plan failed at step E1 (t__echo): {{E0.items.0.id}}"
    )


SOLVER = """solver:
  query_to_answer: "Summarize for {{input.team}}"
  system_prompt: Be brief.
  data:
    issues: "{{E0.items}}"
    first: "{{E0.items.0}}"
"""


async def test_solver_finish_streams_and_returns_answer() -> None:
    llm = FakeLLM(text="All quiet.")
    chunks: list[str] = []
    plan = plan_from_yaml(
        plan_text("  - id: E0\n    tool_name: t__list\n    input: {items: [1]}\n", extra=SOLVER)
    )
    out = await run_plan(
        plan,
        {"team": "core"},
        catalog=Catalog([FakeTools()]),
        ctx=_ctx(),
        llm_factory=llm.factory,
        on_text=chunks.append,
    )
    assert out.kind == "ok" and out.answer == "All quiet." and chunks == ["All quiet."]
    assert llm.roles == ["solver"]
    system, user = llm.complete_calls[0]
    assert "Be brief." in system["content"]
    assert "Summarize for core" in user["content"] and '"first": 1' in user["content"]
    assert out.tool_result().value == {"answer": "All quiet."}


async def test_solver_is_told_what_was_not_found() -> None:
    llm = FakeLLM(text="Nothing found.")
    plan = plan_from_yaml(
        plan_text("  - id: E0\n    tool_name: t__list\n    input: {items: []}\n", extra=SOLVER)
    )
    out = await run_plan(
        plan, {"team": "core"}, catalog=Catalog([FakeTools()]), ctx=_ctx(), llm_factory=llm.factory
    )
    assert out.kind == "ok" and out.answer == "Nothing found."
    user = llm.complete_calls[0][1]["content"]
    assert "not found: first: {{E0.items.0}}: E0.items is an empty array" in user


async def test_solver_still_answers_when_empty_data_stopped_the_steps() -> None:
    # E1 hits EmptyData, so E1 and E2 never run; the solver's templates that read them must
    # degrade to "not found" (not fail as unknown roots), and the solver is told so.
    llm = FakeLLM(text="No issues were found.")
    plan = plan_from_yaml(
        plan_text(
            "  - id: E0\n    tool_name: t__list\n    input: {items: []}\n"
            "  - id: E1\n    tool_name: t__echo\n    input: {id: '{{E0.items.0.id}}'}\n"
            "  - id: E2\n    tool_name: t__echo\n    input: {again: '{{E1.id}}'}\n",
            extra="solver:\n  query_to_answer: 'Explain issue {{E1.id}}'\n"
            "  data: {all: '{{E0.items}}', first: '{{E1}}', more: '{{E2.again}}'}\n",
        )
    )
    tools = FakeTools()
    out = await run_plan(plan, {}, catalog=Catalog([tools]), ctx=_ctx(), llm_factory=llm.factory)
    assert out.kind == "ok", out.error
    assert out.answer == "No issues were found."
    assert [name for name, _ in tools.calls] == ["t__list"]
    user = llm.complete_calls[0][1]["content"]
    assert "data ran out (step E1 (t__echo): {{E0.items.0.id}}: E0.items is an empty array)" in user
    # As graph (pipeline/mod.rs `solve`): a key that does not render is "(unavailable: <why>)".
    assert (
        '"all": []' in user
        and '"first": "(unavailable: {{E1}}' in user
        and '"more": "(unavailable: {{E2.again}}' in user
    )
    assert "not found: first: {{E1}}: step E1 did not run" in user
    assert "not found: more: {{E2.again}}: step E2 did not run" in user
    assert out.steps_executed == 1  # E1 failed while rendering its input: it never ran


async def test_solver_data_is_cut_and_the_cut_is_said() -> None:
    llm = FakeLLM()
    big = ["x" * 5000] * 100
    plan = plan_from_yaml(
        plan_text(
            "  - id: E0\n    tool_name: t__list\n    input: {items: '{{input.big}}'}\n",
            extra="solver:\n  query_to_answer: sum up\n  data: '{{E0.items}}'\n",
        )
    )
    out = await run_plan(
        plan, {"big": big}, catalog=Catalog([FakeTools()]), ctx=_ctx(), llm_factory=llm.factory
    )
    assert out.kind == "ok"
    user = llm.complete_calls[0][1]["content"]
    assert len(user) < 70_000
    assert "The data was too large and was cut" in user


async def test_silent_plan_tool_result_and_events() -> None:
    rec = Recorder()
    out = await run_yaml(plan_text("  - id: E0\n    tool_name: t__echo\n    input: {a: 1}\n"), events=rec)
    assert out.kind == "ok" and out.finish == "silent" and out.steps_executed == 1
    names = [e for e, _ in rec.events]
    assert names[:1] == ["step_started"] and "step_finished" in names


@pytest.mark.parametrize("shape", ["single", "list"])
async def test_plan_tool_result_of_an_output_plan(shape: str) -> None:
    inner = (
        "identifier: inner\nname: I\ndescription: doubles\ninput_schema:\n  type: object\n  required: [n]\n"
        "  properties: {n: {type: integer}}\nsteps:\n  - id: E0\n    tool_name: t__double\n    input: {n: '{{input.n}}'}\n"
        "output:\n  v: '{{E0.value}}'\n"
    )
    outer_body = (
        "        tool_name: plan__inner\n        input: {n: '{{item}}'}\n"
        if shape == "single"
        else "        - id: C\n          tool_name: plan__inner\n          input: {n: '{{item}}'}\n"
    )
    outer = (
        "identifier: outer\nname: O\ndescription: o\nsteps:\n  - id: E0\n    tool_name: map\n    input:\n"
        f"      over: [1, 2]\n      concurrency: 2\n      do:\n{outer_body}output:\n  r: '{{{{E0.results}}}}'\n"
    )
    catalog = _nested_catalog([inner, outer])
    out = await run_plan(plan_from_yaml(outer), {}, catalog=catalog, ctx=_ctx(), llm_factory=None)
    assert out.output == {"r": [{"v": 2}, {"v": 4}]}
    bad = await catalog.call("plan__inner", {}, _ctx())
    assert bad.is_error and "'n' is a required property" in bad.error_message


# --- what a person sees ------------------------------------------------------------------------


class HumanRecorder(Recorder):
    human = True  # like the terminal's and the chat's sinks


@pytest.mark.parametrize(("sink", "per_item_lines"), [(HumanRecorder, 0), (Recorder, 3)])
async def test_map_items_do_not_flood_a_sink_a_person_reads(
    sink: type[Recorder], per_item_lines: int
) -> None:
    events = sink()
    out = await run_yaml(
        plan_text(
            "  - id: M\n    tool_name: map\n    input:\n      over: [1, 2, 3]\n"
            "      do: {tool_name: t__double, input: {n: '{{item}}'}}\n",
            output="  r: '{{M.results}}'\n",
        ),
        events=events,
    )
    assert out.output == {"r": [{"value": 2}, {"value": 4}, {"value": 6}]}
    started = [f["tool"] for e, f in events.events if e == "tool_started"]
    assert started.count("t__double") == per_item_lines  # JSONL and the like keep every call
    assert any(e == "progress" for e, _ in events.events)  # the map's own progress still shows
