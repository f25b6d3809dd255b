"""One JSON-type-of-a-value ladder (`graphchat.jsontype.json_type`), and each caller's words for
it kept as they were: the template renderer's and the plan loader's messages, the shapes learned,
the freezer's schemas."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from graphchat.jsontype import json_type
from graphchat.plans.freeze import _json_type as frozen_type
from graphchat.plans.grammar import yaml_kind
from graphchat.shapes import _kind as shape_kind
from graphchat.template import json_kind

VALUES = [None, True, 3, 2.5, "s", [1], (1,), {"a": 1}, OrderedDict(a=1), object()]


def test_json_type_names_every_json_value_as_json_schema_does() -> None:
    assert [json_type(v) for v in VALUES] == [
        "null",
        "boolean",
        "integer",
        "number",
        "string",
        "array",
        "array",
        "object",
        "object",
        None,
    ]


@pytest.mark.parametrize(
    ("value", "rendered", "loaded", "shape", "frozen"),
    [
        (None, "null", "null", "null", "null"),
        (False, "a boolean", "a boolean", "boolean", "boolean"),
        (7, "a number", "a number (7)", "integer", "integer"),
        (1.5, "a number", "a number (1.5)", "number", "number"),
        ("x", "a string", "a string", "string", "string"),
        ([], "an array", "a list", "array", "array"),
        ({}, "an object", "a mapping", "object", "object"),
        (object(), "object", "object", "unknown", "null"),
    ],
)
def test_each_caller_keeps_its_words(
    value: object, rendered: str, loaded: str, shape: str, frozen: str
) -> None:
    assert json_kind(value) == rendered
    assert yaml_kind(value) == loaded
    assert shape_kind(value) == shape
    assert frozen_type(value) == frozen
