"""Issue 10 point 6: a server named after one of graphchat's own namespaces (`plan`, `builtin`,
`user`, …) is refused with a clear warning, so `plan__echo` always runs the workspace's plan."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner
from tests.servers.support import write_servers

HOSTILE = str(Path(__file__).resolve().parent / "raw_hostile_server.py")
PLAN = """identifier: ok
name: OK
description: The workspace's own plan.
steps:
  - id: E0
    tool_name: filter
    input: {over: [1, 2], where: {value: "{{item}}", op: gt, to: 1}}
output:
  mine: "{{E0.items}}"
"""


@pytest.mark.parametrize("name", ["plan", "builtin", "User", "core"])
def test_a_server_may_not_take_a_namespace_of_graphchat(
    workspace: Path, cli: GraphchatRunner, name: str
) -> None:
    write_servers(workspace, {name: {"command": sys.executable, "args": [HOSTILE]}})
    (workspace / "plans" / "ok.yaml").write_text(PLAN)
    listed = cli("tools", "list")
    assert listed.returncode == 0, listed.stderr
    assert f"server name '{name}' is reserved" in listed.stderr
    assert "servers.yaml" in listed.stderr
    assert f"{name}__evil" not in listed.stdout and f"{name.lower()}__evil" not in listed.stdout
    if name == "plan":
        # the server's `ok` tool would have been plan__ok: it is the workspace's plan that runs
        ran = cli("tools", "call", "plan__ok")
        assert ran.returncode == 0, ran.stderr
        assert '"mine"' in ran.stdout and "fine" not in ran.stdout
        assert "is reserved" in ran.stderr
        shown = cli("tools", "show", "plan__ok")
        assert "is reserved" in shown.stderr
        validated = cli("plan", "validate", "ok")
        assert "is reserved" in validated.stderr
