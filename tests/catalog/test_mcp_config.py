"""catalog/servers.yaml: the mcpServers shape, ${VAR} expansion, and one-line errors with file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphchat.catalog.mcp.config import load_servers
from graphchat.errors import ConfigError, GraphchatError


def load(workspace: Path, text: str) -> list:
    (workspace / "catalog" / "servers.yaml").write_text(text)
    return load_servers(workspace / "catalog", workspace)


def test_a_pasted_mcp_json_works_unchanged(workspace: Path) -> None:
    pasted = {
        "mcpServers": {
            "git": {"command": "uvx", "args": ["mcp-server-git"], "env": {"GIT_PAGER": "cat"}, "disabled": False,
                    "autoApprove": []},
            "search": {"type": "http", "url": "https://example.test/mcp",
                       "headers": {"Authorization": "Bearer ${T}"}},
            "old": {"command": "x", "disabled": True},
        }
    }  # fmt: skip
    servers = load(workspace, json.dumps(pasted))
    assert [(s.name, s.transport) for s in servers] == [("git", "stdio"), ("search", "http")]
    assert servers[0].env == {"GIT_PAGER": "cat"} and servers[0].args == ("mcp-server-git",)
    assert servers[1].headers == {"Authorization": "Bearer ${T}"}  # expanded only at start


def test_graphchat_extras_are_read(workspace: Path) -> None:
    (server,) = load(
        workspace,
        "mcpServers:\n  s:\n    command: srv\n    include_tools: [query, 'get_*']\n    exclude_tools: [get_secret]\n"
        "    timeout_s: 5\n    tool_overrides:\n      query: {description: Search, family: write}\n",
    )
    assert server.timeout_s == 5.0
    assert server.wants_tool("query") and server.wants_tool("get_x")
    assert not server.wants_tool("get_secret") and not server.wants_tool("delete")
    assert server.tool_overrides["query"] == {"description": "Search", "family": "write"}


def test_variables_expand_with_defaults_in_every_field(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GC_DIR", "/data")
    monkeypatch.setenv("GC_EMPTY", "")
    monkeypatch.delenv("GC_MISSING", raising=False)
    (server,) = load(
        workspace,
        "mcpServers:\n  s:\n    command: '${GC_DIR}/bin/srv'\n"
        "    args: ['--root', '${GC_DIR}', '--mode=${GC_MISSING:-fast}', '${GC_EMPTY:-fallback}']\n"
        "    env: {HOME_DIR: '${GC_DIR}'}\n    cwd: '${GC_MISSING:-sub}'\n",
    )
    expanded = server.expanded()
    assert expanded.command == "/data/bin/srv"
    assert expanded.args == ["--root", "/data", "--mode=fast", "fallback"]
    assert expanded.env == {"HOME_DIR": "/data"}
    assert expanded.cwd == str(workspace / "sub")  # relative to the workspace
    assert "GRAPHCHAT_PYTHON" not in expanded.args  # builtin variables only where used


def test_an_unset_variable_names_server_field_and_variable(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SEARCH_TOKEN", raising=False)
    (server,) = load(
        workspace,
        "mcpServers:\n  search:\n    type: http\n    url: https://example.test/mcp\n"
        "    headers: {Authorization: 'Bearer ${SEARCH_TOKEN}'}\n",
    )
    with pytest.raises(GraphchatError) as err:
        server.expanded()
    message = err.value.message
    assert "'search'" in message and "headers.Authorization" in message and "SEARCH_TOKEN" in message


def test_builtin_variables_point_at_graphchats_python_and_the_workspace(workspace: Path) -> None:
    import sys

    (server,) = load(
        workspace,
        "mcpServers:\n  git:\n    command: '${GRAPHCHAT_PYTHON}'\n"
        "    args: [-m, mcp_server_git, --repository, '${GRAPHCHAT_WORKSPACE}']\n",
    )
    expanded = server.expanded()
    assert expanded.command == sys.executable
    assert expanded.args[-1] == str(workspace)


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("mcpServers:\n  ok:\n    command: a\n  bad name!:\n    command: b\n", 4, "letters, digits"),
        ("mcpServers:\n  a__b:\n    command: x\n", 2, "no '__'"),
        ("mcpServers:\n  s:\n    command: x\n    exclude_tool: [a]\n", 4, "did you mean `exclude_tools`"),
        ("mcpServers:\n  s:\n    type: sse\n    url: http://x\n", 3, "streamable HTTP"),
        ("mcpServers:\n  s:\n    args: [a]\n", 2, "`command` is required"),
        ("mcpServers:\n  s:\n    type: http\n", 2, "`url` is required"),
        ("mcpServers:\n  s:\n    command: x\n    timeout_s: -1\n", 4, "positive number"),
        ("mcpServers:\n  s:\n    command: x\n    tool_overrides:\n      q: {family: scary}\n", 5, "family"),
        ("servers:\n  s:\n    command: x\n", 1, "rename `servers` to `mcpServers`"),
        ("mcpServers:\n  s: [\n", 3, "invalid YAML"),
    ],
)
def test_a_bad_file_is_one_line_with_file_and_line(workspace: Path, text: str, line: int, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        load(workspace, text)
    message = err.value.message
    assert message.startswith(f"{workspace / 'catalog' / 'servers.yaml'}:{line}:"), message
    assert words in message and "\n" not in message


def test_no_servers_file_means_no_servers(workspace: Path) -> None:
    assert load_servers(workspace / "catalog", workspace) == []


def test_the_cache_key_follows_the_config_but_not_header_values(workspace: Path) -> None:
    a, b, c = load(
        workspace,
        "mcpServers:\n"
        "  a: {type: http, url: 'http://h/mcp', headers: {Authorization: one}}\n"
        "  b: {type: http, url: 'http://h/mcp', headers: {Authorization: two}}\n"
        "  c: {type: http, url: 'http://other/mcp', headers: {Authorization: one}}\n",
    )
    assert a.config_hash == b.config_hash != c.config_hash


@pytest.mark.process
def test_bundled_servers_are_not_shadowed_by_files_in_the_current_folder(
    workspace: Path, tmp_path: Path
) -> None:
    """Issue 11 point 1: a folder holding mcp.py / git.py must not break `-m mcp_server_time`."""
    import subprocess
    import sys

    from tests.conftest import clean_env

    (workspace / "catalog" / "servers.yaml").write_text(
        "mcpServers:\n  time:\n    command: '${GRAPHCHAT_PYTHON}'\n    args: [-m, mcp_server_time]\n"
    )
    elsewhere = tmp_path / "my-mcp-project"
    elsewhere.mkdir()
    for folder in (workspace, elsewhere):  # the workspace itself, and where the person stands
        for name in ("mcp.py", "git.py"):
            (folder / name).write_text("raise SystemExit('shadowed: the wrong module ran')\n")
    for cwd in (workspace, elsewhere):
        done = subprocess.run(
            # -P: as the installed `graphchat` script runs (its folder, not the cwd, is on the path)
            [sys.executable, "-P", "-m", "graphchat", "--home", str(workspace), "tools", "call",
             "time__get_current_time", "--input", "timezone=UTC"],
            env=clean_env(home=tmp_path), capture_output=True, text=True, timeout=90, cwd=str(cwd),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert '"timezone"' in done.stdout and "UTC" in done.stdout


def test_a_stdio_server_runs_in_the_workspace_unless_cwd_is_set(workspace: Path) -> None:
    a, b = load(workspace, "mcpServers:\n  a: {command: x}\n  b: {command: x, cwd: sub}\n")
    assert a.expanded({}).cwd == str(workspace)
    assert b.expanded({}).cwd == str(workspace / "sub")
