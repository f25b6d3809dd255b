"""`ask`: put a question to the person through the host's asker (serialized, in item order);
every answer is validated against the schema; `when_unanswered` decides the rest."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from graphchat.asks import MAX_OPTIONS, Parked, Question, UnavailableAsker, answer_schema, secret_fields
from graphchat.jsonschema_util import errors
from graphchat.plans.grammar import Results, Schema, Site, closed, has_template, yaml_kind
from graphchat.plans.model import Step
from graphchat.plans.runtime import Frame, StepFailed, StepRunner, render, render_text
from graphchat.threads.redact import hold_answered

FIELDS = ("prompt", "hint", "output_schema", "when_unanswered", "default", "timeout")
BODIES: tuple[str, ...] = ()
ONLY_IN: str | None = None
PER_ITEM: tuple[str, ...] = ()
PER_ITEM_FIELDS: tuple[str, ...] = ()
ASK_TYPES = ("string", "number", "integer", "boolean")


def result(step: Step, known: Results) -> Schema:
    """`{answer, answered, reason?}`: `answer` fits `output_schema` (checked whoever answers)."""
    schema = step.input.get("output_schema")
    return closed(
        {
            "answer": answer_schema(dict(schema)) if isinstance(schema, Mapping) else {},
            "answered": {"type": "boolean"},
            "declined": {"type": "boolean"},  # a person said no (`reason`: their words)
            "reason": {"type": "string"},
        },
        required=("answer", "answered"),
    )


def tools(step: Step) -> tuple[str, ...] | None:
    """No tool: the step calls none itself (its bodies' steps are steps of their own)."""
    return ()


def sometimes(step: Step) -> tuple[str, ...]:
    """`default`: rendered only when nobody answers."""
    return ("default",)


def load(site: Site) -> None:
    """`prompt`; a flat `output_schema` (the ask-schema rules below); `when_unanswered`
    fail | default, and a `default` answer that fits the schema."""
    spec, report = site.spec, site.report
    site.string("prompt", required=True)
    site.string("hint", required=False)  # one line shown under the question (issue 19)
    if "timeout" in spec:  # graphchat's addition: seconds a parked question waits (issue 9)
        timeout = spec["timeout"]
        if has_template(timeout):
            site.templates(timeout, "timeout")
        elif isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            report("timeout", f"must be a number of seconds > 0, got {yaml_kind(timeout)}")
    schema_ok = False
    if "output_schema" not in spec:
        report(
            "output_schema",
            "required: a flat object schema of string/number/integer/boolean/enum properties",
        )
    else:
        problems = ask_schema_problems(spec["output_schema"])
        for problem in problems:
            report("output_schema", problem)
        schema_ok = not problems
    mode = spec.get("when_unanswered", "fail")
    if mode not in ("fail", "default"):
        report("when_unanswered", f"must be fail or default, got {mode!r}")
        return
    has_default = "default" in spec
    if mode == "default" and not has_default:
        report("when_unanswered", "is `default` but no `default` answer is given")
    if mode == "fail" and has_default:
        report(
            "default",
            "can never be used with when_unanswered: fail (set when_unanswered: default, or drop it)",
        )
    if has_default:
        default = spec["default"]
        if has_template(default):
            site.templates(default, "default")
        elif schema_ok:
            # As graph (ask.rs `schema_mismatch`): the full JSON Schema of each field, so
            # `maximum`, `pattern`, `minLength`... are checked, not only the type.

            for problem in errors(answer_schema(dict(spec["output_schema"])), default):
                report("default", f"does not match output_schema: {problem}")


def ask_schema_problems(schema: Any) -> list[str]:
    """Problems of an `ask` output_schema: a flat object of primitive or enum properties."""
    if not isinstance(schema, Mapping):
        return [f"must be a flat object schema (a mapping), got {yaml_kind(schema)}"]
    problems: list[str] = []
    if schema.get("type", "object") != "object":
        problems.append(f'`type` must be "object", got {schema.get("type")!r}')
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        problems.append("needs `properties`: at least one string/number/integer/boolean/enum field")
        return problems
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            problems.append(f"property {name!r} must be a schema (a mapping), got {yaml_kind(prop)}")
            continue
        kind = prop.get("type")
        for flag in ("secret", "multiple"):  # graphchat's field flags (issue 19)
            if flag in prop and not isinstance(prop[flag], bool):
                problems.append(
                    f"property {name!r}: `{flag}` must be true or false, got {yaml_kind(prop[flag])}"
                )
        if prop.get("multiple") is True and "enum" not in prop:
            problems.append(f"property {name!r}: `multiple: true` needs options (an `enum`) to choose from")
        if prop.get("secret") is True and (kind != "string" or "enum" in prop):
            problems.append(f"property {name!r}: `secret: true` is for a string field typed by the person")
        if "enum" in prop:
            enum = prop["enum"]
            if not isinstance(enum, list) or not enum:
                problems.append(f"property {name!r}: `enum` must be a non-empty list")
            elif not all(isinstance(v, (str, int, float, bool)) for v in enum):
                problems.append(f"property {name!r}: enum values must be strings, numbers or booleans")
            elif len(enum) > MAX_OPTIONS:
                problems.append(
                    f"property {name!r}: at most {MAX_OPTIONS} options, got {len(enum)} "
                    "(split the question, or ask for a string)"
                )
            if kind is not None and kind not in ASK_TYPES:
                problems.append(f"property {name!r}: type {kind!r} is not allowed with an enum")
            continue
        if kind in ("object", "array"):
            problems.append(
                f"property {name!r} is {'a nested object' if kind == 'object' else 'an array'}: "
                "an ask takes only string/number/integer/boolean/enum fields"
            )
        elif kind not in ASK_TYPES:
            problems.append(
                f"property {name!r} needs `type` string/number/integer/boolean or an `enum`, got {kind!r}"
            )
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(r, str) for r in required)
    ):
        problems.append("`required` must be a list of property names")
    # A `required` name that is no property loads, as in graph (ask.rs
    # `elicitation_schema_problem` checks the properties only).
    return problems


def flat_answer_problems(schema: Mapping[str, Any], answer: Any) -> list[str]:
    """Check an answer against a (valid) flat ask schema without importing jsonschema."""
    if not isinstance(answer, Mapping):
        return [f"an answer is an object, got {yaml_kind(answer)}"]
    props: Mapping[str, Any] = schema.get("properties") or {}
    problems: list[str] = []
    for name in schema.get("required") or []:
        if name not in answer:
            problems.append(f"{name!r} is required")
    for name, value in answer.items():
        prop = props.get(name)
        if prop is None:
            if schema.get("additionalProperties") is False:
                problems.append(f"{name!r} is not a property of the schema")
            continue
        if "enum" in prop and prop.get("multiple") is True:
            chosen = value if isinstance(value, list) else [value]
            for item in chosen:
                if not any(_json_equal(item, option) for option in prop["enum"]):
                    problems.append(f"{name!r}: {item!r} is not one of {prop['enum']}")
            if not isinstance(value, list):
                problems.append(f"{name!r}: expected a list of options, got {yaml_kind(value)}")
            continue
        if "enum" in prop:
            if not any(_json_equal(value, option) for option in prop["enum"]):
                problems.append(f"{name!r}: {value!r} is not one of {prop['enum']}")
            continue
        kind = prop.get("type")
        ok = {
            "string": isinstance(value, str),
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int)
            and not isinstance(value, bool)
            or isinstance(value, float)
            and value.is_integer(),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        }.get(kind, True)
        if not ok:
            problems.append(f"{name!r}: expected {kind}, got {yaml_kind(value)}")
    return problems


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return (
        bool(a == b)
        and type(a) is type(b)
        or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b)
    )


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    data = step.input
    prompt = render_text(step, data.get("prompt"), scope)
    schema = data.get("output_schema") or {"type": "object", "properties": {}}
    ctx = frame.ctx or runner.ctx
    asker = ctx.asker or UnavailableAsker()
    hint = render_text(step, data["hint"], scope) if data.get("hint") else None
    question = Question(
        prompt,
        schema=schema,
        key=step.id,
        context={"plan": runner.plan.identifier, "step": step.label},
        hint=hint or None,
    )
    parking = runner.parking
    shown = frame.prefix + step.label + (f"[{frame.index}]" if frame.index is not None else "")
    key = runner.base + frame.path + step.label  # its address in the run (unique at any depth)
    stored = parking.answer_for(key) if parking is not None else None
    if stored is not None:  # a parked run resumed: the request's answer
        answer = stored
    else:
        if frame.turn is not None and frame.index is not None:
            await frame.turn.wait(frame.index)
        try:
            answer = await asker.ask(question)
        finally:
            if frame.turn is not None and frame.index is not None:
                await frame.turn.release(frame.index)
    mode = data.get("when_unanswered", "fail")
    if not answer.answered and answer.reason == "unavailable" and mode != "default" and parking is not None:
        # Nobody here can answer and no default settles it: the run waits for a person.
        source = {"plan": runner.plan.identifier, "step": shown}
        raise Parked([parking.open(question, key, source, timeout_of(step, scope))])
    if answer.answered:
        problems = errors(answer_schema(schema), answer.value)
        hold_secrets(schema, answer.value)
        if problems:
            raise StepFailed(step.label, "ask", "the answer does not fit the schema: " + "; ".join(problems))
        return {"answer": answer.value, "answered": True}
    reason = answer.reason or "unavailable"
    declined = reason == "declined"
    why = answer.note or reason  # a decline's reason, in the person's words when they gave one
    if mode == "default":
        default = render(step, data.get("default"), scope)
        problems = errors(answer_schema(schema), default)
        if problems:
            raise StepFailed(
                step.label, "ask", "the default answer does not fit the schema: " + "; ".join(problems)
            )
        if ctx.events is not None:  # a default stands in for the person: say so, in one line
            shown = json.dumps(default, ensure_ascii=False, default=str)
            ctx.events.info(f"{step.label}: {prompt!r} not answered ({reason}); using the default {shown}")
        if declined:  # the plan sees that a person said no, and why
            return {"answer": default, "answered": False, "declined": True, "reason": why}
        return {"answer": default, "answered": False, "reason": reason}
    said = f"declined: {why}" if declined and why != reason else reason
    raise StepFailed(step.label, "ask", f"the question was not answered ({said}): {prompt}")


def hold_secrets(schema: Any, answer: Any) -> None:
    """The values of a form's `secret: true` fields are never written from now on (threads,
    events, shapes, a parked run's record: `[redacted]`); the step gets them as typed."""
    if isinstance(answer, Mapping):
        hold_answered(str(answer[name]) for name in secret_fields(schema) if answer.get(name))


def timeout_of(step: Step, scope: dict[str, Any]) -> float | None:
    """The `timeout` (seconds) of a parked question (graphchat's addition), None: no expiry."""
    value = step.input.get("timeout")
    if isinstance(value, str):
        value = render(step, value, scope)
    if value is None:
        return None
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise StepFailed(step.label, "ask", f"`timeout` must be a number of seconds > 0, got {value!r}")
    return float(value)
