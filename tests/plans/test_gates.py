"""Gates: strict logical evaluation, combinators, and load-time structural checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphchat.plans.gates import GATE_OPS, GateError, evaluate, gate_problems, is_infer, json_equal
from graphchat.template import BadPath, EmptyData, MissingStep

SCOPE = {
    "input": {"limit": 5, "name": "core team"},
    "E0": {"issues": [{"id": 1}, {"id": 2}, {"id": 3}], "none": [], "status": "open", "n": 3, "flag": True},
}


def ev(value: object, op: str, to: object = None, *, omit_to: bool = False) -> tuple[bool, str]:
    gate = {"value": value, "op": op} if omit_to else {"value": value, "op": op, "to": to}
    return evaluate(gate, SCOPE, step="E1")


def test_gate_ops_are_the_documented_set() -> None:
    assert GATE_OPS == {"eq", "ne", "gt", "lt", "gte", "lte", "empty", "not_empty", "contains"}


# --- equality ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (1, 1.0, True),
        (0, 0.0, True),
        ("5", 5, False),
        (True, 1, False),
        (False, 0, False),
        (True, True, True),
        (None, None, True),
        (None, False, False),
        ("", None, False),
        ([1, 2], [1.0, 2], True),
        ([1], [True], False),
        ([1, 2], [2, 1], False),
        ({"a": 1}, {"a": 1.0}, True),
        ({"a": 1}, {"a": True}, False),
        ({"a": 1}, {"a": 1, "b": 2}, False),
        ([], {}, False),
        ("open", "open", True),
    ],
)
def test_strict_json_equality(a: object, b: object, equal: bool) -> None:
    assert json_equal(a, b) is equal
    assert json_equal(b, a) is equal
    assert ev(a, "eq", b)[0] is equal
    assert ev(a, "ne", b)[0] is not equal


def test_typed_splice_feeds_the_comparison() -> None:
    assert ev("{{E0.issues.length}}", "eq", 3) == (True, "3 eq 3")
    assert ev("{{E0.issues.length}}", "eq", "3")[0] is False
    assert ev("{{E0.status}}", "eq", "open") == (True, '"open" eq "open"')
    assert ev("{{E0.n}}", "eq", "{{E0.issues.length}}")[0] is True
    assert ev("{{E0.flag}}", "eq", True)[0] is True
    assert ev("{{E0.flag}}", "eq", 1)[0] is False


def test_missing_to_means_null_for_equality() -> None:
    assert ev(None, "eq", omit_to=True)[0] is True
    assert ev(0, "eq", omit_to=True)[0] is False


# --- ordering ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "op", "b", "verdict", "reason"),
    [
        (3, "gt", 2, True, "3 gt 2"),
        (3, "gt", 5, False, "3 lte 5"),
        (3, "gte", 3, True, "3 gte 3"),
        (2.5, "lt", 3, True, "2.5 lt 3"),
        (3, "lt", 3, False, "3 gte 3"),
        (3, "lte", 3.0, True, "3 lte 3.0"),
        (-1, "lte", -2, False, "-1 gt -2"),
    ],
)
def test_ordering_on_numbers(a: object, op: str, b: object, verdict: bool, reason: str) -> None:
    assert ev(a, op, b) == (verdict, reason)


@pytest.mark.parametrize(
    ("a", "b"), [("a", "b"), ("5", 3), (True, 0), (3, False), (None, 1), ([1], 1), (1, {"a": 1})]
)
@pytest.mark.parametrize("op", ["gt", "lt", "gte", "lte"])
def test_ordering_on_anything_else_is_an_error(a: object, b: object, op: str) -> None:
    with pytest.raises(GateError, match="numbers"):
        ev(a, op, b)


def test_ordering_after_rendering_mixed_text_is_an_error() -> None:
    with pytest.raises(GateError):
        ev("{{E0.n}} issues", "gt", 1)


# --- empty -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "empty"),
    [
        (None, True),
        ("", True),
        ([], True),
        ({}, True),
        ("x", False),
        ([None], False),
        ({"a": None}, False),
        (0, False),
        (False, False),
        ("{{E0.none}}", True),
        ("{{E0.issues}}", False),
    ],
)
def test_empty_and_not_empty(value: object, empty: bool) -> None:
    assert ev(value, "empty", omit_to=True)[0] is empty
    assert ev(value, "not_empty", omit_to=True)[0] is not empty
    assert ev(value, "empty", "ignored")[0] is empty


def test_empty_reasons() -> None:
    assert ev([], "empty", omit_to=True) == (True, "[] is empty")
    assert ev([1], "empty", omit_to=True) == (False, "[1] is not empty")


# --- contains ----------------------------------------------------------------------------


def test_contains_substring_and_membership() -> None:
    assert ev("{{input.name}}", "contains", "team") == (True, '"core team" contains "team"')
    assert ev("{{input.name}}", "contains", "x") == (False, '"core team" does not contain "x"')
    assert ev([1, 2, 3], "contains", 2.0)[0] is True
    assert ev([1, 2, 3], "contains", True)[0] is False
    assert ev(["5"], "contains", 5)[0] is False
    assert ev([{"id": 1}], "contains", {"id": 1})[0] is True
    assert ev("{{E0.issues}}", "contains", {"id": 3})[0] is True
    assert ev([None], "contains", omit_to=True)[0] is True


@pytest.mark.parametrize(
    ("a", "b"), [("abc", 1), ("abc", None), (5, 5), ({"a": 1}, "a"), (None, "x"), (True, True)]
)
def test_contains_on_anything_else_is_an_error(a: object, b: object) -> None:
    with pytest.raises(GateError, match="contains"):
        ev(a, "contains", b)


# --- templates that fail -----------------------------------------------------------------


def test_template_errors_propagate_with_the_step() -> None:
    with pytest.raises(MissingStep) as missing:
        ev("{{E9.x}}", "empty", omit_to=True)
    assert missing.value.step == "E1"
    with pytest.raises(BadPath):
        ev("{{E0.nope}}", "empty", omit_to=True)
    with pytest.raises(EmptyData):
        ev("{{E0.none.0}}", "eq", 1)
    with pytest.raises(BadPath):
        ev(1, "eq", "{{E0.nope}}")


def test_empty_does_not_render_to() -> None:
    assert ev([], "empty", "{{E9.never}}")[0] is True


# --- combinators -------------------------------------------------------------------------

TRUE = {"value": 1, "op": "eq", "to": 1}
FALSE = {"value": 1, "op": "eq", "to": 2}
BROKEN = {"value": "{{E9.x}}", "op": "eq", "to": 1}


def test_all_any_not() -> None:
    assert evaluate({"all": [TRUE, TRUE]}, SCOPE) == (True, "all hold: 1 eq 1; 1 eq 1")
    assert evaluate({"all": [TRUE, FALSE]}, SCOPE) == (False, "not all hold: 1 ne 2")
    assert evaluate({"any": [FALSE, TRUE]}, SCOPE) == (True, "1 eq 1")
    assert evaluate({"any": [FALSE, FALSE]}, SCOPE) == (False, "none hold: 1 ne 2; 1 ne 2")
    assert evaluate({"not": FALSE}, SCOPE) == (True, "1 ne 2")
    assert evaluate({"not": {"any": [FALSE, {"all": [TRUE, TRUE]}]}}, SCOPE)[0] is False


def test_combinators_short_circuit_left_to_right() -> None:
    assert evaluate({"all": [FALSE, BROKEN]}, SCOPE)[0] is False
    assert evaluate({"any": [TRUE, BROKEN]}, SCOPE)[0] is True
    with pytest.raises(MissingStep):
        evaluate({"all": [TRUE, BROKEN]}, SCOPE)


def test_infer_gates_are_not_evaluated_here() -> None:
    assert is_infer({"infer": "is it?"})
    assert not is_infer(TRUE)
    assert not is_infer({"all": [TRUE]})
    with pytest.raises(GateError, match="infer"):
        evaluate({"infer": "Is {{E0.status}} bad?"}, SCOPE)


def test_malformed_gates_raise_gate_error_at_run_time() -> None:
    for gate in ({"value": 1, "op": "equals", "to": 1}, {"op": "eq", "to": 1}, {"all": TRUE}, 5):
        with pytest.raises(GateError):
            evaluate(gate, SCOPE)  # type: ignore[arg-type]


# --- load-time checks --------------------------------------------------------------------


@pytest.mark.parametrize(
    "gate",
    [
        {"value": "{{E0.issues.length}}", "op": "gt", "to": 5},
        {"value": "{{E0.issues}}", "op": "empty"},
        {"value": "{{E0.issues}}", "op": "not_empty", "to": None},
        {"value": "{{E0.status}}", "op": "eq"},
        {"value": "{{E0.status}}", "op": "contains", "to": "op"},
        {"value": ["a", "b"], "op": "contains", "to": "{{input.x}}"},
        {"value": "{{input.n}}", "op": "lte", "to": "{{input.max}}"},
        {"infer": "Is {{E0.status}} blocked?"},
        {"infer": "Is it?", "model": "fast"},
        {"all": [TRUE, {"not": FALSE}, {"any": [TRUE]}]},
    ],
)
def test_valid_gates_have_no_problems(gate: object) -> None:
    assert gate_problems(gate) == []


@pytest.mark.parametrize(
    ("gate", "fragment"),
    [
        ("x", "mapping"),
        ([TRUE], "mapping"),
        ({"value": 1, "op": "eq", "to": 1, "extra": 2}, "unknown field(s) extra"),
        ({"op": "eq", "to": 1}, "missing `value`"),
        ({"value": 1, "to": 1}, "missing `op`"),
        ({"value": 1, "op": "equals", "to": 1}, "unknown op 'equals'"),
        ({"value": 1, "op": "gt"}, "`gt` needs `to`"),
        ({"value": "abc", "op": "gt", "to": 1}, "compares numbers"),
        ({"value": "{{E0.n}} items", "op": "lt", "to": 1}, "compares numbers"),
        ({"value": 1, "op": "gte", "to": True}, "compares numbers"),
        ({"value": 5, "op": "contains", "to": 5}, "`contains` needs a string or an array"),
        ({"value": "abc", "op": "contains", "to": 1}, "needs a string `to`"),
        ({"value": "{{a..b}}", "op": "empty"}, "value: {{a..b}}"),
        ({"value": 1, "op": "eq", "to": ["{{#x}}"]}, "to: 0: {{#x}}"),
        ({"infer": ""}, "non-empty question"),
        ({"infer": 3}, "non-empty question"),
        ({"infer": "q {{>p}}"}, "infer: {{>p}}"),
        ({"infer": "q", "model": 3}, "`model` must be a string"),
        ({"infer": "q", "when": TRUE}, "unknown field(s) when"),
        ({"all": []}, "non-empty list"),
        ({"any": TRUE}, "non-empty list"),
        ({"all": [TRUE], "any": [TRUE]}, "exactly one key"),
        ({"not": TRUE, "value": 1}, "exactly one key"),
        ({"all": [{"infer": "q"}]}, "all.0: `infer` gates cannot be combined"),
        ({"not": {"infer": "q"}}, "not: `infer`"),
        ({"any": [TRUE, {"not": {"value": 1, "op": "zz"}}]}, "any.1.not: unknown op"),
    ],
)
def test_gate_problems(gate: object, fragment: str) -> None:
    problems = gate_problems(gate)
    assert problems, gate
    assert any(fragment in p for p in problems), problems


def test_gate_problems_reports_all_problems_at_once() -> None:
    problems = gate_problems({"all": [{"op": "zz"}, {"infer": "q"}, {"value": "{{a..b}}", "op": "empty"}]})
    assert len(problems) >= 4, problems


# --- properties --------------------------------------------------------------------------

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(st.characters(exclude_characters="{"), max_size=4),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=2), c, max_size=3),
    max_leaves=8,
)


@given(_json, st.sampled_from(sorted(GATE_OPS)), _json)
def test_evaluate_returns_a_verdict_or_raises_gate_error(value: object, op: str, to: object) -> None:
    try:
        verdict, reason = evaluate({"value": value, "op": op, "to": to}, {})
    except GateError:
        assert op in {"gt", "lt", "gte", "lte", "contains"}
        return
    assert isinstance(verdict, bool) and reason
    if op in {"eq", "ne"}:
        assert evaluate({"value": value, "op": "ne" if op == "eq" else "eq", "to": to}, {})[0] is not verdict


@given(_json)
def test_json_equal_is_reflexive(value: object) -> None:
    assert json_equal(value, value)
