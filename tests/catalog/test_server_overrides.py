"""servers.yaml extras as a user sees them: include/exclude_tools, tool_overrides (description,
family, output_schema), and `tools show` with a declared schema plus the learned shape."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.servers.support import LOWLEVEL_SERVER, stdio, write_servers

DECLARED = {
    "type": "object",
    "properties": {"id": {"type": ["integer", "string"]}, "score": {"type": "number"}},
    "required": ["id"],
}


def test_filters_and_overrides_are_honoured_by_list_show_call_and_shapes(
    workspace: Path, cli: GraphchatRunner
) -> None:
    write_servers(
        workspace,
        {
            "t": stdio(
                exclude_tools=["crash", "confirm_*"],
                tool_overrides={
                    "shaped": {
                        "description": "Shaped, by override.",
                        "family": "write",
                        "output_schema": DECLARED,
                    }
                },
            ),
            "low": stdio(LOWLEVEL_SERVER, env={"TOOL_COUNT": "3"}, include_tools=["tool_001"]),
        },
    )
    listed = cli("tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    tools = {t["name"]: t for t in json.loads(listed.stdout)["tools"]}
    assert [n for n in tools if n.startswith("low__")] == ["low__tool_001"]
    assert "t__crash" not in tools and "t__confirm_push" not in tools and "t__slow" in tools
    assert tools["t__shaped"]["description"] == "Shaped, by override."
    assert tools["t__shaped"]["family"] == "write"  # the server says read-only

    refused = cli("tools", "call", "t__shaped", "--input", "variant=1")
    assert refused.returncode == 1 and "was not run" in refused.stderr  # the override's family counts
    assert cli("tools", "call", "t__shaped", "--input", "variant=2", "--yes").returncode == 0
    assert cli("tools", "call", "t__stamp", "--input", "n=2").returncode == 0

    shown = json.loads(cli("tools", "show", "t__shaped", "--json").stdout)
    assert shown["output_schema"] == DECLARED and shown["output_schema_source"] == "declared"
    assert shown["observed_schema"]["properties"]["tags"]["type"] == "array"  # learned as well
    assert shown["example"] == {"id": "two", "tags": ["x", "y"], "score": 2}
    text = cli("tools", "show", "t__stamp").stdout
    assert "output schema (declared):" in text and "observed output shape (1 calls):" in text
    assert '"total": 4' in text  # the example
    stored = json.loads(cli("shapes", "show", "t__shaped", "--json").stdout)
    assert stored["source"] == "declared" and stored["schema"] == DECLARED


def test_filter_and_override_names_the_server_does_not_have_are_warnings(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """graph: docs/tools/mcp-servers.mdx "Filtering and overrides" (include_tools, exclude_tools,
    tool_overrides name a server's tools); issue 12, tools #5: a name the server does not have is
    a warning naming the server and the close matches, not silently ignored."""
    write_servers(
        workspace,
        {
            "t": stdio(
                include_tools=["stamp", "shaped", "stmap_all"],
                exclude_tools=["crahs"],
                tool_overrides={"shapd": {"description": "typo"}, "shaped": {"description": "ok"}},
            )
        },
    )
    listed = cli("tools", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {t["name"] for t in json.loads(listed.stdout)["tools"] if t["name"].startswith("t__")} == {
        "t__stamp",
        "t__shaped",
    }
    warned = cli("tools", "list").stderr
    assert (
        "MCP server 't': tool_overrides names 'shapd', which the server does not have (did you mean 'shaped'"
        in warned
    )
    assert (
        "MCP server 't': exclude_tools names 'crahs', which the server does not have (did you mean 'crash'?)"
        in warned
    )
    assert "include_tools names 'stmap_all'" in warned and "'stamp'" in warned
    assert "names 'shaped'" not in warned and "names 'stamp'" not in warned
