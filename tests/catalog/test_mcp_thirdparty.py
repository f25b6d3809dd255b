"""Third-party MCP servers: mcp-server-time from PyPI (installed with graphchat), the
repository's bundled catalog/servers.yaml, and @modelcontextprotocol/server-everything (npm)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from graphchat.catalog.base import CallContext
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.conftest import REPO, GraphchatRunner
from tests.servers.support import write_servers

YES = CallContext(assume_yes=True)


async def test_mcp_server_time_from_pypi(workspace: Path) -> None:
    write_servers(
        workspace,
        {
            "time": {
                "command": "${GRAPHCHAT_PYTHON}",
                "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
            }
        },
    )
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        assert await catalog.prepare() == {}
        spec = catalog.get("time__convert_time")
        assert spec is not None and spec.family == "read"
        result = await catalog.call(
            "time__convert_time",
            {"source_timezone": "Europe/Paris", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            YES,
        )
    finally:
        await catalog.aclose()
    assert not result.is_error, result.value
    assert result.value["source"]["timezone"] == "Europe/Paris"
    assert result.value["target"]["datetime"].endswith("T20:00:00+09:00")


def test_the_repositorys_bundled_servers_list_real_tools(tmp_path: Path, cli: GraphchatRunner) -> None:
    workspace = tmp_path / "repo-copy"
    (workspace / "catalog").mkdir(parents=True)
    (workspace / "graphchat.yaml").write_text("")
    shutil.copy(REPO / "catalog" / "servers.yaml", workspace / "catalog" / "servers.yaml")
    # the git server is pointed at the workspace itself: make it a repository
    import subprocess

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    listed = cli("tools", "list", "--json", home=workspace)
    assert listed.returncode == 0, listed.stderr
    names = {t["name"]: t["family"] for t in json.loads(listed.stdout)["tools"]}
    assert names["time__get_current_time"] == "read"
    assert names["git__git_status"] == "read"
    assert names["git__git_commit"] == "write"
    assert names["git__git_reset"] == "destructive"
    status = cli("tools", "call", "git__git_status", "--input", f"repo_path={workspace}", home=workspace)
    assert status.returncode == 0, status.stderr
    assert "Repository status" in status.stdout


# Installed by .ci/run (npm registry) so that the test itself never reaches the network.
EVERYTHING = Path(
    os.environ.get("GRAPHCHAT_TEST_EVERYTHING")
    or Path(__file__).resolve().parent.parent.parent
    / ".ci"
    / "node"
    / "node_modules"
    / ".bin"
    / "mcp-server-everything"
)


@pytest.mark.skipif(
    not EVERYTHING.exists() or shutil.which("node") is None,
    reason="@modelcontextprotocol/server-everything is not installed (.ci/run installs it with npm)",
)
async def test_server_everything_from_npm(workspace: Path) -> None:
    write_servers(
        workspace,
        {"everything": {"command": str(EVERYTHING), "args": ["stdio"], "timeout_s": 30}},
    )
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        errors = await catalog.prepare()
        assert errors == {}, errors
        names = {s.name for s in catalog.list()}
        assert "everything__echo" in names
        echo = await catalog.call("everything__echo", {"message": "hello from graphchat"}, YES)
        image = await catalog.call("everything__get-tiny-image", {}, YES)
    finally:
        await catalog.aclose()
    assert not echo.is_error and "hello from graphchat" in json.dumps(echo.value)
    assert not image.is_error
    assert [e["mime_type"] for e in image.value["content"] if e["type"] == "image"] == ["image/png"]
