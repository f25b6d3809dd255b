"""The plan loader, discovery and catalog validation, in-process (fast, no subprocess)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from graphchat.catalog.base import Catalog, ToolSource, ToolSpec
from graphchat.errors import GraphchatError
from graphchat.plans.discovery import discover, find_plan, load_cached, relative_problems
from graphchat.plans.loader import load_plan, load_plan_data, plan_to_dict
from graphchat.plans.model import Body, PlanLoadError
from graphchat.plans.validate import Servers, known_servers, validate_against_catalog

TESTS = Path(__file__).resolve().parent.parent
MALFORMED = sorted((TESTS / "plans_malformed").glob("*.yaml"))
REFERENCE = sorted((TESTS / "plans_reference").glob("*.yaml"))


def plan_doc(*steps: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"identifier": "p", "name": "P", "description": "d", "steps": list(steps), **extra}


def problems_of(data: Any) -> list[str]:
    with pytest.raises(PlanLoadError) as info:
        load_plan_data(data, "x.yaml")
    return info.value.problems


def call(step_id: str, tool: str = "srv__t", **inputs: Any) -> dict[str, Any]:
    return {"id": step_id, "tool_name": tool, "input": inputs}


# --- structure and normalisation ----------------------------------------------------------------


def test_camel_case_is_normalised_but_tool_arguments_are_left_alone() -> None:
    plan = load_plan_data(
        {
            "identifier": "c",
            "name": "C",
            "description": "d",
            "inputSchema": {"type": "object"},
            "requiresServers": ["srv"],
            "steps": [
                {"id": "E0", "toolName": "srv__list", "input": {"updatedAt": "-P14D", "pageSize": 5}},
                {
                    "id": "E1",
                    "toolName": "ask",
                    "input": {
                        "prompt": "ok?",
                        "outputSchema": {"type": "object", "properties": {"okNow": {"type": "boolean"}}},
                        "whenUnanswered": "default",
                        "default": {"okNow": True},
                    },
                },
            ],
            "solver": {"queryToAnswer": "q", "systemPrompt": "s", "data": {"someKey": "{{E0}}"}},
        }
    )
    assert plan.input_schema == {"type": "object"}
    assert plan.requires_servers == ["srv"]
    assert plan.steps[0].input == {"updatedAt": "-P14D", "pageSize": 5}
    ask = plan.steps[1]
    assert set(ask.input) == {"prompt", "output_schema", "when_unanswered", "default"}
    # the schema's own property names and the default's keys are the author's, untouched
    assert "okNow" in ask.input["output_schema"]["properties"]
    assert ask.input["default"] == {"okNow": True}
    assert plan.solver is not None and plan.solver.query_to_answer == "q"
    assert plan.solver.system_prompt == "s" and plan.solver.data == {"someKey": "{{E0}}"}
    assert plan.finish == "solver"


def test_bodies_are_parsed_and_taken_out_of_the_input() -> None:
    plan = load_plan_data(
        plan_doc(
            call("E0"),
            {
                "id": "E1",
                "tool_name": "decide",
                "input": {
                    "if": {"value": "{{E0.n}}", "op": "gt", "to": 1},
                    "then": {"toolName": "srv__a", "input": {"x": "{{E0.n}}"}},
                    "else": [call("B1", x="{{E0}}"), call("B2", y="{{B1.z}}")],
                },
            },
            {"id": "E2", "tool_name": "map", "input": {"over": "{{E0.items}}", "do": call_body("srv__b")}},
        )
    )
    decide = plan.steps[1]
    assert set(decide.input) == {"if"}
    then, other = decide.bodies["then"], decide.bodies["else"]
    assert isinstance(then, Body) and then.single and then.steps[0].id is None
    assert then.steps[0].tool_name == "srv__a" and then.steps[0].input == {"x": "{{E0.n}}"}
    assert not other.single and [s.id for s in other.steps] == ["B1", "B2"]
    assert plan.steps[2].bodies["do"].single
    assert [s.label for s in plan.all_steps()] == ["E0", "E1", "srv__a", "B1", "B2", "E2", "srv__b"]
    assert plan.finish == "silent"


def call_body(tool: str) -> dict[str, Any]:
    return {"tool_name": tool, "input": {"i": "{{item}}", "n": "{{index}}"}}


def test_every_problem_is_reported_not_only_the_first() -> None:
    problems = problems_of(
        {
            "identifier": "bad id",
            "name": "N",
            "steps": [
                call("E0", x="{{E1.a}}"),
                {
                    "id": "E1",
                    "tool_name": "map",
                    "input": {"over": [], "concurrency": 0, "do": call_body("s__t")},
                },
                {"id": "E1", "tool_name": "ask_user", "input": {}},
            ],
            "colour": "red",
        }
    )
    expected = [
        "x.yaml: colour: unknown field",
        "x.yaml: identifier: 'bad id'",
        "x.yaml: description: required",
        "x.yaml: step E0: input.x: forward reference to step 'E1'",
        "x.yaml: step E1: input.concurrency: must be at least 1",
        "x.yaml: step E1: id: duplicate step id 'E1'",
        "x.yaml: step E1: tool_name: `ask_user` is not allowed",
    ]
    for want in expected:
        assert any(p.startswith(want) for p in problems), (want, problems)
    assert len(problems) == len(expected)


def test_problems_of_a_file_carry_its_path_and_steps_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n"
        "  - id: E0\n    tool_name: s__t\n    input: {}\n"
        "  - id: E1\n    tool_name: map\n    input:\n      over: [1]\n      do:\n"
        "        - id: D1\n          tool_name: s__u\n          input: {a: '{{item}}'}\n"
    )
    plan = load_plan(path)
    assert plan.path == path
    assert [(s.label, s.line) for s in plan.all_steps()] == [("E0", 5), ("E1", 8), ("D1", 13)]
    path.write_text(path.read_text().replace("s__u", "reduce"))
    with pytest.raises(PlanLoadError) as info:
        load_plan(path)
    assert info.value.problems == [
        f"{path}: step E1/do/D1: tool_name: `reduce` cannot nest inside `map` `do`: "
        "call a sub-plan (plan__*) instead"
    ]
    assert relative_problems(info.value)[0].startswith("step E1/do/D1: tool_name: ")


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yml"
    path.write_text("identifier: p\nsteps:\n  - id: [unclosed\n")
    with pytest.raises(PlanLoadError) as info:
        load_plan(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}: yaml: line ") and "invalid YAML" in problem


# --- templates and scopes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("steps", "want"),
    [
        ([call("E0", a="{{E1.x}}"), call("E1")], "step E0: input.a: forward reference to step 'E1'"),
        ([call("E0", a="{{nope.x}}")], "step E0: input.a: unknown root 'nope'"),
        ([call("E0", a="{{item}}")], "step E0: input.a: {{item}} is only available"),
        ([call("E0", a={"deep": ["{{accumulator}}"]})], "step E0: input.a.deep.0: {{accumulator}} is only"),
        ([call("E0", a="{{#E1.list}}{{name}}{{/E1.list}}"), call("E1")], "forward reference to step 'E1'"),
        ([call("E0", a="{{E0.x}}")], "step E0: input.a: forward reference to step 'E0'"),
        ([call("E0", a="{{#a}}x")], "step E0: input.a: template: "),
        ([call("E0", a="{{input..x}}")], "step E0: input.a: template: "),
    ],
)
def test_template_problems(steps: list[dict[str, Any]], want: str) -> None:
    assert any(want in p for p in problems_of(plan_doc(*steps))), problems_of(plan_doc(*steps))


def test_valid_scopes_load() -> None:
    load_plan_data(
        plan_doc(
            # A dotted path inside a section names a root, as in graph (`{{other.x}}` would not load).
            call("E0", a="{{input.q}}", b="{{#input.list}}{{name}} {{@index}} {{input.q}}{{/input.list}}"),
            {
                "id": "E1",
                "tool_name": "map",
                "input": {
                    "over": "{{E0.items}}",
                    "do": [
                        # a filter nested in a body reads the outer item in `over`, its own in `where`
                        {
                            "id": "F1",
                            "tool_name": "filter",
                            "input": {
                                "over": "{{item.files}}",
                                "where": {"value": "{{item.n}}", "op": "gt", "to": 5},
                            },
                        },
                        call("F2", a="{{F1.items}}", b="{{index}}", c="{{E0.x}}"),
                    ],
                },
            },
            {
                "id": "E2",
                "tool_name": "reduce",
                "input": {
                    "over": "{{E1.results}}",
                    "initial": {"n": 0},
                    "do": {"tool_name": "s__t", "input": {"a": "{{accumulator.n}}"}},
                },
            },
            {
                "id": "E3",
                "tool_name": "filter",
                "input": {"over": "{{E2.result}}", "infer": "Is {{item}} good?"},
            },
        ),
    )


def test_pseudo_roots_in_over_and_body_scopes() -> None:
    problems = problems_of(
        plan_doc(
            {"id": "E0", "tool_name": "map", "input": {"over": "{{item.x}}", "do": call_body("s__t")}},
            {
                "id": "E1",
                "tool_name": "filter",
                "input": {"over": "{{index}}", "where": {"value": 1, "op": "eq", "to": 1}},
            },
            {
                "id": "E2",
                "tool_name": "reduce",
                "input": {"over": [], "initial": "{{accumulator}}", "do": call_body("s__t")},
            },
            {
                "id": "E3",
                "tool_name": "decide",
                "input": {"if": {"value": "{{item}}", "op": "empty"}, "then": call_body("s__t")},
            },
        )
    )
    assert "x.yaml: step E0: input.over: {{item}} is only available inside `do`, not in `over`" in problems
    assert (
        "x.yaml: step E1: input.over: {{index}} is only available inside `where`/`infer`, not in `over`"
        in problems
    )
    assert (
        "x.yaml: step E2: input.initial: {{accumulator}} is only available inside `do`, not in `initial`"
        in problems
    )
    # decide branches have no per-item scope
    assert any(p.startswith("x.yaml: step E3: input.if.value: {{item}}") for p in problems)
    assert any(p.startswith("x.yaml: step E3/then: input.i: {{item}}") for p in problems)


# --- control steps ---------------------------------------------------------------------------------


def ask(**fields: Any) -> dict[str, Any]:
    base = {
        "prompt": "Which?",
        "output_schema": {
            "type": "object",
            "properties": {"c": {"enum": ["a", "b"]}, "n": {"type": "integer"}},
        },
    }
    return {"id": "A", "tool_name": "ask", "input": {**base, **fields}}


def test_ask_rules() -> None:
    load_plan_data(plan_doc(ask(when_unanswered="default", default={"c": "a", "n": 3})))
    # a templated default is only checked after rendering
    load_plan_data(plan_doc(ask(when_unanswered="default", default={"c": "{{input.c}}", "n": "{{input.n}}"})))
    assert problems_of(plan_doc(ask(when_unanswered="default", default={"c": "z", "n": 1.5}))) == [
        # the full JSON Schema, as graph's ask.rs `schema_mismatch`
        "x.yaml: step A: input.default: does not match output_schema: c: 'z' is not one of ['a', 'b']",
        "x.yaml: step A: input.default: does not match output_schema: n: 1.5 is not of type 'integer'",
    ]
    assert problems_of(plan_doc(ask(when_unanswered="later"))) == [
        "x.yaml: step A: input.when_unanswered: must be fail or default, got 'later'"
    ]
    nested = {"type": "object", "properties": {"o": {"type": "object"}, "l": {"type": "array"}, "x": {}}}
    problems = problems_of(plan_doc(ask(output_schema=nested)))
    assert len(problems) == 3 and all(
        p.startswith("x.yaml: step A: input.output_schema: property ") for p in problems
    )
    assert problems_of(plan_doc(ask(output_schema={"type": "string"})))[0].startswith(
        'x.yaml: step A: input.output_schema: `type` must be "object"'
    )


def test_agent_rules() -> None:
    ok_schema = {"properties": {"a": {"type": "string"}}}
    load_plan_data(
        plan_doc(
            {
                "id": "G",
                "tool_name": "agent",
                "input": {"prompt": "p", "output_schema": ok_schema, "tools": ["srv__*", "*", "x__y"]},
            }
        )
    )
    problems = problems_of(
        plan_doc(
            {
                "id": "G",
                "tool_name": "agent",
                "input": {"prompt": "p", "output_schema": {"type": "array"}, "tools": []},
            },
            {
                "id": "H",
                "tool_name": "agent",
                "input": {"prompt": 3, "output_schema": ok_schema, "tools": "srv__*", "max_iterations": 0},
            },
        )
    )
    assert problems == [
        "x.yaml: step G: input.output_schema: `type` must be \"object\", got 'array'",
        "x.yaml: step G: input.tools: is empty: omit it for the whole catalog, or name at least one tool or pattern",
        "x.yaml: step H: input.prompt: must be a non-empty string, got a number (3)",
        "x.yaml: step H: input.tools: must be a list of tool names or `*` globs, got a string",
        "x.yaml: step H: input.max_iterations: must be at least 1, got 0",
    ]


def test_exit_and_gate_rules() -> None:
    load_plan_data(
        plan_doc(
            call("E0"),
            {"id": "E1", "tool_name": "exit", "input": {"status": "success"}},  # unconditional
            {
                "id": "E2",
                "tool_name": "exit",
                "input": {
                    "when": {
                        "all": [
                            {"value": "{{E0.n}}", "op": "gt", "to": 1},
                            {"not": {"value": "{{E0.s}}", "op": "empty"}},
                        ]
                    },
                    "status": "error",
                    "output": {"n": "{{E0.n}}"},
                },
            },
            {
                "id": "E3",
                "tool_name": "exit",
                "input": {"infer": "Done with {{E0.s}}?", "model": "judge", "status": "success"},
            },
        )
    )
    problems = problems_of(
        plan_doc(
            call("E0"),
            {
                "id": "E1",
                "tool_name": "exit",
                "input": {"when": {"value": 1, "op": "gt"}, "infer": "q", "status": "maybe"},
            },
            {
                "id": "E2",
                "tool_name": "exit",
                "input": {"when": {"any": [{"infer": "q"}]}, "status": "error"},
            },
        )
    )
    assert problems[0] == "x.yaml: step E1: input.when: `when` and `infer` exclude each other: keep one"
    assert "x.yaml: step E1: input.when: `gt` needs `to`" in problems
    assert "x.yaml: step E1: input.status: must be success or error, got 'maybe'" in problems
    assert any(
        p.startswith("x.yaml: step E2: input.when: any.0: `infer` gates cannot be combined") for p in problems
    )


def test_solver_and_output_and_plan_level_rules() -> None:
    problems = problems_of(
        {
            "identifier": "",
            "name": 3,
            "description": "d",
            "exemplars": "one",
            "steps": {"E0": {}},
            "solver": {"data": {"a": "{{E0}}"}},
            "output": ["not", "a", "map"],
        }
    )
    assert problems == [
        "x.yaml: identifier: must be a non-empty string, got a string",
        "x.yaml: name: must be a non-empty string, got a number (3)",
        "x.yaml: exemplars: must be a list of non-empty strings",
        "x.yaml: steps: must be a list of steps, got a mapping",
        "x.yaml: solver.data.a: unknown root 'E0' in {{E0}} (known here: input)",
        "x.yaml: output: must be a template map (a mapping), got a list",
        # a solver without `query_to_answer` loads (graph's SolverData defaults it to "")
        "x.yaml: solver: `solver` and `output` exclude each other: keep one",
    ]
    assert problems_of(None) == [
        "x.yaml: plan: a plan file must hold a mapping (identifier, name, ...), got an empty file"
    ]


def test_plan_to_dict_round_trips() -> None:
    for path in REFERENCE:
        plan = load_plan(path)
        again = load_plan_data(plan_to_dict(plan), str(path))
        assert plan_to_dict(again) == plan_to_dict(plan)
        # what `plan show` prints is snake_case YAML that loads as the same plan
        assert plan_to_dict(
            load_plan_data(yaml.safe_load(yaml.safe_dump(plan_to_dict(plan))))
        ) == plan_to_dict(plan)


# --- the corpora -----------------------------------------------------------------------------------


def expected_problem(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect: "), path
    return first[len("# expect: ") :]


LOAD_TIME = [p for p in MALFORMED if not p.name.startswith(("44_", "45_"))]


def test_the_corpora_are_big_enough() -> None:
    assert len(MALFORMED) >= 30 and len(REFERENCE) >= 5


@pytest.mark.parametrize("path", LOAD_TIME, ids=lambda p: p.stem)
def test_each_malformed_plan_fails_to_load_naming_step_and_field(path: Path) -> None:
    with pytest.raises(PlanLoadError) as info:
        load_plan(path)
    want = expected_problem(path)
    assert any(p.startswith(want) for p in relative_problems(info.value)), info.value.problems


@pytest.mark.parametrize("path", REFERENCE, ids=lambda p: p.stem)
def test_reference_plans_load(path: Path) -> None:
    plan = load_plan(path)
    assert plan.identifier == path.stem


# --- discovery -------------------------------------------------------------------------------------


def write_plan(path: Path, identifier: str, tool: str = "srv__t") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump(plan_doc({"id": "E0", "tool_name": tool, "input": {}}, identifier=identifier))
    )


def test_discovery_sorts_skips_and_warns(tmp_path: Path) -> None:
    plans = tmp_path / "plans"
    write_plan(plans / "b.yaml", "beta")
    write_plan(plans / "a.yml", "alpha")
    write_plan(plans / "c.yaml", "alpha")  # duplicate: a.yml comes first
    write_plan(plans / "sub" / "d.yaml", "delta")  # subfolders are not searched (as graph)
    (plans / "broken.yaml").write_text("identifier: broken\nname: B\ndescription: d\nsteps: []\n")
    (plans / "notes.txt").write_text("not a plan")
    warnings: list[str] = []
    index = discover(plans, warn=warnings.append)
    assert list(index.plans) == ["alpha", "beta"]
    assert index.plans["alpha"].path == plans / "a.yml"
    assert index.duplicates == {plans / "c.yaml": "alpha"}
    assert list(index.errors) == [plans / "broken.yaml"]
    assert len(warnings) == 2 and all("\n" not in w for w in warnings)
    assert warnings[0] == f"skipping plan {plans / 'broken.yaml'}: steps: the plan has no steps"
    assert "duplicate identifier 'alpha'" in warnings[1] and str(plans / "a.yml") in warnings[1]

    assert index.get("beta").identifier == "beta"
    assert index.get("plan__beta").identifier == "beta"
    assert index.get(str(plans / "sub" / "d.yaml")).path == plans / "sub" / "d.yaml"  # by path: anywhere
    with pytest.raises(GraphchatError) as info:
        index.get("broken")
    assert info.value.exit_code == 1
    assert "does not load" in info.value.message and "steps: the plan has no steps" in info.value.message
    with pytest.raises(GraphchatError) as info:
        index.get("gamma")
    assert info.value.message == "unknown plan 'gamma' (known plans: alpha, beta)"
    with pytest.raises(GraphchatError) as info:
        find_plan(str(plans / "broken.yaml"), plans)
    assert "steps: the plan has no steps" in info.value.message
    assert discover(tmp_path / "missing").plans == {}


def test_load_cache_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    write_plan(path, "one")
    first = load_cached(path)
    assert load_cached(path) is first
    write_plan(path, "second_version")
    os.utime(path, ns=(1, 1))  # a different mtime even within the clock's resolution
    assert load_cached(path).identifier == "second_version"


# --- catalog validation -----------------------------------------------------------------------------


class FakeSource(ToolSource):
    def __init__(self, specs: list[ToolSpec]) -> None:
        self._specs = specs

    def specs(self) -> list[ToolSpec]:
        return self._specs

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: Any) -> Any:
        raise AssertionError("validation must never call a tool")

    async def aclose(self) -> None:
        pass


def spec(name: str, source: str) -> ToolSpec:
    return ToolSpec(name=name, description="", input_schema={}, source=source)


def fake_catalog() -> Catalog:
    return Catalog(
        [
            FakeSource(
                [
                    spec("builtin__infer", "native"),
                    spec("time__get_current_time", "mcp:time"),
                    spec("time__convert_time", "mcp:time"),
                    spec("plan__other", "plan"),
                ]
            )
        ]
    )


def test_validate_against_catalog() -> None:
    catalog = fake_catalog()
    servers = Servers(
        configured={"time", "git"}, cached={"time": {"time__get_current_time", "time__convert_time"}}
    )
    plan = load_plan_data(
        plan_doc(
            call("E0", "time__get_current_time"),
            call("E1", "git__status"),  # configured, list not cached: checked at dispatch
            call("E2", "time__nope"),
            call("E3", "web__fetch"),
            call("E4", "plan__other"),
            call("E5", "plan__hidden"),
            call("E6", "plan__missing"),
            call("E7", "builtin__nope"),
            {
                "id": "E8",
                "tool_name": "map",
                "input": {"over": [], "do": {"tool_name": "web__get", "input": {}}},
            },
            {
                "id": "E9",
                "tool_name": "agent",
                "input": {
                    "prompt": "p",
                    "output_schema": {"type": "object"},
                    "tools": ["time__*", "git__*", "web__*", "*__search", "builtin__infer"],
                },
            },
            requires_servers=["time", "web"],
        )
    )
    hidden = load_plan_data(plan_doc(call("E0"), identifier="hidden", requires_servers=["slack"]))
    problems = validate_against_catalog(plan, catalog, servers=servers, plans={"hidden": hidden})
    assert problems == [
        "requires_servers: MCP server(s) 'web' not configured (add them to catalog/servers.yaml)",
        "step E2: tool_name: server 'time' has no tool 'time__nope' (its tools: time__convert_time, time__get_current_time)",
        "step E3: tool_name: MCP server 'web' is not configured (catalog/servers.yaml), so 'web__fetch' cannot resolve",
        "step E5: tool_name: plan 'hidden' needs MCP server(s) slack, which are not configured",
        "step E6: tool_name: unknown plan tool 'plan__missing' (plans here: hidden)",
        "step E7: tool_name: unknown builtin tool 'builtin__nope' (builtins: builtin__infer)",
        "step E8/do: tool_name: MCP server 'web' is not configured (catalog/servers.yaml), so 'web__get' cannot resolve",
        "step E9: input.tools: pattern 'web__*' needs MCP server 'web', which is not configured",
    ]
    # a plan *file* whose declared servers are missing: not problems (a note, said by the CLI)
    soft = validate_against_catalog(
        plan, catalog, servers=servers, plans={"hidden": hidden}, soft_required_servers=True
    )
    assert not any("'web'" in p for p in soft) and len(soft) == 4


def test_servers_are_read_without_starting_them(tmp_path: Path) -> None:
    servers_file = tmp_path / "servers.yaml"
    servers_file.write_text("mcpServers:\n  git: {command: does-not-exist}\n  time: {command: nope}\n")
    info = known_servers(fake_catalog(), servers_file)
    assert info.configured == {"git", "time"}
    assert info.cached == {"time": {"time__get_current_time", "time__convert_time"}}


@pytest.mark.parametrize("path", REFERENCE, ids=lambda p: p.stem)
def test_reference_plans_validate_against_the_time_server(path: Path) -> None:
    others = {p.stem: load_plan(p) for p in REFERENCE}
    servers = Servers(configured={"time"}, cached={"time": {"time__get_current_time", "time__convert_time"}})
    assert validate_against_catalog(load_plan(path), fake_catalog(), servers=servers, plans=others) == []
