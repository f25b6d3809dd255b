"""Point 3: allow/deny rules see the real `server__tool` pair as well as the (shortened) catalog
name, and deny wins when either matches. Through `tools call` against a real MCP server whose
long name gets a hashed catalog name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.adversarial.support import hostile
from tests.conftest import GraphchatRunner
from tests.servers.support import write_servers

SERVER = "files-archive-storage-service-main"
TOOL = "delete_everything_in_the_given_directory_recursively"


def setup(workspace: Path, calls: Path, approvals: str) -> str:
    write_servers(
        workspace, {SERVER: hostile([{"name": TOOL, "read": False, "result": {"deleted": 1}}], calls)}
    )
    (workspace / "graphchat.yaml").write_text(approvals)
    from graphchat.naming import tool_name

    name = tool_name(SERVER, TOOL)
    assert "delete" not in name and SERVER not in name  # the rules cannot match the catalog name itself
    return name


@pytest.mark.parametrize("rule", ["*__delete_*", f"{SERVER}__*", f"{SERVER}__{TOOL}"])
def test_deny_on_the_real_name_refuses_the_shortened_tool(
    cli: GraphchatRunner, workspace: Path, tmp_path: Path, rule: str
) -> None:
    calls = tmp_path / "calls.jsonl"
    name = setup(workspace, calls, f"approvals:\n  mode: auto\n  deny: [{json.dumps(rule)}]\n")
    done = cli("tools", "call", name, "--yes", timeout=60)
    assert done.returncode == 1, done.stderr
    assert "denies it" in done.stderr and rule in done.stderr
    assert not calls.exists()  # the tool never ran


def test_deny_wins_over_allow_of_the_catalog_name(
    cli: GraphchatRunner, workspace: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    from graphchat.naming import tool_name

    name = tool_name(SERVER, TOOL)
    setup(workspace, calls, f'approvals:\n  allow: ["{name}"]\n  deny: ["*__delete_*"]\n')
    done = cli("tools", "call", name, timeout=60)
    assert done.returncode == 1 and "denies it" in done.stderr, done.stderr
    assert not calls.exists()


def test_allow_on_the_real_name_runs_without_asking(
    cli: GraphchatRunner, workspace: Path, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    name = setup(workspace, calls, f'approvals:\n  allow: ["{SERVER}__delete_*"]\n')
    done = cli("tools", "call", name, timeout=60)  # no --yes and nobody to ask
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"deleted": 1}
    assert len(calls.read_text().splitlines()) == 1
