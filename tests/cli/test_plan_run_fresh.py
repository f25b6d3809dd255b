"""A plan run in a workspace whose servers were never started: the README's first command."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.servers.support import stdio, write_servers

PLAN = """\
identifier: stamps
name: Stamps
description: Stamp two numbers through a server never started before.
requires_servers: [t]
steps:
  - id: S
    tool_name: map
    input:
      over: [1, 2]
      do: {tool_name: t__stamp, input: {n: "{{item}}"}}
output:
  count: "{{S.count}}"
  first: "{{S.results.0}}"
"""


def test_plan_run_starts_a_configured_server_whose_tools_were_never_listed(
    workspace: Path, cli: GraphchatRunner
) -> None:
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "stamps.yaml").write_text(PLAN)
    assert not (workspace / "catalog" / "cache").exists()  # nothing cached: a fresh workspace
    result = cli("plan", "run", "stamps")
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["count"] == 2 and output["first"]


def test_plan_run_of_an_unconfigured_server_fails_before_any_step(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "plans" / "stamps.yaml").write_text(PLAN)
    result = cli("plan", "run", "stamps", env={"GRAPHCHAT_EVENTS": "jsonl"})
    assert result.returncode == 1 and result.stdout == ""
    assert "not configured: t\n" in result.stderr
    assert '"event":"tool_started"' not in result.stderr


def test_a_plan_calling_plans_runs_headless_on_a_fresh_workspace(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """graph (no approvals: pipeline/mod.rs invoke_plan) runs a plan calling plans on a fresh
    workspace; here the plan tools' family must not count an MCP tool whose list was never
    cached as destructive and refuse it headless. The inner tool call is approved on its own."""
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "stamps.yaml").write_text(PLAN)
    (workspace / "plans" / "outer.yaml").write_text(
        "identifier: outer\nname: Outer\ndescription: calls stamps\nsteps:\n"
        "  - {id: E0, tool_name: plan__stamps, input: {}}\n  - {id: E1, tool_name: plan__quiet, input: {}}\n"
        "output: {count: '{{E0.count}}', quiet: '{{E1}}'}\n"
    )
    (workspace / "plans" / "quiet.yaml").write_text(
        "identifier: quiet\nname: Quiet\ndescription: silent\nsteps:\n  - {id: E0, tool_name: t__stamp, input: {n: 1}}\n"
    )
    assert not (workspace / "catalog" / "cache").exists()
    result = cli("plan", "run", "outer")
    assert result.returncode == 0, result.stderr
    # a silent sub-plan called as a tool returns graph's {ok: true, steps_executed}
    assert json.loads(result.stdout) == {"count": 2, "quiet": {"ok": True, "steps_executed": 1}}
