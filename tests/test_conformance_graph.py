"""Conformance with the reference product, tylerdavis/graph v0.12.0, pinned by graph's own tests.

Each test names the graph unit test whose inputs and expected values it carries over (in our
own code): `template/mod.rs::<name>` is `crates/graph-core/src/template/mod.rs`,
`condition.rs::<name>` is `crates/graph-core/src/pipeline/condition.rs`. Tests named
`test_issue12_*` pin a behaviour issue 12 lists from graph's template engine
(`template/render.rs`, `template/parser.rs`) beyond what its unit tests show. Tests named
`test_kept_*` pin a difference graphchat keeps on purpose (issue 12, "Kept on purpose"): they
assert graphchat's behaviour and say what graph does.

Not carried over, because graphchat has no counterpart: `rewrite_root_renames_matching_
references` and `rewrite_root_leaves_everything_else_alone` (graph's step-renaming for plan
authoring) and `referenced_paths_collects_full_dotted_paths` (graph's field-path listing);
graphchat's `references`/`section_references` carry `referenced_roots_*`.
"""

from __future__ import annotations

from typing import Any

import pytest

from graphchat.asks import Answer, Asker, Question
from graphchat.plans.gates import GateError, evaluate
from graphchat.plans.template import (
    BadPath,
    EmptyData,
    MissingStep,
    TemplateSyntaxError,
    parse,
    references,
    render_string,
    render_text,
    render_value,
    section_references,
)
from tests.plan_support import FakeTools, run_yaml

# --- template/mod.rs: ported from the original renderInput.test.ts -------------------------


def test_renders_a_simple_string() -> None:
    """graph: template/mod.rs::renders_a_simple_string"""
    assert render_string("Hello, {{E0.name}}!", {"E0": {"name": "World"}}) == "Hello, World!"


def test_handles_array_with_single_element() -> None:
    """graph: template/mod.rs::handles_array_with_single_element"""
    scope = {"E0": {"teams": [{"name": "Red Team"}]}}
    assert render_string("The team is {{E0.teams.0.name}}", scope) == "The team is Red Team"


def test_handles_multiple_replacements() -> None:
    """graph: template/mod.rs::handles_multiple_replacements"""
    scope = {"E0": {"teams": [{"name": "Red Team"}]}, "E1": {"score": [{"value": 10}]}}
    text = "Team {{E0.teams.0.name}} scored {{E1.score.0.value}} points"
    assert render_string(text, scope) == "Team Red Team scored 10 points"


def test_plain_field_access_works() -> None:
    """graph: template/mod.rs::plain_field_access_works"""
    assert render_string("The {{E0.color}} team", {"E0": {"color": "Red"}}) == "The Red team"


# --- template/mod.rs: typed splice -----------------------------------------------------------


def test_exact_tag_splices_raw_json_value() -> None:
    """graph: template/mod.rs::exact_tag_splices_raw_json_value"""
    scope = {"E0": {"count": 42, "ids": [1, 2, 3]}}
    assert render_value("{{E0.count}}", scope) == 42
    assert type(render_value("{{E0.count}}", scope)) is int
    assert render_value("{{ E0.ids }}", scope) == [1, 2, 3]
    assert render_value("count: {{E0.count}}", scope) == "count: 42"


def test_render_input_walks_the_json_tree() -> None:
    """graph: template/mod.rs::render_input_walks_the_json_tree"""
    scope = {"E0": {"values": [{"id": "team-1"}]}, "input": {"max": 50}}
    tree = {
        "teamId": "{{E0.values.0.id}}",
        "limit": "{{input.max}}",
        "nested": {"q": "team {{E0.values.0.id}}"},
        "list": ["{{E0.values}}"],
    }
    assert render_value(tree, scope) == {
        "teamId": "team-1",
        "limit": 50,
        "nested": {"q": "team team-1"},
        "list": [[{"id": "team-1"}]],
    }


# --- template/mod.rs: error taxonomy ---------------------------------------------------------


def test_missing_step_is_typed() -> None:
    """graph: template/mod.rs::missing_step_is_typed"""
    with pytest.raises(MissingStep) as info:
        render_string("{{E7.values}}", {"E0": {}})
    assert info.value.root == "E7"


def test_bad_path_reports_available_keys() -> None:
    """graph: template/mod.rs::bad_path_reports_available_keys"""
    with pytest.raises(BadPath) as info:
        render_string("{{E0.values.0.idd}}", {"E0": {"values": [{"id": "x", "name": "y"}]}})
    assert "no key 'idd'" in str(info.value)
    assert "id, name" in str(info.value)


def test_empty_array_and_null_are_empty_data_not_bad_path() -> None:
    """graph: template/mod.rs::empty_array_and_null_are_empty_data_not_bad_path"""
    scope = {"E0": {"values": [], "assignee": None}}
    with pytest.raises(EmptyData):
        render_string("{{E0.values.0.id}}", scope)
    with pytest.raises(EmptyData):
        render_string("{{E0.assignee.name}}", scope)


def test_index_out_of_range_is_empty_data() -> None:
    """graph: template/mod.rs::index_out_of_range_is_empty_data"""
    with pytest.raises(EmptyData):
        render_string("{{E0.values.3.id}}", {"E0": {"values": [{"id": 1}]}})


# --- template/mod.rs: sections, loop vars, length ----------------------------------------------


def test_sections_iterate_with_context_stack_and_loop_vars() -> None:
    """graph: template/mod.rs::sections_iterate_with_context_stack_and_loop_vars"""
    scope = {
        "E1": {
            "values": [
                {"title": "Fix login", "state": "done"},
                {"title": "Add SSO", "state": "open"},
            ]
        }
    }
    text = "{{#E1.values}}{{title}} ({{state}}){{^@last}}, {{/@last}}{{/E1.values}}"
    assert render_string(text, scope) == "Fix login (done), Add SSO (open)"


def test_at_index_and_at_first() -> None:
    """graph: template/mod.rs::at_index_and_at_first"""
    text = "{{#E0.items}}{{@index}}:{{#@first}}first {{/@first}}{{/E0.items}}"
    assert render_string(text, {"E0": {"items": ["a", "b"]}}) == "0:first 1:"


def test_length_pseudo_key() -> None:
    """graph: template/mod.rs::length_pseudo_key"""
    assert render_string("Total: {{E1.values.length}}", {"E1": {"values": [1, 2, 3]}}) == "Total: 3"


def test_inverted_section_on_empty_results() -> None:
    """graph: template/mod.rs::inverted_section_on_empty_results"""
    text = "{{#E0.values}}{{id}}{{/E0.values}}{{^E0.values}}no results{{/E0.values}}"
    assert render_string(text, {"E0": {"values": []}}) == "no results"


def test_missing_key_on_list_item_renders_empty() -> None:
    """graph: template/mod.rs::missing_key_on_list_item_renders_empty"""
    scope = {"E0": {"values": [{"name": "a", "desc": "has one"}, {"name": "b"}]}}
    assert render_string("{{#E0.values}}{{name}}:{{desc}};{{/E0.values}}", scope) == "a:has one;b:;"


def test_objects_interpolate_as_json_in_text() -> None:
    """graph: template/mod.rs::objects_interpolate_as_json_in_text — serde_json's
    `to_string_pretty` (two-space indent, `": "`) over sorted maps."""
    out = render_string("data: {{E0.values}}", {"E0": {"values": [{"id": 1}]}})
    assert out.startswith("data: [")
    assert '"id": 1' in out
    assert out == 'data: [\n  {\n    "id": 1\n  }\n]'


def test_nested_sections_reach_outer_and_root_scopes() -> None:
    """graph: template/mod.rs::nested_sections_reach_outer_and_root_scopes"""
    scope = {"E0": {"teams": [{"name": "Core", "members": [{"who": "amy"}]}]}}
    text = "{{#E0.teams}}{{#members}}{{who}}@{{name}} of {{E0.teams.length}}{{/members}}{{/E0.teams}}"
    assert render_string(text, scope) == "amy@Core of 1"


# --- template/mod.rs: dropped features fail loudly ---------------------------------------------


@pytest.mark.parametrize(
    "text", ["{{> partial}}", "{{$block}}x{{/block}}", "{{!c}}", "{{<parent}}x{{/parent}}"]
)
def test_dropped_mustache_features_are_parse_errors(text: str) -> None:
    """graph: template/mod.rs::dropped_mustache_features_are_parse_errors"""
    with pytest.raises(TemplateSyntaxError):
        render_string(text, {})


def test_referenced_roots_skips_section_scoped_bare_keys() -> None:
    """graph: template/mod.rs::referenced_roots_skips_section_scoped_bare_keys — graph's
    `referenced_roots` is graphchat's `references` (certain roots) plus `section_references`
    (dotted paths inside sections, which graph counts as roots)."""
    text = (
        "{{#E5.comments}}{{severity}} {{E3.summary}} "
        "{{#url}}[{{file}}]({{url}}){{/url}}{{/E5.comments}}"
        "{{^E5.comments}}none for {{input.pr}}{{/E5.comments}}"
    )
    assert references(text) | section_references(text) == {"E5", "E3", "input"}
    text = "{{E0}} {{#items}}{{name}}{{/items}}"
    assert references(text) | section_references(text) == {"E0", "items"}


def test_mismatched_sections_are_parse_errors() -> None:
    """graph: template/mod.rs::mismatched_sections_are_parse_errors"""
    with pytest.raises(TemplateSyntaxError):
        render_string("{{#E0.a}}x{{/E0.b}}", {"E0": {"a": [1]}})


# --- issue 12: graph's engine beyond its unit tests ---------------------------------------------

_OBJ = {"b": [1, {"z": True, "a": None}], "a": "é", "c": {}}
_OBJ_PRETTY = (
    '{\n  "a": "é",\n  "b": [\n    1,\n    {\n      "a": null,\n      "z": true\n    }\n  ],\n  "c": {}\n}'
)


def test_issue12_objects_in_text_are_pretty_json_with_sorted_keys() -> None:
    """graph: template/render.rs::to_text — `serde_json::to_string_pretty`, keys sorted (no
    `preserve_order`), non-ASCII kept; a lone tag in text position (prompts) is the same."""
    scope = {"E0": {"obj": _OBJ, "ids": [1, 2], "none": [], "f": 1.5}}
    assert render_string("x {{E0.obj}}", scope) == "x " + _OBJ_PRETTY
    assert render_text("{{E0.obj}}", scope) == _OBJ_PRETTY
    assert render_string("{{E0.ids}}!", scope) == "[\n  1,\n  2\n]!"
    assert render_string("[{{E0.none}}] {{E0.f}}", scope) == "[[]] 1.5"
    assert render_value("{{E0.obj}}", scope) is _OBJ  # the typed splice is untouched


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{{E0.nothing.length}}", "null"),
        ("{{E0.meta.length}}", "an object"),
        ("{{E0.obj.length}}", "an object"),
        ("{{E0.by_year.2024}}", "cannot index into an object"),
        ("{{E0.meta.0}}", "cannot index into an object"),
    ],
)
def test_issue12_length_of_null_or_object_and_index_on_object_are_bad_path(text: str, fragment: str) -> None:
    """graph: template/render.rs::walk — `.length` of anything but an array or a string, and
    an index segment on an object, are `BadPath` (not `EmptyData`, not a key lookup)."""
    scope = {"E0": {"nothing": None, "meta": {"length": 7, "0": "zero"}, "obj": {}, "by_year": {"2024": "y"}}}
    with pytest.raises(BadPath) as info:
        render_string(text, scope)
    assert fragment in str(info.value)
    # In a section test the same path is simply falsy, as in graph's `lookup_section`.
    section = (
        "{{#" + text[2:-2] + "}}yes{{/" + text[2:-2] + "}}{{^" + text[2:-2] + "}}no{{/" + text[2:-2] + "}}"
    )
    assert render_string(section, scope) == "no"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("{{E0.first name}}", "Ann"),
        ("{{ E0.a(b) }}", 1),
        ("{{E0.x|y}}", "pipe"),
        ("{{E0.[0]}}", "bracket"),
        ("{{E0.a+b=c}}", "sum"),
        ("{{E0.q?}}", "q"),
        ('{{E0."quoted"}}', "quoted"),
    ],
)
def test_issue12_path_segments_hold_any_character_but_a_dot(text: str, expected: object) -> None:
    """graph: template/parser.rs::parse_path — segments are split on `.` only."""
    scope = {
        "E0": {
            "first name": "Ann",
            "a(b)": 1,
            "x|y": "pipe",
            "[0]": "bracket",
            "a+b=c": "sum",
            "q?": "q",
            '"quoted"': "quoted",
        }
    }
    assert render_value(text, scope) == expected
    assert references({"k": text}) == {"E0"}


def test_issue12_unknown_root_with_spaces_is_a_missing_step_not_a_syntax_error() -> None:
    """graph: template/parser.rs::parse_path — `{{some prose}}` parses; it names a root."""
    parse("{{some prose}}")
    with pytest.raises(MissingStep):
        render_string("hello {{some prose}}", {"E0": {}})


def test_issue12_bad_path_lists_available_keys_sorted() -> None:
    """graph: template/render.rs::walk — available keys come from a sorted map, first 12."""
    with pytest.raises(BadPath) as info:
        render_string("{{E0.nope}}", {"E0": {"zeta": 1, "alpha": 2, "mid": 3}})
    assert "(available: alpha, mid, zeta)" in str(info.value)


class _RecordingAsker(Asker):
    def __init__(self) -> None:
        super().__init__(None)
        self.prompts: list[str] = []

    async def _ask(self, question: Question) -> Answer:
        self.prompts.append(question.prompt)
        return Answer(True, {"ok": True})


async def test_issue12_objects_spliced_into_inputs_questions_and_messages_alike() -> None:
    """graph: template/mod.rs::objects_interpolate_as_json_in_text, through a plan run: a step
    input's text, an `ask` question and an `exit` message all carry the same pretty JSON."""
    plan = """identifier: t
name: T
description: splice objects into text
steps:
  - id: E0
    tool_name: t__echo
    input: {text: "obj: {{input.obj}}", raw: "{{input.obj}}"}
  - id: Q
    tool_name: ask
    input:
      prompt: "{{input.obj}}"
      output_schema: {type: object, properties: {ok: {type: boolean}}}
  - id: X
    tool_name: exit
    input: {status: success, message: "done {{E0.raw}}"}
"""
    tools = FakeTools()
    asker = _RecordingAsker()
    out = await run_yaml(plan, {"obj": _OBJ}, tools=tools, asker=asker)
    assert out.kind == "exit", out.error
    assert tools.calls == [("t__echo", {"text": "obj: " + _OBJ_PRETTY, "raw": _OBJ})]
    assert asker.prompts == [_OBJ_PRETTY]
    assert out.exit is not None and out.exit["message"] == "done " + _OBJ_PRETTY


# --- condition.rs ---------------------------------------------------------------------------


def _gate(value: Any, op: str, to: Any = None) -> dict[str, Any]:
    return {"value": value, "op": op, "to": to}


@pytest.mark.parametrize(
    ("value", "op", "to", "expected"),
    [
        (0, "eq", 0, True),
        (3, "gt", 2, True),
        (1, "gte", 2, False),
        ([], "empty", None, True),
        (["a"], "not_empty", None, True),
        ("hello world", "contains", "world", True),
        ([1, 2], "contains", 2, True),
        ("open", "eq", "open", True),
    ],
)
def test_conditions_evaluate(value: Any, op: str, to: Any, expected: bool) -> None:
    """graph: condition.rs::conditions_evaluate"""
    assert evaluate(_gate(value, op, to), {})[0] is expected


def test_conditions_evaluate_ordering_on_strings_is_an_error() -> None:
    """graph: condition.rs::conditions_evaluate (`"a" gt "b"` is an error)"""
    with pytest.raises(GateError):
        evaluate(_gate("a", "gt", "b"), {})


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        ({"value": None, "op": "eq"}, True),  # `to` defaults to null
        ({"value": {}, "op": "empty"}, True),
        ({"value": 0, "op": "empty"}, False),
        ({"value": False, "op": "empty"}, False),
        ({"value": "", "op": "not_empty"}, False),
        ({"value": {"a": 1, "b": 2}, "op": "eq", "to": {"b": 2, "a": 1}}, True),
        ({"value": "5", "op": "eq", "to": 5}, False),
        ({"value": True, "op": "eq", "to": 1}, False),
    ],
)
def test_eval_condition_semantics(gate: dict[str, Any], expected: bool) -> None:
    """graph: condition.rs::eval_condition — `to` defaults to null; empty is null/""/[]/{}; eq
    is JSON equality across types (serde_json `Value` ==)."""
    assert evaluate(gate, {})[0] is expected


@pytest.mark.parametrize(
    "gate",
    [
        {"value": True, "op": "gt", "to": 0},
        {"value": 5, "op": "contains", "to": 5},
        {"value": "abc", "op": "contains", "to": 1},
    ],
)
def test_eval_condition_errors(gate: dict[str, Any]) -> None:
    """graph: condition.rs::eval_condition — ordering needs numbers (`as_f64` of a boolean is
    None); contains needs string/string or array/value."""
    with pytest.raises(GateError):
        evaluate(gate, {})


@pytest.mark.parametrize(
    "gate",
    [
        {"value": 1, "op": "eq", "to": 1.0},
        {"value": "{{input.n}}", "op": "eq", "to": 1.0},
        {"value": [1, 2], "op": "contains", "to": 2.0},
    ],
)
def test_kept_integer_equals_float_in_gates(gate: dict[str, Any]) -> None:
    """Kept on purpose (issue 12): `1 == 1.0` holds in graphchat's gates. graph compares
    serde_json `Value`s, where the integer 1 and the float 1.0 differ: graph says false."""
    assert evaluate(gate, {"input": {"n": 1}})[0] is True
    if gate["op"] == "eq":
        assert evaluate({**gate, "op": "ne"}, {"input": {"n": 1}})[0] is False


# --- pipeline/doc.rs: templates as the loader reads them ------------------------------------

_SPRINT = """identifier: sprint_analysis
name: Sprint Analysis
description: Analyze the current sprint for a team
input_schema:
  type: object
  required: [team]
  properties:
    team: { type: string }
steps:
  - id: E0
    tool_name: t__list
    input: { query: "{{input.team}}" }
  - id: E1
    tool_name: t__echo
    input: { teamId: "{{E0.values.0.id}}" }
"""


def test_section_scoped_bare_keys_are_not_root_references() -> None:
    """graph: pipeline/doc.rs::section_scoped_bare_keys_are_not_root_references (first half)"""
    from tests.plan_support import plan_from_yaml

    plan_from_yaml(
        _SPRINT.replace(
            '{ teamId: "{{E0.values.0.id}}" }',
            '{ teamId: "{{#E0.values}}{{id}} {{#name}}{{name}}{{/name}}{{/E0.values}}" }',
        )
    )


@pytest.mark.xfail(
    strict=True, reason="needs loader.py: a dotted path's root inside a section must be a known root"
)
def test_section_scoped_misspelt_root_is_a_load_error() -> None:
    """graph: pipeline/doc.rs::section_scoped_bare_keys_are_not_root_references (second half):
    `{{#E0.values}}{{E9.summary}}{{/E0.values}}` names E9, which is no root — a load error."""
    from graphchat.plans.model import PlanLoadError
    from tests.plan_support import plan_from_yaml

    with pytest.raises(PlanLoadError, match="E9"):
        plan_from_yaml(
            _SPRINT.replace(
                '{ teamId: "{{E0.values.0.id}}" }', '{ teamId: "{{#E0.values}}{{E9.summary}}{{/E0.values}}" }'
            )
        )


# --- YAML 1.2: graph reads every file with serde_yaml 0.9 (Cargo.toml), the YAML 1.2 core schema


_YAML12_PLAN = """identifier: yaml12
name: YAML 1.2
description: scalars as serde_yaml reads them
steps:
  - id: A
    tool_name: ask
    input:
      prompt: Ship it?
      output_schema:
        type: object
        properties:
          answer: { type: string, enum: [yes, no] }
      when_unanswered: default
      default: { answer: no }
  - id: E0
    tool_name: t__echo
    input: { a: yes, b: off, c: NO, d: 12:30, e: 010, f: 0o10, g: 1_000, h: 2001-12-14, i: ~, j: True }
"""


def test_yaml12_core_schema_in_plans() -> None:
    """graph: Cargo.toml serde_yaml 0.9 (YAML 1.2 core schema), as pipeline/doc.rs parses a plan:
    `yes`/`off`/`NO` are strings, `12:30` is not 750, `010` is 10, `0o10` is 8."""
    from graphchat.plans.loader import load_plan_text

    plan = load_plan_text(_YAML12_PLAN, "<test>")
    ask = plan.steps[0].input
    assert ask["output_schema"]["properties"]["answer"]["enum"] == ["yes", "no"]
    assert ask["default"] == {"answer": "no"}
    assert plan.steps[1].input == {
        "a": "yes",
        "b": "off",
        "c": "NO",
        "d": "12:30",
        "e": 10,
        "f": 8,
        "g": "1_000",
        "h": "2001-12-14",
        "i": None,
        "j": True,
    }


def test_yaml12_duplicate_key_is_a_load_error() -> None:
    """graph: serde_yaml 0.9 rejects a repeated mapping key (`duplicate entry with key`)."""
    from graphchat.plans.loader import load_plan_text
    from graphchat.plans.model import PlanLoadError

    text = _YAML12_PLAN.replace(
        "    tool_name: t__echo\n", "    tool_name: t__echo\n    tool_name: t__list\n"
    )
    with pytest.raises(PlanLoadError, match=r"line 17: .*duplicate key 'tool_name'"):
        load_plan_text(text, "<test>")


def test_yaml12_in_graphchat_yaml_answers_and_plan_files(graphchat: Any, workspace: Any) -> None:
    """graph: serde_yaml 0.9 for every file it reads — here graphchat.yaml, a plan file and an
    --answers file: `no` stays the string an `ask` enum `[yes, no]` names; a duplicate key in
    graphchat.yaml is a config error naming file and line."""
    (workspace / "plans" / "ship.yaml").write_text(
        _YAML12_PLAN.split("  - id: E0")[0].replace("identifier: yaml12", "identifier: ship")
        + "output: { answer: '{{A.answer.answer}}', answered: '{{A.answered}}' }\n"
    )
    answers = workspace / "answers.yaml"
    answers.write_text("A: {answer: no}\n")
    run = graphchat("plan", "run", "ship", "--answers", str(answers), "--json")
    assert run.returncode == 0, run.stderr
    import json

    assert json.loads(run.stdout)["output"] == {"answer": "no", "answered": True}
    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\nsettings: {}\n")
    bad = graphchat("plan", "list")
    assert bad.returncode == 2 and "graphchat.yaml:3" in bad.stderr and "duplicate key" in bad.stderr, (
        bad.stderr
    )
