"""The plan template language: parsing, typed splice, sections, typed errors, introspection."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphchat.template import (
    BadPath,
    EmptyData,
    MissingStep,
    TemplateError,
    TemplateSyntaxError,
    check_syntax,
    parse,
    references,
    render_string,
    render_text,
    render_value,
    section_references,
)

SCOPE = {
    "input": {"team": "Core", "max": 50, "ratio": 0.5, "flag": True, "none": None},
    "E0": {
        "values": [{"id": "team-1", "name": "Red"}, {"id": "team-2", "name": "Blue", "desc": "d"}],
        "empty": [],
        "nothing": None,
        "count": 42,
        "ids": [1, 2, 3],
        "obj": {"a": 1, "b": [True, None]},
        "text": "héllo",
        "zero": 0,
        "blank": "",
        "by_year": {"2024": "yes"},
        "meta": {"length": 7},
    },
}


def r(text: str, scope: dict | None = None, step: str | None = None):
    return render_string(text, SCOPE if scope is None else scope, step=step)


# --- values and typed splice -------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{E0.count}}", 42),
        ("{{ E0.ids }}", [1, 2, 3]),
        ("{{E0.obj}}", {"a": 1, "b": [True, None]}),
        ("{{input.flag}}", True),
        ("{{input.none}}", None),
        ("{{input.ratio}}", 0.5),
        ("{{E0.values.1.name}}", "Blue"),
        ("{{E0.values.length}}", 2),
        ("{{E0.text.length}}", 5),
        ("{{\n  input.max\t}}", 50),
    ],
)
def test_typed_splice_keeps_json_types(template: str, expected: object) -> None:
    result = r(template)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("team {{E0.values.0.name}}", "team Red"),
        ("n={{E0.count}}", "n=42"),
        ("r={{input.ratio}}", "r=0.5"),
        ("{{input.flag}}/{{E0.obj.b.0}}", "true/true"),
        ("[{{input.none}}]", "[]"),
        ("ids: {{E0.ids}}", "ids: [\n  1,\n  2,\n  3\n]"),
        ("o: {{E0.obj}}", 'o: {\n  "a": 1,\n  "b": [\n    true,\n    null\n  ]\n}'),
        (" {{E0.count}}", " 42"),
        ("{{E0.count}}{{E0.count}}", "4242"),
        ("no tags", "no tags"),
        ("closing }} alone is text", "closing }} alone is text"),
    ],
)
def test_mixed_text_renders_to_string(template: str, expected: str) -> None:
    assert r(template) == expected


def test_render_value_walks_the_whole_tree_and_leaves_other_values_alone() -> None:
    tree = {
        "teamId": "{{E0.values.0.id}}",
        "limit": "{{input.max}}",
        "nested": {"q": "team {{E0.values.0.id}}", "list": ["{{E0.ids}}", 3, None, False]},
        "{{keys are not templates}}": 1.5,
    }
    assert render_value(tree, SCOPE) == {
        "teamId": "team-1",
        "limit": 50,
        "nested": {"q": "team team-1", "list": [[1, 2, 3], 3, None, False]},
        "{{keys are not templates}}": 1.5,
    }
    assert render_value(7, SCOPE) == 7
    assert render_value(None, SCOPE) is None


def test_render_text_never_splices() -> None:
    assert render_text("{{E0.count}}", SCOPE) == "42"
    assert render_text("{{E0.ids}}", SCOPE) == "[\n  1,\n  2,\n  3\n]"


# --- sections ----------------------------------------------------------------------------


def test_section_iterates_with_loop_variables() -> None:
    template = "{{#E0.values}}{{@index}}:{{name}}{{#@first}}*{{/@first}}{{^@last}}, {{/@last}}{{/E0.values}}"
    assert r(template) == "0:Red*, 1:Blue"


def test_missing_key_on_an_item_renders_empty() -> None:
    assert r("{{#E0.values}}{{name}}={{desc}};{{/E0.values}}") == "Red=;Blue=d;"


def test_inverted_sections_and_falsy_values() -> None:
    for path in (
        "E0.empty",
        "E0.nothing",
        "E0.blank",
        "E0.nope",
        "E0.values.9",
        "E0.nothing.x",
        "input.flag.x",
    ):
        assert r(f"{{{{#{path}}}}}yes{{{{/{path}}}}}{{{{^{path}}}}}no{{{{/{path}}}}}") == "no", path
    for path in ("E0.zero", "E0.obj", "input.flag", "E0.text", "E0.ids"):
        assert r(f"{{{{^{path}}}}}no{{{{/{path}}}}}") == "", path


def test_object_section_becomes_context_and_scalar_renders_once() -> None:
    assert r("{{#E0.obj}}a={{a}}{{/E0.obj}}") == "a=1"
    assert r("{{#input.flag}}on {{input.team}}{{/input.flag}}") == "on Core"
    assert r("{{#E0.zero}}zero is truthy{{/E0.zero}}") == "zero is truthy"


def test_nested_sections_fall_back_outward_and_to_roots() -> None:
    scope = {"E0": {"teams": [{"name": "Core", "members": [{"who": "amy"}, {"who": "bo"}]}]}}
    template = "{{#E0.teams}}{{#members}}{{who}}@{{name}}/{{E0.teams.length}} {{/members}}{{/E0.teams}}"
    assert r(template, scope) == "amy@Core/1 bo@Core/1 "


def test_bare_length_and_index_read_the_current_item() -> None:
    scope = {"E0": {"rows": [[1, 2], [3]], "words": ["ab", "c"]}}
    assert r("{{#E0.rows}}{{length}}:{{0}} {{/E0.rows}}", scope) == "2:1 1:3 "
    assert r("{{#E0.words}}{{length}}{{/E0.words}}", scope) == "21"


def test_scope_roots_win_over_item_keys() -> None:
    scope = {"index": 7, "E0": {"rows": [{"index": 1}]}}
    assert r("{{#E0.rows}}{{index}}{{/E0.rows}}", scope) == "7"


def test_loop_variables_inside_object_section_use_enclosing_array() -> None:
    scope = {"E0": {"rows": [{"o": {"x": 1}}, {"o": {"x": 2}}]}}
    assert r("{{#E0.rows}}{{#o}}{{@index}}{{x}}{{/o}}{{/E0.rows}}", scope) == "0112"


def test_loop_variable_in_section_over_object_without_array_is_an_error() -> None:
    with pytest.raises(BadPath, match="@index"):
        r("{{#E0.obj}}{{@index}}{{/E0.obj}}")


def test_section_over_unknown_root_is_missing_step() -> None:
    with pytest.raises(MissingStep):
        r("{{#E9.values}}x{{/E9.values}}")
    with pytest.raises(MissingStep):
        r("{{^E9}}x{{/E9}}")


def test_root_anchored_value_inside_a_section_stays_strict() -> None:
    with pytest.raises(BadPath):
        r("{{#E0.values}}{{E0.nope}}{{/E0.values}}")


# --- typed errors ------------------------------------------------------------------------


def test_missing_step_names_step_path_and_available_roots() -> None:
    with pytest.raises(MissingStep) as info:
        r("{{E7.values}}", step="E3")
    err = info.value
    assert (err.step, err.path, err.root) == ("E3", "E7.values", "E7")
    message = str(err)
    assert "step E3" in message and "E7.values" in message and "input, E0" in message


def test_bad_path_lists_up_to_twelve_available_keys() -> None:
    with pytest.raises(BadPath) as info:
        r("{{E0.values.0.idd}}", step="S")
    message = str(info.value)
    assert "step S" in message and "E0.values.0.idd" in message and "id, name" in message
    big = {"E0": {f"k{i:02}": i for i in range(20)}}
    with pytest.raises(BadPath) as info:
        r("{{E0.nope}}", big)
    assert info.value.available == [f"k{i:02}" for i in range(12)]
    assert "k11" in str(info.value) and "k12" not in str(info.value)


@pytest.mark.parametrize(
    "template",
    [
        "{{E0.count.x}}",
        "{{E0.ids.x}}",
        "{{E0.count.length}}",
        "{{E0.obj.length}}",
        "{{E0.text.0}}",
        # Issue 12 (graph's behaviour): `length` is always the pseudo-key, a numeric segment
        # always an index, and null has no length.
        "{{E0.meta.length}}",
        "{{E0.by_year.2024}}",
        "{{E0.nothing.length}}",
    ],
)
def test_walking_off_the_data_is_bad_path(template: str) -> None:
    with pytest.raises(BadPath) as info:
        r(template, step="E5")
    assert "step E5" in str(info.value) and template.strip("{}") in str(info.value)


@pytest.mark.parametrize(
    ("template", "fragment"),
    [
        ("{{E0.empty.0}}", "empty array"),
        ("{{E0.ids.3}}", "out of range"),
        ("{{E0.nothing.x}}", "null"),
        ("{{E0.nothing.0}}", "null"),
        ("x {{E0.values.5.id}}", "out of range"),
    ],
)
def test_running_out_of_data_is_empty_data(template: str, fragment: str) -> None:
    with pytest.raises(EmptyData) as info:
        r(template, step="E2")
    assert fragment in str(info.value) and "step E2" in str(info.value)


def test_step_is_only_filled_in_when_unknown_and_errors_pickle() -> None:
    with pytest.raises(EmptyData) as info:
        render_value({"a": ["{{E0.empty.0}}"]}, SCOPE, step="E8")
    clone = pickle.loads(pickle.dumps(info.value))
    assert (clone.step, clone.path, str(clone)) == ("E8", "E0.empty.0", str(info.value))


# --- syntax ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    [
        "{{>x}}",
        "{{!x}}",
        "{{<x}}{{/x}}",
        "{{$x}}{{/x}}",
        "{{=<% %>=}}",
        "{{&x}}",
        "{{{x}}}",
        "{{a..b}}",
        "{{.a}}",
        "{{a.}}",
        "{{}}",
        "{{  }}",
        "x {{a",
        "{{#a}}",
        "{{#a}}{{/b}}",
        "{{/a}}",
        "{{#a}}{{#b}}{{/a}}{{/b}}",
        "{{@index}}",
        "{{#@first}}x{{/@first}}",
        "{{a.@index}}",
        "{{@foo}}",
        "{{input.length.x}}",
        "{{length}}",
        "{{0.a}}",
        "{{#}}{{/}}",
    ],
)
def test_unsupported_syntax_is_a_syntax_error(template: str) -> None:
    with pytest.raises(TemplateSyntaxError):
        parse(template)
    assert check_syntax({"field": [template]})


def test_syntax_error_names_the_tag() -> None:
    with pytest.raises(TemplateSyntaxError) as info:
        render_value("hello {{a..b}}", {}, step="E1")
    assert info.value.path == "a..b"
    assert str(info.value).startswith("step E1: {{a..b}}: ")


def test_valid_templates_parse() -> None:
    for template in [
        "{{#E0.values}}{{@index}}{{^@last}},{{/@last}}{{/E0.values}}",
        "{{ # E0.x }}{{ / E0.x }}",
        "{{E0.some-key}} {{E0.$ref}} {{E0.a:b}} {{E0.naïve}}",
        # Issue 12: a segment holds any character but `.`, as in the reference product.
        "{{a b}} {{E0.first name}} {{E0.a(b)}} {{input.x | upper}} {{input.x[0]}} {{a+b}}",
        "{{#a}}{{length}}{{0}}{{/a}}",
    ]:
        parse(template)
    assert check_syntax({"a": "{{E0.x}}", "b": [1, "plain"]}) == []


def test_check_syntax_reports_every_problem_with_its_location() -> None:
    problems = check_syntax({"q": "{{a..b}}", "list": ["ok", "{{#x}}"], "n": 1})
    assert len(problems) == 2
    assert problems[0].startswith("q: {{a..b}}")
    assert problems[1].startswith("list.1: ")


def test_parse_is_cached() -> None:
    assert parse("{{E0.count}} cached") is parse("{{E0.count}} cached")


# --- introspection -----------------------------------------------------------------------


def test_references_returns_certain_roots_only() -> None:
    tree = {
        "a": "{{input.team}} and {{E0.values.0}}",
        "b": ["{{#E1.items}}{{name}} {{E2.x}} {{owner.name}}{{/E1.items}}", 5],
        "c": "{{^E3}}none{{/E3}}",
        "d": "plain",
    }
    assert references(tree) == {"input", "E0", "E1", "E3"}
    assert section_references(tree) == {"E2", "owner"}
    with pytest.raises(TemplateSyntaxError):
        references({"x": ["{{a..b}}"]})


# --- properties --------------------------------------------------------------------------

_TEXT_ALPHABET = st.sampled_from(list("{}#^/@.!>$<&= ab01lengthE_-\n"))
_fragment = st.one_of(
    st.text(_TEXT_ALPHABET, max_size=6),
    st.sampled_from(
        ["{{", "}}", "{{#a}}", "{{/a}}", "{{^a.b}}", "{{a}}", "{{@index}}", "{{length}}", "{{0}}", "{{a.0}}"]
    ),
)
_template_text = st.lists(_fragment, max_size=8).map("".join)

_PATHS = ["a", "b", "E0", "input", "a.0", "a.b", "b.length", "E0.a.0", "input.length", "0", "length", "a.a.b"]


def _section(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def wrap(args: tuple[str, bool, list[str]]) -> str:
        path, inverted, body = args
        sigil = "^" if inverted else "#"
        return "{{" + sigil + path + "}}" + "".join(body) + "{{/" + path + "}}"

    return st.tuples(st.sampled_from(_PATHS), st.booleans(), st.lists(children, max_size=3)).map(wrap)


# Well-formed templates with nested sections; tags that are only legal inside sections are
# rendered too and may raise their typed errors, which is what the property checks.
_well_formed = st.recursive(
    st.text(st.sampled_from(list("ab .,\n")), max_size=4)
    | st.sampled_from(_PATHS[:5]).map(lambda p: "{{" + p + "}}"),
    _section,
    max_leaves=8,
)
_inner_tags = st.sampled_from(
    ["{{@index}}", "{{@first}}", "{{#@last}}x{{/@last}}", "{{length}}", "{{0}}", "{{b}}"]
)


def _nest(args: tuple[str, list[str]]) -> str:
    path, parts = args
    return "{{#" + path + "}}" + "".join(parts) + "{{/" + path + "}}"


_sectioned = st.tuples(st.sampled_from(_PATHS[:5]), st.lists(_well_formed | _inner_tags, max_size=4)).map(
    _nest
)

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "0", "length"]), children, max_size=4)
    ),
    max_leaves=12,
)
_scope = st.dictionaries(st.sampled_from(["a", "b", "E0", "input"]), _json, max_size=3)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_template_text, st.text(max_size=30)))
def test_parse_raises_only_syntax_errors(text: str) -> None:
    try:
        parse(text)
    except TemplateSyntaxError:
        pass


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_template_text, _well_formed, _sectioned), _scope)
def test_render_raises_only_template_errors(text: str, scope: dict) -> None:
    try:
        parse(text)
    except TemplateSyntaxError:
        return
    try:
        result = render_value({"k": [text]}, scope, step="P")
    except TemplateError as err:
        assert err.step == "P"
        assert str(err)
        return
    if parse(text).splice is None:
        assert isinstance(result["k"][0], str)


@given(_json)
def test_typed_splice_round_trips_any_json_value(value: object) -> None:
    assert render_value("{{E0}}", {"E0": value}) == value
    assert render_value("{{ E0 }}", {"E0": {"x": value}}) == {"x": value}
