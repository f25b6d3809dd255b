"""A plan's servers start together at its start (issue 24, item 6): every server its steps
name and its `requires_servers`, in parallel, not one by one as steps reach them. Each test
server waits at start until all three are starting (a rendezvous): started one after another
they never meet, and the first one's start fails after 15 s."""

from __future__ import annotations

import time
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.servers.support import pids, stdio, write_servers

PLAN = """identifier: three
name: Three
description: one step a server, and one server only required
requires_servers: [c]
steps:
  - id: first
    tool_name: a__slow
    input: {seconds: 1, label: a}
  - id: second
    tool_name: b__stamp
    input: {n: 2}
output: {first: "{{first}}", second: "{{second}}"}
"""


def test_the_servers_of_a_plan_start_together_at_its_start(cli: GraphchatRunner, workspace: Path) -> None:
    marker = workspace / "started"
    meet = workspace / "meet"
    env = {"GRAPHCHAT_TEST_RENDEZVOUS": f"{meet}:3"}
    write_servers(workspace, {name: stdio(marker=marker, env=env) for name in ("a", "b", "c")})
    (workspace / "plans" / "three.yaml").write_text(PLAN)
    assert cli("tools", "list").returncode == 0  # every tool list cached: nothing to wait for
    meet.unlink()
    marker.unlink()
    started = time.monotonic()
    done = cli("plan", "run", "three", "--yes")
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert len(pids(marker)) == 3  # c too, which no step calls
    assert took < 12, took  # they met: no start waited out the rendezvous
