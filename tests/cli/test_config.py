"""`graphchat config show [--json]` and `config path [--json]` (issue 26, build 3): graph's envelopes,
key by key, as graph's crates/graph-cli/src/commands/config_cmd.rs writes them (`show`:
`{config, sources}`; `path`: `{files: [{path, exists}], count}`)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.servers.support import write_servers

GRAPH_SHOW = {"config", "sources"}  # config_cmd.rs `show`
GRAPH_PATH = {"files", "count"}  # config_cmd.rs `path`
GRAPH_FILE = {"path", "exists"}


def test_config_show_json_is_graphs_envelope_merged_masked_and_sourced(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "graphchat.yaml").write_text(
        "models:\n  default: {model: openai/gpt-4o-mini, api_key: sk-literal-secret}\n"
        "  solver: openai/gpt-4o\n"
        "settings:\n  max_agent_iterations: 7\n"
        "approvals:\n  deny: [t__rm]\n"
    )
    write_servers(
        workspace,
        {
            "web": {
                "type": "http",
                "url": "http://127.0.0.1:9/mcp",
                "headers": {"Authorization": "Bearer ${WEB_TOKEN}", "X-Api-Key": "plain-key"},
            }
        },
    )
    done = cli("config", "show", "--json", env={"GRAPHCHAT_API_BASE": "http://127.0.0.1:1/v1"})
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert GRAPH_SHOW <= set(body) and set(body) - GRAPH_SHOW == {"value_sources"}
    yaml_path, servers_path = str(workspace / "graphchat.yaml"), str(workspace / "catalog" / "servers.yaml")
    assert body["sources"] == [yaml_path, servers_path]  # graph's: the files merged, in order
    config, origins = body["config"], body["value_sources"]
    assert config["settings"]["max_agent_iterations"] == 7 and config["settings"]["planning_attempts"] == 2
    assert origins["settings.max_agent_iterations"] == yaml_path
    assert origins["settings.planning_attempts"] == "(default)"
    assert config["approvals"]["deny"] == ["t__rm"] and origins["approvals.deny"] == yaml_path
    default = config["models"]["default"]
    assert default["model"] == "openai/gpt-4o-mini" and default["api_key"] == "********"  # masked
    assert default["api_base"] == "http://127.0.0.1:1/v1"
    assert origins["models.default.api_base"] == "environment: GRAPHCHAT_API_BASE"
    assert config["models"]["solver"] == "openai/gpt-4o"
    headers = config["mcpServers"]["web"]["headers"]
    assert headers == {
        "Authorization": "Bearer ${WEB_TOKEN}",
        "X-Api-Key": "********",
    }  # a ${VAR} is no secret
    assert origins["mcpServers.web.url"] == servers_path
    assert "sk-literal-secret" not in done.stdout and "plain-key" not in done.stdout
    text = cli("config", "show")
    assert text.returncode == 0 and f"# merged from {yaml_path}" in text.stderr
    assert "max_agent_iterations: 7  # " + yaml_path in text.stdout and "sk-literal-secret" not in text.stdout


def test_config_path_json_is_graphs_envelope(workspace: Path, cli: GraphchatRunner) -> None:
    done = cli("config", "path", "--json")
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert set(body) == GRAPH_PATH and body["count"] == len(body["files"]) == 3
    assert all(set(f) == GRAPH_FILE for f in body["files"])
    user = workspace.parent / ".xdg-config" / "graphchat" / "config.yaml"  # the user's layer, first
    assert body["files"] == [
        {"path": str(user), "exists": False},
        {"path": str(workspace / "graphchat.yaml"), "exists": True},
        {"path": str(workspace / "catalog" / "servers.yaml"), "exists": False},
    ]
    text = cli("config", "path").stdout
    assert (
        text == f"{user}\tmissing\n{workspace / 'graphchat.yaml'}\texists\n"
        f"{workspace / 'catalog' / 'servers.yaml'}\tmissing\n"
    )


def test_a_bad_configuration_is_exit_2_for_config_show(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iteration: 3\n")
    done = cli("config", "show", "--json")
    assert done.returncode == 2 and done.stdout == "" and "graphchat.yaml:2" in done.stderr
