"""Argument checks: the compiled fast path agrees with jsonschema and never touches the value."""

from __future__ import annotations

import subprocess
import sys

from graphchat.jsonschema_util import argument_problem, errors, first_error, fits

SCHEMA = {
    "type": "object",
    "properties": {"n": {"type": "integer"}, "s": {"type": "string", "default": "d", "format": "uri"}},
    "required": ["n"],
    "additionalProperties": False,
}


def test_valid_value_is_left_untouched() -> None:
    value = {"n": 1}
    assert first_error(SCHEMA, value) is None
    assert value == {"n": 1}  # no defaults written into the caller's arguments


def test_problems_are_named_with_their_path() -> None:
    assert first_error(SCHEMA, {"n": "x"}) == "n: 'x' is not of type 'integer'"
    assert "'n' is a required property" in (first_error(SCHEMA, {}) or "")
    assert "Additional properties" in (first_error(SCHEMA, {"n": 1, "zzz": 2}) or "")
    assert len(errors(SCHEMA, {"n": "x", "zzz": 1})) == 2


def test_formats_are_not_enforced_like_the_reference() -> None:
    assert first_error(SCHEMA, {"n": 1, "s": "not a uri"}) is None


def test_schemas_the_fast_path_cannot_compile_still_validate() -> None:
    schema = {"type": "array", "prefixItems": [{"type": "integer"}], "items": False}
    assert first_error(schema, [1]) is None
    assert first_error(schema, ["x"]) is not None


def test_a_broken_third_party_schema_accepts_everything() -> None:
    assert first_error({"type": "no-such-type"}, {"a": 1}) is None


def test_argument_problem_says_valid_refused_or_what_is_wrong() -> None:
    assert argument_problem(SCHEMA, {"n": 1}) is None
    assert argument_problem(SCHEMA, {"n": "x"}) == (False, "n: 'x' is not of type 'integer'")
    remote = {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}
    refused, why = argument_problem(remote, {"a": 1}) or (None, "")
    assert refused is True and "remote schema references are refused" in why
    assert fits(SCHEMA, {"n": 1}) and not fits(SCHEMA, {})


def test_valid_values_are_checked_without_importing_jsonschema() -> None:
    """jsonschema only builds messages: a run whose values all pass never imports it (a plan
    run's start-up), and the messages still come once something fails."""
    code = (
        "import sys\n"
        "from graphchat.jsonschema_util import argument_problem, fits\n"
        "schema = {'type': 'object', 'properties': {'n': {'type': 'integer'}}, 'required': ['n']}\n"
        "assert argument_problem(schema, {'n': 1}) is None and fits(schema, {'n': 2})\n"
        "print('jsonschema' in sys.modules)\n"
        "print(argument_problem(schema, {'n': 'x'}))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["False", "(False, \"n: 'x' is not of type 'integer'\")"]
