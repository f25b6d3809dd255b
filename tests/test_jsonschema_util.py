"""Argument checks: the compiled fast path agrees with jsonschema and never touches the value."""

from __future__ import annotations

from graphchat.jsonschema_util import errors, first_error

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
