"""`graphchat init` writes a working starter workspace; `where` says which workspace is in use."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.inprocess import run_cli


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(args, home=cwd, cwd=cwd, input="")


def test_init_writes_a_workspace_whose_plan_validates(tmp_path: Path) -> None:
    done = run(["init", "ws"], tmp_path)
    assert done.returncode == 0, done.stderr
    ws = tmp_path / "ws"
    assert done.stdout.strip() == str(ws.resolve())
    for name in ("graphchat.yaml", "catalog/servers.yaml", "plans/clocks.yaml"):
        assert (ws / name).is_file(), name
    assert (ws / "threads").is_dir()
    assert "graphchat plan run clocks" in done.stderr
    # the new folder is found as the workspace from inside it, and its plan is valid
    listed = run(["plan", "list"], ws)
    assert listed.returncode == 0 and "clocks" in listed.stdout, listed.stderr
    valid = run(["plan", "validate", "clocks"], ws)
    assert valid.returncode == 0, valid.stdout + valid.stderr


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    (tmp_path / "graphchat.yaml").write_text("# mine\n")
    done = run(["init"], tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: ") and "graphchat.yaml" in done.stderr and "--force" in done.stderr
    assert (tmp_path / "graphchat.yaml").read_text() == "# mine\n"
    assert not (tmp_path / "plans" / "clocks.yaml").exists()  # nothing was written
    forced = run(["init", "--force"], tmp_path)
    assert forced.returncode == 0, forced.stderr
    assert "approvals:" in (tmp_path / "graphchat.yaml").read_text()


def test_no_model_error_names_the_workspace_and_init(tmp_path: Path) -> None:
    empty = tmp_path / "nowhere"
    (empty / "plans").mkdir(parents=True)  # a workspace without graphchat.yaml
    done = run(["--home", str(empty), "ask", "hi"], tmp_path)
    assert done.returncode == 2
    assert str(empty) in done.stderr.splitlines()[0]
    assert "graphchat init" in done.stderr


def test_where_names_workspace_model_and_servers(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "catalog" / "servers.yaml").write_text(
        "mcpServers:\n  clock: {command: python3, args: [-m, mcp_server_time]}\n"
    )
    done = cli("where", env={"GRAPHCHAT_MODEL": "openai/gpt-4o-mini"})
    assert done.returncode == 0, done.stderr
    assert f"workspace  {workspace.resolve()}" in done.stdout
    assert "openai/gpt-4o-mini" in done.stdout and "clock" in done.stdout
    as_json = json.loads(cli("where", "--json").stdout)
    assert as_json["workspace"] == str(workspace.resolve())
    assert as_json["models"]["default"] is None and as_json["servers"] == ["clock"]


def test_home_that_is_not_a_workspace_is_an_error_naming_init(tmp_path: Path) -> None:
    done = run(["--home", str(tmp_path / "typo"), "plan", "list"], tmp_path)
    assert done.returncode == 2
    assert (
        done.stderr.splitlines()[0].startswith("error: --home ")
        and "not a graphchat workspace" in done.stderr
    )
    assert "graphchat init" in done.stderr
    assert not (tmp_path / "typo").exists()  # nothing was created by mistake


def test_an_unknown_setting_lists_the_valid_ones(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iteration: 3\n")
    done = cli("where")
    assert done.returncode == 2
    line = done.stderr.splitlines()[0]
    assert "graphchat.yaml:2" in line and "did you mean max_agent_iterations?" in line
    assert "max_tool_result_chars" in line
