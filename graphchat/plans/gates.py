"""Gates of the plan language: load-time checks and evaluation of logical gates.

Forms:
- logical `{value, op, to}`; `value` and `to` are rendered (typed splice keeps types) before
  comparing. `to` is optional for `eq`/`ne`/`contains` (missing means null, as in the reference
  product), required for the ordering ops, and accepted but ignored for `empty`/`not_empty`
  (the reference accepts it; the spec says to leave it out).
- inferred `{infer: "<question template>", model?: str}` — judged by a model in the executor,
  never evaluated here.
- graphchat's combinators `{all: [gate, …]}`, `{any: [gate, …]}`, `{not: gate}`, over logical
  gates (and combinators) only. `all`/`any` short-circuit left to right.

Semantics are strict: `eq`/`ne` are JSON equality (1 == 1.0, "5" != 5, true != 1); ordering
needs two numbers (booleans are not numbers); `empty` holds for null, "", [], {} and is false
for numbers and booleans; `contains` is substring for two strings and membership (JSON
equality) for an array; any other combination raises `GateError` rather than being false.
A template that does not resolve raises its `TemplateError` (no gate turns an error into false).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from graphchat.template import check_syntax, json_kind, parse, render_value
from graphchat.template.errors import TemplateError

GATE_OPS = {"eq", "ne", "gt", "lt", "gte", "lte", "empty", "not_empty", "contains"}
_ORDERING = {"gt", "lt", "gte", "lte"}
_UNARY = {"empty", "not_empty"}
_COMBINATORS = ("all", "any", "not")
_LOGICAL_KEYS = {"value", "op", "to"}
_INFER_KEYS = {"infer", "model"}
# What the verdict's opposite is called, so a reason always states a fact that holds.
_NEGATION = {"eq": "ne", "ne": "eq", "gt": "lte", "lte": "gt", "lt": "gte", "gte": "lt"}


class GateError(Exception):
    """A gate that cannot be evaluated: a comparison between values it does not apply to."""

    def __init__(self, message: str, *, step: str | None = None) -> None:
        super().__init__(message)
        self.step = step


def is_infer(gate: Mapping[str, Any]) -> bool:
    """True for an inferred (model-judged) gate."""
    return isinstance(gate, Mapping) and "infer" in gate


# --- load-time checks --------------------------------------------------------------------


def gate_problems(gate: Any) -> list[str]:
    """Every structural and template-syntax problem of a gate, as messages (empty = fine)."""
    problems: list[str] = []
    _check(gate, "", problems, inside_combinator=False)
    return problems


def _check(gate: Any, where: str, problems: list[str], *, inside_combinator: bool) -> None:
    def say(message: str) -> None:
        problems.append(f"{where}: {message}" if where else message)

    if not isinstance(gate, Mapping):
        say(f"a gate must be a mapping like {{value, op, to}}, got {json_kind(gate)}")
        return
    keys = set(gate)
    combinators = [k for k in _COMBINATORS if k in keys]
    if combinators:
        if len(keys) != 1:
            say(f"a combinator gate has exactly one key ({'/'.join(_COMBINATORS)}), got {_keys(keys)}")
            return
        name = combinators[0]
        inner = gate[name]
        if name == "not":
            _check(inner, _join(where, "not"), problems, inside_combinator=True)
            return
        if not isinstance(inner, list) or not inner:
            say(f"`{name}` needs a non-empty list of gates")
            return
        for i, sub in enumerate(inner):
            _check(sub, _join(where, f"{name}.{i}"), problems, inside_combinator=True)
        return
    if "infer" in keys:
        if inside_combinator:
            say("`infer` gates cannot be combined with all/any/not; use a separate step")
            return
        unknown = keys - _INFER_KEYS
        if unknown:
            say(f"unknown field(s) {_keys(unknown)} in an infer gate (allowed: infer, model)")
        question = gate["infer"]
        if not isinstance(question, str) or not question.strip():
            say("`infer` must be a non-empty question string")
        else:
            problems.extend(_prefixed(_join(where, "infer"), check_syntax(question)))
        if "model" in gate and not isinstance(gate["model"], str):
            say("`model` must be a string")
        return
    unknown = keys - _LOGICAL_KEYS
    if unknown:
        say(f"unknown field(s) {_keys(unknown)} in a logical gate (allowed: value, op, to)")
    if "value" not in keys:
        say("missing `value`")
    op = gate.get("op")
    if op is None:
        say(f"missing `op` (one of {_ops()})")
    elif not isinstance(op, str) or op not in GATE_OPS:
        say(f"unknown op {op!r} (one of {_ops()})")
        op = None
    if op in _ORDERING and "to" not in keys:
        say(f"`{op}` needs `to`")
    for field in ("value", "to"):
        if field in gate:
            problems.extend(_prefixed(_join(where, field), check_syntax(gate[field])))
    if op is None or problems:
        return
    # Literal operands that can never satisfy the op are errors now rather than at run time.
    for field in ("value", "to"):
        if field not in gate or _is_template(gate[field]):
            continue
        literal = gate[field]
        if op in _ORDERING and not _is_number(literal):
            say(f"`{op}` compares numbers; `{field}` is {_describe(literal)}")
    value = gate.get("value")
    if op == "contains" and "value" in gate and not _is_template(value):
        if not isinstance(value, (str, list)):
            say(f"`contains` needs a string or an array as `value`; it is {_describe(value)}")
        elif isinstance(value, str) and "to" in gate and not _is_template(gate["to"]):
            if not isinstance(gate["to"], str):
                say(f"`contains` on a string needs a string `to`; it is {_describe(gate['to'])}")


def _is_template(value: Any) -> bool:
    """Could rendering change this operand's type? Only a typed splice (`"{{path}}"`) can;
    mixed text stays a string and containers stay containers."""
    if not isinstance(value, str) or "{{" not in value:
        return False
    try:
        return parse(value).splice is not None
    except TemplateError:
        return True


# --- evaluation --------------------------------------------------------------------------


def evaluate(
    gate: Mapping[str, Any], scope: Mapping[str, Any], *, step: str | None = None
) -> tuple[bool, str]:
    """Evaluate a logical gate (or combinator) against the scope: (verdict, reason).

    The reason is a short sentence stating what holds, e.g. `3 gt 2` or `3 lte 5`.
    Raises `GateError` for inapplicable comparisons and `TemplateError` for failed templates.
    """
    if not isinstance(gate, Mapping):
        raise GateError(f"a gate must be a mapping, got {json_kind(gate)}", step=step)
    if "infer" in gate:
        raise GateError("an infer gate needs a model call; the executor judges it", step=step)
    if "all" in gate:
        reasons = []
        for sub in _gate_list(gate["all"], "all", step):
            verdict, reason = evaluate(sub, scope, step=step)
            if not verdict:
                return False, f"not all hold: {reason}"
            reasons.append(reason)
        return True, "all hold: " + "; ".join(reasons)
    if "any" in gate:
        reasons = []
        for sub in _gate_list(gate["any"], "any", step):
            verdict, reason = evaluate(sub, scope, step=step)
            if verdict:
                return True, reason
            reasons.append(reason)
        return False, "none hold: " + "; ".join(reasons)
    if "not" in gate:
        verdict, reason = evaluate(gate["not"], scope, step=step)
        return not verdict, reason  # the inner reason already states what holds
    op = gate.get("op")
    if op not in GATE_OPS:
        raise GateError(f"unknown gate op {op!r} (one of {_ops()})", step=step)
    if "value" not in gate:
        raise GateError("gate has no `value`", step=step)
    value = render_value(gate["value"], scope, step=step)
    if op in _UNARY:
        empty = _is_empty(value)
        verdict = empty if op == "empty" else not empty
        return verdict, f"{_show(value)} is {'empty' if empty else 'not empty'}"
    to = render_value(gate.get("to"), scope, step=step)
    verdict = _compare(op, value, to, step)
    if op == "contains":
        return verdict, f"{_show(value)} {'contains' if verdict else 'does not contain'} {_show(to)}"
    shown = op if verdict else _NEGATION[op]
    return verdict, f"{_show(value)} {shown} {_show(to)}"


def _gate_list(gates: Any, name: str, step: str | None) -> list[Any]:
    if not isinstance(gates, list):
        raise GateError(f"`{name}` needs a list of gates", step=step)
    return gates


def _compare(op: str, value: Any, to: Any, step: str | None) -> bool:
    if op == "eq":
        return json_equal(value, to)
    if op == "ne":
        return not json_equal(value, to)
    if op in _ORDERING:
        if not (_is_number(value) and _is_number(to)):
            raise GateError(f"`{op}` compares numbers, got {_describe(value)} and {_describe(to)}", step=step)
        if op == "gt":
            return bool(value > to)
        if op == "lt":
            return bool(value < to)
        if op == "gte":
            return bool(value >= to)
        return bool(value <= to)
    # contains
    if isinstance(value, str):
        if not isinstance(to, str):
            raise GateError(f"`contains` on a string needs a string, got {_describe(to)}", step=step)
        return to in value
    if isinstance(value, (list, tuple)):
        return any(json_equal(item, to) for item in value)
    raise GateError(
        f"`contains` needs a string or an array, got {_describe(value)} (to: {_describe(to)})", step=step
    )


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: numbers compare by value (1 == 1.0) but never equal booleans or strings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) or _is_number(b):
        return _is_number(a) and _is_number(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return False


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, (str, list, tuple, Mapping)):
        return len(value) == 0
    return False  # numbers and booleans are values, not containers


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# --- messages ----------------------------------------------------------------------------


def _show(value: Any, limit: int = 60) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _describe(value: Any) -> str:
    return f"{json_kind(value)} {_show(value, 40)}"


def _ops() -> str:
    return ", ".join(sorted(GATE_OPS))


def _keys(keys: set[Any]) -> str:
    return ", ".join(sorted(str(k) for k in keys))


def _join(where: str, part: str) -> str:
    return f"{where}.{part}" if where else part


def _prefixed(where: str, messages: list[str]) -> list[str]:
    return [f"{where}: {m}" for m in messages]
