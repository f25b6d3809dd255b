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
from graphchat.template import (
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


def test_yaml12_in_graphchat_yaml_answers_and_plan_files(cli: Any, workspace: Any) -> None:
    """graph: serde_yaml 0.9 for every file it reads — here graphchat.yaml, a plan file and an
    --answers file: `no` stays the string an `ask` enum `[yes, no]` names; a duplicate key in
    graphchat.yaml is a config error naming file and line."""
    (workspace / "plans" / "ship.yaml").write_text(
        _YAML12_PLAN.split("  - id: E0")[0].replace("identifier: yaml12", "identifier: ship")
        + "output: { answer: '{{A.answer.answer}}', answered: '{{A.answered}}' }\n"
    )
    answers = workspace / "answers.yaml"
    answers.write_text("A: {answer: no}\n")
    run = cli("plan", "run", "ship", "--answers", str(answers), "--json")
    assert run.returncode == 0, run.stderr
    import json

    assert json.loads(run.stdout)["output"] == {"answer": "no", "answered": True}
    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\nsettings: {}\n")
    bad = cli("plan", "list")
    assert bad.returncode == 2 and "graphchat.yaml:3" in bad.stderr and "duplicate key" in bad.stderr, (
        bad.stderr
    )


# --- leniency and strictness of graph's loader (pipeline/plan.rs, doc.rs, body.rs, ask.rs) -----


def _load(text: str) -> Any:
    from graphchat.plans.loader import load_plan_text

    return load_plan_text(text, "<test>")


def _problems(text: str) -> str:
    from graphchat.plans.model import PlanLoadError

    with pytest.raises(PlanLoadError) as caught:
        _load(text)
    return "\n".join(caught.value.problems)


_HEAD = "identifier: lenient\nname: Lenient\ndescription: loads as graph loads it\n"


def test_unknown_fields_on_a_step_and_in_solver_are_ignored_with_a_warning() -> None:
    """graph: pipeline/plan.rs `Step` and `SolverData` derive Deserialize without
    `deny_unknown_fields` (only `PlanDoc` has it): `timeout: 30` on a step loads."""
    plan = _load(
        _HEAD + "steps:\n  - id: E0\n    tool_name: t__echo\n    timeout: 30\n    input: {}\n"
        "solver:\n  query_to_answer: sum up\n  temperature: 0\n"
    )
    assert "timeout" not in plan.steps[0].input
    assert any(":7: step E0: timeout: unknown field in a step, ignored" in w for w in plan.warnings), (
        plan.warnings
    )
    assert any("solver.temperature: unknown field in the solver, ignored" in w for w in plan.warnings)
    # At the plan's top level an unknown field stays an error (PlanDoc has deny_unknown_fields).
    assert "unknown field in a plan" in _problems(
        _HEAD + "timeout: 3\nsteps:\n  - {id: E0, tool_name: t__echo, input: {}}\n"
    )


def test_solver_without_query_or_data_and_empty_name_load() -> None:
    """graph: pipeline/plan.rs `SolverData` (`query_to_answer` and `data` are `#[serde(default)]`)
    and doc.rs `PlanDoc` (`name`, `description` are plain Strings: "" loads)."""
    plan = _load(
        'identifier: lenient\nname: ""\ndescription: ""\n'
        "steps:\n  - {id: E0, tool_name: t__echo, input: {}}\nsolver: {system_prompt: be brief}\n"
    )
    assert plan.solver is not None and plan.solver.query_to_answer == "" and plan.solver.data is None
    assert plan.name == "" and plan.description == ""
    assert (
        _load(_HEAD + "steps:\n  - {id: E0, tool_name: t__echo, input: {}}\nsolver: {}\n").finish == "solver"
    )


def test_ask_required_naming_a_non_property_loads() -> None:
    """graph: pipeline/ask.rs::elicitation_schema_problem checks the properties only, not `required`."""
    _load(
        _HEAD + "steps:\n  - id: A\n    tool_name: ask\n    input:\n      prompt: Which?\n"
        "      output_schema: {type: object, properties: {repo: {type: string}}, required: [repo, owner]}\n"
    )


def test_ask_default_is_checked_against_the_full_json_schema() -> None:
    """graph: pipeline/ask.rs::a_template_free_default_is_schema_checked_statically (its
    `schema_mismatch` runs the jsonschema validator: `maximum`, `pattern`, … count)."""
    ask = (
        _HEAD + "steps:\n  - id: A\n    tool_name: ask\n    input:\n      prompt: How many?\n"
        "      output_schema: {type: object, properties: {n: {type: integer, maximum: 5}, "
        "tag: {type: string, pattern: '^v[0-9]+$'}}}\n      when_unanswered: default\n"
    )
    assert "default: does not match output_schema" in _problems(ask + "      default: {n: 12}\n")
    assert "pattern" in _problems(ask + "      default: {tag: latest}\n") or "match" in _problems(
        ask + "      default: {tag: latest}\n"
    )
    _load(ask + "      default: {n: 3, tag: v2}\n")


def test_a_step_without_input_is_a_load_error() -> None:
    """graph: pipeline/plan.rs `Step.input` has no serde default: a step without it does not parse."""
    assert "step E0: input: required" in _problems(_HEAD + "steps:\n  - {id: E0, tool_name: t__echo}\n")


_DECIDE = (
    _HEAD + "steps:\n  - id: E0\n    tool_name: t__echo\n    input: {n: 1}\n"
    "  - id: D\n    tool_name: decide\n    input:\n      if: {value: '{{E0.n}}', op: eq, to: 1}\n"
    "      then:\n        - {id: {THEN}, tool_name: t__echo, input: {side: then}}\n"
    "      else:\n        - {id: {ELSE}, tool_name: t__echo, input: {side: else}}\n"
)


def _decide(then_id: str, else_id: str) -> str:
    return _DECIDE.replace("{THEN}", then_id).replace("{ELSE}", else_id)


def test_body_ids_may_repeat_across_bodies_but_not_shadow_top_level_ids() -> None:
    """graph: pipeline/body.rs (body validation): a body step id that `collides with a plan step
    id` or repeats within its body (`has duplicate step id`) is an error; the same id in `then`
    and `else` of one decide is not."""
    _load(_decide("R", "R"))
    assert "duplicate step id 'E0'" in _problems(_decide("E0", "R"))
    twice = _DECIDE.replace(
        "        - {id: {THEN}, tool_name: t__echo, input: {side: then}}\n",
        "        - {id: R, tool_name: t__echo, input: {side: then}}\n"
        "        - {id: R, tool_name: t__echo, input: {side: again}}\n",
    ).replace("{ELSE}", "S")
    assert "duplicate step id 'R'" in _problems(twice)


async def test_same_id_in_then_and_else_runs() -> None:
    """graph: pipeline/decision.rs — only the chosen branch runs, so its ids are its own."""
    outcome = await run_yaml(
        _decide("R", "R").replace(_HEAD, _HEAD) + "output: {branch: '{{D.branch}}', result: '{{D.result}}'}\n"
    )
    assert outcome.kind == "ok", outcome.error
    assert outcome.output == {"branch": "then", "result": {"side": "then"}}


def test_plan_discovery_does_not_descend_into_subfolders(tmp_path: Any) -> None:
    """graph: pipeline/doc.rs::load_plan_docs reads each plans directory with `read_dir`, one level."""
    from graphchat.plans.discovery import discover

    (tmp_path / "sub").mkdir()
    (tmp_path / "top.yaml").write_text(
        _HEAD.replace("lenient", "top") + "steps:\n  - {id: E0, tool_name: t__echo, input: {}}\n"
    )
    (tmp_path / "sub" / "deep.yaml").write_text(
        _HEAD.replace("lenient", "deep") + "steps:\n  - {id: E0, tool_name: t__echo, input: {}}\n"
    )
    assert sorted(discover(tmp_path).plans) == ["top"]


def test_ignored_step_field_is_a_warning_on_stderr(cli: Any, workspace: Any) -> None:
    """graph: pipeline/plan.rs `Step` ignores `timeout: 30`; graphchat runs the plan and says so on stderr."""
    (workspace / "plans" / "slow.yaml").write_text(
        _HEAD.replace("lenient", "slow")
        + "steps:\n  - id: E0\n    tool_name: exit\n    timeout: 30\n    input: {status: success, message: done}\n"
    )
    run = cli("plan", "run", "slow")
    assert run.returncode == 0, run.stderr
    assert (
        "warning: " in run.stderr
        and "slow.yaml:7: step E0: timeout: unknown field in a step, ignored" in run.stderr
    )


# --- the solver finish: graph's pipeline/mod.rs `solve` and `budget_payload` --------------------


class _SolverLLM:
    """Records what the solver is sent (the scripted-server tests cover the real HTTP path)."""

    def __init__(self) -> None:
        self.sent: list[list[dict[str, Any]]] = []

    def factory(self, role: str, model: str | None, events: Any) -> _SolverLLM:
        return self

    async def complete(
        self, messages: list[dict[str, Any]], on_text: Any = None, site: str = "", **kw: Any
    ) -> Any:
        from graphchat.llm.types import Completion

        self.sent.append(messages)
        return Completion(content="done")  # the real completion type, as every model client returns


async def _solve(solver: str, inputs: Any = None) -> tuple[Any, str, str]:
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.plans.executor import run_plan
    from tests.plan_support import plan_from_yaml

    llm = _SolverLLM()
    plan = plan_from_yaml(
        _HEAD + "steps:\n  - id: E0\n    tool_name: t__list\n    input: {items: '{{input.items}}'}\n"
        "  - id: E1\n    tool_name: t__echo\n    input: {zeta: 1, alpha: {b: 2, a: 1}}\n" + solver
    )
    out = await run_plan(
        plan,
        inputs or {"items": [1]},
        catalog=Catalog([FakeTools()]),
        ctx=CallContext(),
        llm_factory=llm.factory,
    )
    assert out.kind == "ok" and out.answer == "done", out.error
    system, user = llm.sent[0]
    return out, system["content"], user["content"]


async def test_solver_without_data_sees_every_steps_result_pretty_with_sorted_keys() -> None:
    """graph: pipeline/mod.rs `solve` — an empty payload is `state.results`, sent as
    `serde_json::to_string_pretty` of a (sorted) map."""
    _, _, user = await _solve("solver: {query_to_answer: sum up}\n")
    expected = (
        '{\n  "E0": {\n    "items": [\n      1\n    ]\n  },\n'
        '  "E1": {\n    "alpha": {\n      "a": 1,\n      "b": 2\n    },\n    "zeta": 1\n  }\n}'
    )
    assert expected in user


async def test_solver_bad_path_in_data_is_unavailable_and_the_run_answers() -> None:
    """graph: pipeline/mod.rs `solve` — a key whose template does not render becomes
    `"(unavailable: <error>)"`; the run still answers."""
    _, _, user = await _solve(
        "solver:\n  query_to_answer: sum up\n  data: {good: '{{E1.zeta}}', bad: '{{E1.nope}}'}\n"
    )
    assert '"bad": "(unavailable: {{E1.nope}}: ' in user and '"good": 1' in user


async def test_solver_system_prompt_is_sent_verbatim() -> None:
    """graph: pipeline/mod.rs `solve` pushes `system_prompt` into the system message as written."""
    _, system, _ = await _solve(
        "solver:\n  query_to_answer: sum up\n  system_prompt: 'Cite {{E0.items}} as is.'\n"
    )
    assert "Cite {{E0.items}} as is." in system


async def test_solver_payload_is_sent_whole_up_to_400000_characters() -> None:
    """graph: pipeline/mod.rs::budget_payload — MAX_CHARS 400_000; past it, strings are cut to
    500 characters and arrays to 25 items."""
    big = ["x" * 1000] * 300  # about 300,000 characters: sent whole
    _, _, user = await _solve(
        "solver: {query_to_answer: sum up, data: {all: '{{E0.items}}'}}\n", {"items": big}
    )
    assert user.count("x" * 1000) == 300 and "cut" not in user
    bigger = ["y" * 1000] * 500  # over the budget: shrunk as graph shrinks
    _, _, user = await _solve(
        "solver: {query_to_answer: sum up, data: {all: '{{E0.items}}'}}\n", {"items": bigger}
    )
    assert user.count('"' + "y" * 500 + '…"') == 25 and "y" * 501 not in user


# --- inputs: graph-cli commands/input.rs and pipeline/doc.rs::apply_schema_defaults --------------

_INPUT_PLAN = """identifier: echo_in
name: Echo input
description: delivers its input
input_schema:
  type: object
  properties:
    team: {type: string}
    a: {type: integer}
    name: {type: string}
    opts: {type: object, properties: {depth: {type: integer, default: 2}}}
    level: {type: integer, default: 1}
steps:
  - id: E0
    tool_name: exit
    input: {when: {value: 1, op: eq, to: 2}, status: success, message: never}
output: {input: "{{input}}"}
"""


@pytest.fixture
def input_plan(workspace: Any) -> Any:
    (workspace / "plans" / "echo_in.yaml").write_text(_INPUT_PLAN)
    return workspace


def _delivered(run: Any) -> Any:
    import json

    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["input"]


def test_input_pairs_only_with_json_value_parsing(cli: Any, input_plan: Any) -> None:
    """graph: commands/input.rs::pairs_only_with_json_value_parsing and ::pairs_override_document_keys;
    pipeline/doc.rs::apply_schema_defaults fills the top-level `level`, not `opts.depth`."""
    got = _delivered(
        cli("plan", "run", "echo_in", '{"a": 1, "opts": {}}', "--input", "a=19", "--input", "name=Platform")
    )
    assert got == {"a": 19, "name": "Platform", "opts": {}, "level": 1}


def test_input_non_object_json_is_rejected_exit_1(cli: Any, input_plan: Any) -> None:
    """graph: commands/input.rs::non_object_json_is_rejected (`must be a JSON object`), an anyhow
    error: exit 1."""
    run = cli("plan", "run", "echo_in", "[1,2]")
    assert run.returncode == 1 and run.stdout == ""
    assert "input from argument must be a JSON object, got: [1,2]" in run.stderr
    run = cli("plan", "run", "echo_in", "null")
    assert run.returncode == 1 and "must be a JSON object, got: null" in run.stderr


def test_input_pair_without_equals_is_exit_1(cli: Any, input_plan: Any) -> None:
    """graph: commands/input.rs `resolve_input` — `--input must be key=value, got: {pair}` (exit 1)."""
    run = cli("plan", "run", "echo_in", "--input", "team")
    assert run.returncode == 1 and "--input must be key=value, got: team" in run.stderr


def test_input_empty_document_is_an_empty_object(cli: Any, input_plan: Any) -> None:
    """graph: commands/input.rs `parse_document` — an empty document is `{}`."""
    assert _delivered(cli("plan", "run", "echo_in", "")) == {"level": 1}
    empty = input_plan / "empty.json"
    empty.write_text("\n")
    assert _delivered(cli("plan", "run", "echo_in", f"@{empty}")) == {"level": 1}


def test_unknown_input_key_typed_is_exit_3_in_a_document_a_warning(cli: Any, input_plan: Any) -> None:
    """graph: commands/input.rs inserts every key (extra keys pass through). graphchat (issue 12,
    Decisions): `--input tema=core` is exit 3 naming the key and the close match; inside a
    document it is a warning and the key passes through."""
    run = cli("plan", "run", "echo_in", "--input", "tema=core")
    assert run.returncode == 3 and run.stdout == ""
    assert "'tema' is not an input of plan 'echo_in' (did you mean 'team'?)" in run.stderr
    run = cli("plan", "run", "echo_in", '{"tema": "core"}')
    assert _delivered(run) == {"tema": "core", "level": 1}
    assert "warning: input 'tema' is not an input of plan 'echo_in' (did you mean 'team'?)" in run.stderr


async def test_unknown_key_in_a_plan_tool_call_is_a_warning() -> None:
    """graph: pipeline/mod.rs invoke_plan passes a plan tool's arguments through; graphchat warns."""
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.plans.plan_tools import PlanSource
    from tests.plan_support import Recorder, plan_from_yaml

    catalog = Catalog([FakeTools()])
    catalog.add_source(PlanSource(None, catalog, plans=[plan_from_yaml(_INPUT_PLAN)], servers=set()))
    events = Recorder()
    result = await catalog.call("plan__echo_in", {"tema": "core"}, CallContext(events=events))
    assert not result.is_error and result.value == {"input": {"tema": "core", "level": 1}}
    warnings = [f.get("message") for e, f in events.events if e == "warning"]
    assert any(
        "'tema' is not an input of plan 'echo_in' (did you mean 'team'?)" in str(w) for w in warnings
    ), events.events


# --- --json envelopes: graph-cli tests/cli_contract.rs, commands/plan_cmd.rs, plan_edit.rs -------

_ECHO_PLAN = """identifier: echo_ok
name: Echo
description: says the word
steps:
  - id: E1
    tool_name: filter
    input: {over: [1], where: {value: "{{item}}", op: eq, to: 1}}
output: {said: "{{input.word}}"}
"""

_GATE_PLAN = """identifier: gate
name: Gate
description: stops when there are no rows
steps:
  - id: E1
    tool_name: filter
    input: {over: [], where: {value: "{{item}}", op: eq, to: 1}}
  - id: E2
    tool_name: exit
    input: {when: {value: "{{E1.count}}", op: eq, to: 0}, status: error, message: no rows found}
output: {n: "{{E1.count}}"}
"""


def test_plan_run_json_envelope_carries_the_documented_keys(cli: Any, workspace: Any) -> None:
    """graph: cli_contract.rs::plan_run_json_envelope_carries_the_documented_keys"""
    import json

    (workspace / "plans" / "echo_ok.yaml").write_text(_ECHO_PLAN)
    run = cli("plan", "run", "echo_ok", '{"word":"hi"}', "--json")
    assert run.returncode == 0, run.stderr
    envelope = json.loads(run.stdout)
    assert envelope["plan"] == "echo_ok" and envelope["output"] == {"said": "hi"}
    assert envelope["steps_executed"] == 1
    assert envelope["answer"] is None and envelope["exit"] is None
    assert set(envelope) == {"answer", "output", "plan", "steps_executed", "exit", "usage"}


def test_a_fired_gate_adds_an_exit_block_to_the_envelope(cli: Any, workspace: Any) -> None:
    """graph: cli_contract.rs::a_fired_gate_adds_an_exit_block_to_the_envelope — exit 4, `exit`
    {status, message, step}, only E1 counted, `answer` is the gate's message."""
    import json

    (workspace / "plans" / "gate.yaml").write_text(_GATE_PLAN)
    run = cli("plan", "run", "gate", "--json")
    assert run.returncode == 4
    envelope = json.loads(run.stdout)
    assert envelope["exit"] == {
        "status": "error",
        "message": "no rows found",
        "reason": None,
        "output": None,
        "step": "E2",
    }
    assert envelope["steps_executed"] == 1 and envelope["answer"] == "no rows found"


def test_failed_and_needs_input_runs_print_no_envelope(cli: Any, workspace: Any) -> None:
    """graph: plan_cmd.rs `run_plan` — a failed run (exit 1) and a needs-input run (exit 3)
    return before the envelope: stdout stays empty."""
    (workspace / "plans" / "needs.yaml").write_text(
        "identifier: needs\nname: N\ndescription: d\ninput_schema: {type: object, required: [n], properties: {n: {type: integer}}}\n"
        "steps:\n  - {id: E0, tool_name: filter, input: {over: [], where: {value: 1, op: eq, to: 1}}}\n"
        "output: {first: '{{E0.items.0}}'}\n"
    )
    needs = cli("plan", "run", "needs", "--json")
    assert needs.returncode == 3 and needs.stdout == ""
    failed = cli("plan", "run", "needs", "--input", "n=1", "--json")
    assert failed.returncode == 1 and failed.stdout == "" and "E0.items is an empty array" in failed.stderr


def test_plan_validate_and_list_envelopes(cli: Any, workspace: Any) -> None:
    """graph: cli_contract.rs::plan_validate_separates_fatal_problems_from_notes (single plan:
    {plan, steps, ok, problems, notes}) and ::plan_list_reports_broken_and_valid_plans_separately
    (plan_edit.rs `list_as_json`: plans with `steps`, skipped with `path`)."""
    import json

    (workspace / "plans" / "gate.yaml").write_text(_GATE_PLAN)
    (workspace / "plans" / "broken.yaml").write_text(
        "identifier: broken\nname: B\ndescription: d\nsteps: {\n"
    )
    one = json.loads(cli("plan", "validate", "gate", "--json").stdout)
    assert {k: one[k] for k in ("plan", "steps", "ok", "problems", "notes")} == {
        "plan": "gate",
        "steps": 2,
        "ok": True,
        "problems": [],
        "notes": [],
    }
    every = json.loads(cli("plan", "validate", "--json").stdout)
    assert set(every) == {"plans", "ok"} and every["ok"] is False
    assert sorted(p["plan"] for p in every["plans"]) == ["broken", "gate"]
    listing = json.loads(cli("plan", "list", "--json").stdout)
    assert [(p["identifier"], p["steps"]) for p in listing["plans"]] == [("gate", 2)] and listing[
        "count"
    ] == 1
    assert len(listing["skipped"]) == 1 and listing["skipped"][0]["path"].endswith("broken.yaml")
    assert listing["hidden"] == []


async def test_steps_executed_counts_as_graph_counts() -> None:
    """graph: pipeline/tests.rs — `E0 + decide + 1 branch call` is 3, `E0 + map + 3 item calls`
    is 5, `E0 + reduce + 2 item calls` is 4 (state.rs `steps_executed` counts the control step
    itself and its body calls; a fired exit is not counted)."""
    decide = await run_yaml(_decide("R", "S") + "output: {b: '{{D.branch}}'}\n")
    assert decide.steps_executed == 3, decide.error
    mapped = await run_yaml(
        _HEAD + "steps:\n  - {id: E0, tool_name: t__list, input: {items: [1, 2, 3]}}\n"
        "  - id: E1\n    tool_name: map\n    input: {over: '{{E0.items}}', do: {tool_name: t__echo, input: {n: '{{item}}'}}}\n"
        "output: {n: '{{E1.count}}'}\n"
    )
    assert mapped.steps_executed == 5, mapped.error
    reduced = await run_yaml(
        _HEAD + "steps:\n  - {id: E0, tool_name: t__list, input: {items: [a, b]}}\n"
        "  - id: E1\n    tool_name: reduce\n    input: {over: '{{E0.items}}', initial: {seen: none}, "
        "do: {tool_name: t__echo, input: {i: '{{item}}', a: '{{accumulator}}'}}}\n"
        "output: {n: '{{E1.count}}'}\n"
    )
    assert reduced.steps_executed == 4, reduced.error
    exited = await run_yaml(
        _HEAD + "steps:\n  - {id: E0, tool_name: t__echo, input: {}}\n"
        "  - {id: E1, tool_name: exit, input: {status: success, message: bye}}\n"
    )
    assert exited.kind == "exit" and exited.steps_executed == 1


_BRANCH_EXIT_PLAN = """identifier: branch_exit
name: Branch exit
description: an exit that fires in a decide's branch
steps:
  - {id: E0, tool_name: builtin__reshape, input: {shape: {n: 1}}}
  - id: E1
    tool_name: decide
    input:
      if: {value: "{{E0.n}}", op: eq, to: 1}
      then:
        - {id: note, tool_name: builtin__reshape, input: {shape: {said: hi}}}
        - {id: stop, tool_name: exit, input: {status: success, message: done in the branch}}
  - {id: E2, tool_name: builtin__reshape, input: {shape: {never: true}}}
"""


def test_steps_executed_counts_an_exit_that_fires_in_a_branch(cli: Any, workspace: Any) -> None:
    """graph: `E0; decide then: [note, exit]` is 3 — E0, the branch's call and the fired exit in
    the body (pipeline/body.rs: `BodyFail::Exited` carries `steps_executed + 1`); the `decide`
    itself has no result, so counts 0 (state.rs `steps_executed`), as does a fired top-level exit."""
    import json

    (workspace / "plans" / "branch_exit.yaml").write_text(_BRANCH_EXIT_PLAN)
    run = cli("plan", "run", "branch_exit", "--json")
    assert run.returncode == 0, run.stderr
    envelope = json.loads(run.stdout)
    assert envelope["exit"]["status"] == "success" and envelope["exit"]["message"] == "done in the branch"
    assert envelope["steps_executed"] == 3
    top = _BRANCH_EXIT_PLAN.replace("branch_exit", "top_exit").split("  - id: E1")[0] + (
        "  - {id: E1, tool_name: exit, input: {status: success, message: bye}}\n"
    )
    (workspace / "plans" / "top_exit.yaml").write_text(top)
    run = cli("plan", "run", "top_exit", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["steps_executed"] == 1  # E0; the fired top-level exit counts 0
