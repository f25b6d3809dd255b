"""graph's scripting contract (issue 26, build 4): each `--json` envelope graph has, compared key by
key with graph's, written out here from graph's source and its CLI contract tests
(tylerdavis/graph: crates/graph-cli/src/commands/listing.rs, tools_cmd.rs, shapes_cmd.rs,
mcp_cmd.rs, config_cmd.rs; crates/graph-cli/tests/cli_contract.rs). graphchat's own keys may stay
beside graph's; graph's are all there, with graph's meaning."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.servers.support import stdio, write_servers

# listing.rs `tool_listing_as_json`
GRAPH_LIST_ENVELOPE = {"tools", "count", "sources"}
GRAPH_LIST_TOOL = {"name", "source", "description", "readOnly", "hasOutputSchema"}
GRAPH_LIST_SOURCE = {"source", "count"}
# listing.rs `tool_as_json` ("every key is always present": show_json_keeps_absent_optionals_as_null)
GRAPH_SHOW = {"name", "source", "description", "readOnly", "inputSchema", "outputSchema", "outputExample"}
# tools_cmd.rs `test`
GRAPH_TEST = {"tool", "isError", "result"}
# shapes_cmd.rs `list` / `shape_as_json`
GRAPH_SHAPES = {"shapes", "count"}
GRAPH_SHAPE = {"tool", "seen_count", "schema", "example"}
# mcp_cmd.rs `list`
GRAPH_SERVERS = {"servers", "count"}
GRAPH_SERVER = {"name", "transport", "target"}
# graph_core::pipeline::control_step_defs (cli_contract.rs the_catalog_serves_the_control_steps…)
CONTROL = ["agent", "ask", "exit", "decide", "filter", "map", "reduce"]


def _json(done) -> dict:
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert isinstance(body, dict)
    return body


def test_tools_list_json_is_graphs_envelope(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "echo_ok.yaml").write_text(
        "identifier: echo_ok\nname: Echo\ndescription: echo\n"
        "steps:\n  - id: E0\n    tool_name: exit\n    input: {status: success, message: ok}\n"
    )
    body = _json(cli("tools", "list", "--json"))
    assert set(body) == GRAPH_LIST_ENVELOPE
    tools = body["tools"]
    assert body["count"] == len(tools)  # cli_contract.rs: count must match the array it describes
    for tool in tools:
        assert GRAPH_LIST_TOOL <= set(tool), tool
        assert isinstance(tool["hasOutputSchema"], bool)
        assert tool["readOnly"] in (True, False, None)
    by_name = {t["name"]: t for t in tools}
    # graph's source: the namespace before `__`; bare names are "(core)"
    assert by_name["t__slow"]["source"] == "t" and by_name["t__slow"]["readOnly"] is True
    assert by_name["t__slow"]["origin"] == "mcp:t" and by_name["t__slow"]["family"] == "read"  # graphchat's
    assert by_name["t__delete_file"]["readOnly"] is False
    assert by_name["plan__echo_ok"]["source"] == "plan"
    assert by_name["plan_and_execute"]["source"] == "(core)"
    assert by_name["ask_user"]["source"] == "(core)"
    assert by_name["builtin__infer"]["source"] == "builtin"
    # the control steps, last, in graph's order, under "(control)"
    assert [t["name"] for t in tools[-len(CONTROL) :]] == CONTROL
    for name in CONTROL:
        assert by_name[name]["source"] == "(control)" and by_name[name]["readOnly"] is None
    # the `sources` roll-up: each source once, in order of first appearance, with its count
    rollup = body["sources"]
    assert all(set(s) == GRAPH_LIST_SOURCE for s in rollup)
    firsts: list[str] = []
    for tool in tools:
        if tool["source"] not in firsts:
            firsts.append(tool["source"])
    assert [s["source"] for s in rollup] == firsts
    assert {s["source"]: s["count"] for s in rollup} == {
        source: sum(1 for t in tools if t["source"] == source) for source in firsts
    }
    assert {"source": "(control)", "count": 7} in rollup
    text = cli("tools", "list").stdout  # the text listing marks them too
    assert any(line.split()[:3] == ["decide", "(control)", "control"] for line in text.splitlines())


def test_tools_show_json_carries_every_key_of_graphs(workspace: Path, cli: GraphchatRunner) -> None:
    write_servers(workspace, {"t": stdio()})
    shown = _json(cli("tools", "show", "t__slow", "--json"))
    assert GRAPH_SHOW <= set(shown)
    assert shown["name"] == "t__slow" and shown["source"] == "t" and shown["readOnly"] is True
    assert shown["inputSchema"]["type"] == "object" and shown["inputSchema"] == shown["input_schema"]
    assert shown["outputSchema"]["properties"]["result"]["type"] == "string"  # what the server declares
    core = _json(cli("tools", "show", "plan_and_execute", "--json"))
    assert GRAPH_SHOW <= set(core) and core["source"] == "(core)"
    assert core["outputSchema"] is None and core["outputExample"] is None  # null, never missing
    # cli_contract.rs tools_show_always_includes_every_schema_key: builtin__reshape's `shape`
    reshape = _json(cli("tools", "show", "builtin__reshape", "--json"))
    assert GRAPH_SHOW <= set(reshape) and isinstance(reshape["inputSchema"]["properties"]["shape"], dict)
    # a control step is described, schema included (the_catalog_serves_the_control_steps…)
    for name in CONTROL:
        control = _json(cli("tools", "show", name, "--json"))
        assert GRAPH_SHOW <= set(control) and control["source"] == "(control)"
        assert control["readOnly"] is None and control["outputSchema"] is None
    ask = _json(cli("tools", "show", "ask", "--json"))
    for field in ("prompt", "outputSchema", "whenUnanswered", "default"):
        assert field in ask["inputSchema"]["properties"]
    assert "control step" in cli("tools", "show", "decide").stdout


def test_tools_test_is_graphs_envelope_and_a_tool_error_exits_0(
    workspace: Path, cli: GraphchatRunner
) -> None:
    # cli_contract.rs tools_test_reports_a_failing_tool_without_failing_the_command
    done = cli("tools", "test", "builtin__reshape", '{"shape":{"a":"1"}}', "--json")
    body = _json(done)
    assert set(body) == GRAPH_TEST
    assert body == {"tool": "builtin__reshape", "isError": False, "result": {"a": "1"}}
    plain = cli("tools", "test", "builtin__reshape", '{"shape":{"a":"1"}}')
    assert plain.returncode == 0 and json.loads(plain.stdout) == {"a": "1"}  # the result, unwrapped
    failed = cli("tools", "test", "builtin__reshape", "--input", "nope=1", "--json")
    body = _json(failed)  # the call completed: exit 0, `isError` says the rest
    assert set(body) == GRAPH_TEST and body["isError"] is True and "shape" in json.dumps(body["result"])
    plain = cli("tools", "test", "builtin__reshape", "--input", "nope=1")
    assert plain.returncode == 0 and "tool returned an error:" in plain.stderr
    # `tools call` keeps graphchat's {value, is_error, ms} and its exit 1
    called = cli("tools", "call", "builtin__reshape", "--input", "nope=1", "--json")
    assert called.returncode == 1 and set(json.loads(called.stdout)) == {"value", "is_error", "ms"}


def test_a_control_step_is_listed_but_never_callable(workspace: Path, cli: GraphchatRunner) -> None:
    # cli_contract.rs a_control_step_refuses_to_be_tested_as_a_tool
    for verb in ("test", "call"):
        done = cli("tools", verb, "ask", "--input", "prompt=hi")
        assert done.returncode == 1, done.stderr
        assert "'ask' is a control step" in done.stderr and done.stdout == ""


def test_shapes_list_json_is_graphs_envelope(workspace: Path, cli: GraphchatRunner) -> None:
    # cli_contract.rs an_empty_listing_is_an_envelope_with_a_note_not_stderr_advice
    empty = cli("shapes", "list", "--json")
    body = _json(empty)
    assert set(body) == GRAPH_SHAPES | {"note"} and body["count"] == 0 and body["shapes"] == []
    assert body["note"] and empty.stderr == ""
    assert cli("tools", "test", "builtin__reshape", '{"shape":{"a":"1"}}').returncode == 0
    body = _json(cli("shapes", "list", "--json"))
    assert set(body) == GRAPH_SHAPES and body["count"] == len(body["shapes"]) == 1
    [shape] = body["shapes"]
    assert GRAPH_SHAPE <= set(shape)
    assert shape["tool"] == "builtin__reshape" and shape["seen_count"] == 1
    assert shape["schema"]["properties"]["a"]["type"] == "string" and shape["example"] == {"a": "1"}


def test_mcp_list_json_is_graphs_envelope(workspace: Path, cli: GraphchatRunner) -> None:
    empty = cli("mcp", "list", "--json")
    body = _json(empty)
    assert set(body) == GRAPH_SERVERS | {"note"} and body["count"] == 0 and body["servers"] == []
    assert body["note"] and empty.stderr == ""
    write_servers(workspace, {"t": stdio(), "web": {"url": "http://127.0.0.1:9/mcp"}})
    body = _json(cli("mcp", "list", "--json"))
    assert set(body) == GRAPH_SERVERS and body["count"] == len(body["servers"]) == 2
    t, web = body["servers"]
    assert GRAPH_SERVER <= set(t) and GRAPH_SERVER <= set(web)
    assert (t["name"], t["transport"]) == ("t", "stdio") and "python" in t["target"]
    assert (web["name"], web["transport"], web["target"]) == ("web", "http", "http://127.0.0.1:9/mcp")


def test_every_listing_answers_a_counted_envelope(workspace: Path, cli: GraphchatRunner) -> None:
    # cli_contract.rs every_listing_command_answers_json_with_a_counted_envelope
    for args, key in (
        (("plan", "list", "--json"), "plans"),
        (("tools", "list", "--json"), "tools"),
        (("shapes", "list", "--json"), "shapes"),
        (("mcp", "list", "--json"), "servers"),
    ):
        body = _json(cli(*args))
        assert isinstance(body[key], list), args
        if "count" in body:
            assert body["count"] == len(body[key]), args


def test_plan_run_usage_by_step_and_by_model(workspace: Path, cli: GraphchatRunner, model_server) -> None:
    """graph's usage report (graph-core/src/usage.rs `UsageReport`): `by_step` groups the model
    calls by the step path they were made in (else the call's role: the solver), `by_model` by
    provider and model, each with `calls` and its tokens."""
    (workspace / "plans" / "label.yaml").write_text(
        "identifier: label\nname: Label\ndescription: label a report\nsteps:\n"
        "  - id: E0\n    tool_name: builtin__infer\n    input:\n      instruction: 'Label: crash on save'\n"
        "      output_schema: {type: object, required: [label], properties: {label: {type: string}}}\n"
        "solver:\n  query_to_answer: What was found?\n  data: {label: '{{E0.label}}'}\n"
    )
    model_server.push({"json": {"label": "bug"}}, {"text": "One bug."})
    done = cli("plan", "run", "label", "--json", env=model_server.env())
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["usage"]
    assert usage["calls"] == 2
    assert sorted(s["path"] for s in usage["by_step"]) == ["E0", "solver"]
    for group in usage["by_step"]:
        assert {"path", "calls", "input_tokens", "output_tokens"} <= set(group) and group["calls"] == 1
    [model] = usage["by_model"]
    assert {"provider", "model", "calls", "input_tokens", "output_tokens"} <= set(model)
    assert model["calls"] == 2 and model["model"].endswith("scripted") and model["provider"] == "openai"
    assert sum(s["input_tokens"] for s in usage["by_step"]) == usage["input_tokens"] == model["input_tokens"]
