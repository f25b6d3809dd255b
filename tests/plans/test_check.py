"""Issue 21: the data-flow checker (`graphchat.plans.check`) and the control steps' result
declarations it reads (`result(step, known)` in each step module).

- No false rejection: every bundled plan (plans/), every plan of docs/plans.md, graph's example
  plans (tests/fixtures/graph, tests/plans_reference) and every plan file of the tests is free of
  errors and evidence findings. (The same plans go through the real `plan validate` with their
  servers in tests/cli/test_plan_validate.py, tests/test_docs_examples.py and
  tests/catalog/test_graph_tools.py; here every file is checked at once.)
- Every declaration matches what its step's `run` returns (a real run of the executor).
- The tiers: what is certain, what depends on evidence, what is only a note.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graphchat.plans.check import ERROR, EVIDENCE, NOTE, Source, check_plan, tag
from graphchat.plans.loader import load_plan, load_plan_text
from graphchat.plans.model import PlanLoadError
from graphchat.plans.steps import CONTROL
from tests.plan_support import plan_from_yaml, run_yaml

REPO = Path(__file__).resolve().parent.parent.parent
TESTS = REPO / "tests"
NOT_PLANS = ("plans_malformed", "adversarial")


def every_plan() -> list[tuple[str, Any]]:
    from tests.test_docs_examples import plans as doc_plans

    found: list[tuple[str, Any]] = []
    files = (
        sorted((REPO / "plans").glob("*.yaml")) + sorted(TESTS.rglob("*.yaml")) + sorted(TESTS.rglob("*.yml"))
    )
    for path in files:
        if any(part in NOT_PLANS for part in path.parts):
            continue
        try:
            plan = load_plan(path)
        except PlanLoadError:
            continue  # not a plan (a servers file, an answers file, a tool)
        found.append((str(path.relative_to(REPO)), plan))
    for example in doc_plans():
        found.append(
            (f"docs/plans.md:{example.identifier}", load_plan_text(example.text, example.identifier))
        )
    return found


def test_no_plan_of_the_project_is_rejected() -> None:
    plans = every_plan()
    names = {name for name, _ in plans}
    assert len(plans) >= 30
    assert {"plans/world_clock.yaml", "tests/plans_reference/zone_filter.yaml"} <= names
    assert any(n.startswith("tests/fixtures/graph/") for n in names)
    assert any(n.startswith("docs/plans.md:") for n in names)
    rejected = [
        f"{name}: {finding.text}"
        for name, plan in plans
        for finding in check_plan(plan)
        if finding.tier in (ERROR, EVIDENCE)
    ]
    assert rejected == []


# --- the declarations match the runs ------------------------------------------------------------------


class _Unknown:
    def body(self, name: str) -> None:
        return None

    def over_item(self) -> None:
        return None


RUNS = {
    "map": "{tool_name: map, input: {over: [1, 2], do: {tool_name: t__echo, input: {n: '{{item}}'}}}}",
    "filter": "{tool_name: filter, input: {over: [1, 2], where: {value: '{{item}}', op: gt, to: 1}}}",
    "reduce": "{tool_name: reduce, input: {over: [1, 2], do: {tool_name: t__echo, input: {n: '{{item}}'}}}}",
    "decide": "{tool_name: decide, input: {if: {value: 1, op: eq, to: 1}, then: {tool_name: t__echo, input: {}}}}",
    "exit": "{tool_name: exit, input: {when: {value: 1, op: eq, to: 2}, status: error}}",
    "ask": (
        "{tool_name: ask, input: {prompt: p, output_schema: {type: object, properties: {a: {type: string}}}, "
        "when_unanswered: default, default: {a: x}}}"
    ),
}


@pytest.mark.parametrize("tool", sorted(RUNS))
async def test_each_declaration_is_what_the_step_returns(tool: str) -> None:
    text = (
        f"identifier: d\nname: d\ndescription: d\nsteps:\n  - {{id: E0, {RUNS[tool][1:-1]}}}\n"
        "output: {all: '{{E0}}'}\n"
    )
    outcome = await run_yaml(text)
    assert outcome.kind == "ok", outcome.error
    returned = outcome.output["all"]
    step = plan_from_yaml(text).steps[0]
    declared = CONTROL[tool].result(step, _Unknown())
    assert declared["additionalProperties"] is False
    assert set(returned) <= set(declared["properties"]), (returned, declared)
    assert set(declared["required"]) <= set(returned)


def test_every_control_step_declares_its_result() -> None:
    for name, module in CONTROL.items():
        assert callable(getattr(module, "result", None)), name


# --- tiers ---------------------------------------------------------------------------------------


def _findings(text: str, shapes: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    plan = load_plan_text(text, "<t>")
    return [(f.tier, f.text) for f in check_plan(plan, None, (shapes or {}).get)]


HEAD = "identifier: t\nname: t\ndescription: d\n"


def test_unknown_stays_unknown() -> None:
    text = HEAD + (
        "steps:\n  - {id: E0, tool_name: s__x, input: {}}\n"
        "output: {a: '{{E0.anything.at.all}}', b: '{{input.whatever}}', c: '{{E0.items.name}}'}\n"
    )
    assert _findings(text) == []


def test_learned_shapes_decide_by_evidence() -> None:
    shapes = {
        "s__x": {
            "schema": {
                "type": "object",
                "properties": {"zone": {"type": "string"}, "text": {"type": "string"}},
            },
            "seen_count": 3,
        }
    }
    text = (
        HEAD
        + "steps:\n  - {id: E0, tool_name: s__x, input: {}}\noutput: {a: '{{E0.zon}}', b: '{{E0.missing}}'}\n"
    )
    found = _findings(text, shapes)
    assert found == [
        (
            EVIDENCE,
            "output.a: '{{E0.zon}}': no field 'zon': did you mean 'zone'? "
            "(E0 is s__x's result {zone, text}, learned from 3 calls)",
        ),
        (
            NOTE,
            "output.b: '{{E0.missing}}': no field 'missing' seen so far (it may be optional) "
            "(E0 is s__x's result {zone, text}, learned from 3 calls)",
        ),
    ]


def test_a_decide_branch_and_a_gated_exit_message_are_evidence_not_certain() -> None:
    text = HEAD + (
        "input_schema: {type: object, properties: {n: {type: integer}}}\n"
        "steps:\n"
        "  - id: E0\n    tool_name: decide\n    input:\n"
        "      if: {value: '{{input.n}}', op: eq, to: 1}\n"
        "      then: {tool_name: s__x, input: {v: '{{input.m}}'}}\n"
        "  - id: E1\n    tool_name: exit\n    input:\n"
        "      when: {value: '{{input.n}}', op: eq, to: 2}\n      status: error\n      message: '{{input.nn}}'\n"
        "output: {n: '{{input.n}}'}\n"
    )
    tiers = [tier for tier, _ in _findings(text)]
    assert tiers == [EVIDENCE, EVIDENCE]


def test_per_item_fields_and_sometimes_fields_follow_the_step_modules() -> None:
    """What each step module declares: `filter`'s `where` sees `{{item}}` (the `over` list's
    element), `reduce`'s body sees `{{accumulator}}` (unknown) and `{{index}}`, the plan's
    inputs stay certain there; `ask`'s `default` is used only when nobody answers (evidence)."""
    text = HEAD + (
        "input_schema: {type: object, properties: {n: {type: integer}}}\n"
        "steps:\n"
        "  - id: E0\n    tool_name: filter\n    input:\n"
        "      over: [{a: 1}]\n      where: {value: '{{item.b}}', op: eq, to: '{{input.q}}'}\n"
        "  - id: E1\n    tool_name: reduce\n    input:\n"
        "      over: [1, 2]\n      initial: 0\n"
        "      do: {tool_name: s__x, input: {acc: '{{accumulator.any}}', i: '{{index}}', v: '{{input.r}}'}}\n"
        "  - id: E2\n    tool_name: ask\n    input:\n"
        "      prompt: 'n?'\n      output_schema: {type: object, properties: {x: {type: string}}}\n"
        "      when_unanswered: default\n      default: {x: '{{input.d}}'}\n"
        "output: {n: '{{input.n}}'}\n"
    )
    assert [(tier, text.split(":")[0] + ":" + text.split(":")[1]) for tier, text in _findings(text)] == [
        (EVIDENCE, "step E0: input.where.value"),
        (ERROR, "step E0: input.where.to"),
        (ERROR, "step E1/do: input.v"),
        (EVIDENCE, "step E2: input.default.x"),
    ]
    assert "(item is E0's `over` list {a})" in _findings(text)[0][1]


def test_a_section_test_is_never_a_finding_but_a_rooted_path_inside_is() -> None:
    text = HEAD + (
        "input_schema: {type: object, properties: {people: {type: array}}}\n"
        "steps:\n  - {id: E0, tool_name: map, input: {over: [1], do: {tool_name: s__x, input: {}}}}\n"
        "output:\n"
        "  ok: '{{#E0.nothing}}x{{/E0.nothing}}{{#input.people}}{{name}}{{/input.people}}'\n"
        "  bad: '{{#input.people}}{{E0.cont}}{{/input.people}}'\n"
    )
    found = _findings(text)
    assert [(tier, text.split(":")[0]) for tier, text in found] == [(ERROR, "output.bad")]


def test_tag_keeps_unknown_unknown() -> None:
    assert tag(None, Source("learned", "x")) is None
    assert tag({}, Source("learned", "x")) is None


def test_an_undeclared_input_is_certain_unless_other_keys_are_welcome() -> None:
    base = HEAD + "input_schema: {type: object, properties: {a: {type: string}}%s}\n"
    body = "steps:\n  - {id: E0, tool_name: s__x, input: {v: '{{input.b}}'}}\n"
    closed = _findings(base % "" + body)
    assert closed == [
        (
            ERROR,
            "step E0: input.v: '{{input.b}}': 'b' is not an input of this plan: did you mean 'a'? (inputs: a)",
        )
    ]
    assert _findings(base % ", additionalProperties: true" + body) == []
    assert _findings(HEAD + "steps:\n  - {id: E0, tool_name: s__x, input: {v: '{{input.b}}'}}\n") == []
