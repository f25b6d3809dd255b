"""The reference product's plan format (tests/plans_reference/, after graph v0.12's docs) runs
unchanged against the real `time` MCP server (mcp-server-time), with the documented results."""

from __future__ import annotations

import shutil
import sys
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from graphchat.asks import ScriptedAsker, UnavailableAsker
from graphchat.catalog.base import CallContext
from graphchat.cli.front import exit_code
from graphchat.plans.discovery import discover
from graphchat.plans.executor import PlanOutcome, llm_factory_for, run_plan
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.scripted_server import ScriptedModelServer

REFERENCE = Path(__file__).resolve().parent.parent / "plans_reference"


@pytest.fixture
def ref_workspace(workspace: Path) -> Path:
    for path in REFERENCE.glob("*.yaml"):
        shutil.copy(path, workspace / "plans" / path.name)
    (workspace / "catalog" / "servers.yaml").write_text(
        "mcpServers:\n  time:\n"
        f"    command: {sys.executable}\n"
        "    args: [-m, mcp_server_time, --local-timezone, UTC]\n"
    )
    return workspace


class Runner:
    def __init__(self, workspace: Path) -> None:
        self.settings = load_settings(workspace)
        self.catalog = build_catalog(self.settings, record_shapes=False)
        self.plans = discover(self.settings.plans_dir)

    async def __call__(self, name: str, inputs: Any, asker: Any = None) -> PlanOutcome:
        return await run_plan(
            self.plans.get(name),
            inputs,
            catalog=self.catalog,
            ctx=CallContext(asker=asker or UnavailableAsker()),
            llm_factory=llm_factory_for(self.settings),
            settings=self.settings,
        )


def on_dst(zone: str) -> bool:
    return bool(datetime.now(ZoneInfo(zone)).dst())


async def test_reference_plans_without_a_model(ref_workspace: Path) -> None:
    run = Runner(ref_workspace)
    try:
        # world_clock: concurrent map, results in input order, output finish
        out = await run("world_clock", {"zones": ["Asia/Tokyo", "Europe/Paris", "UTC"]})
        assert out.kind == "ok", out.error
        assert out.output["count"] == 3
        assert [t["timezone"] for t in out.output["times"]] == ["Asia/Tokyo", "Europe/Paris", "UTC"]
        assert set(out.output["times"][0]) >= {"timezone", "datetime", "is_dst"}
        assert out.steps_executed == 4

        # zone_filter: filter before iterating; both halves reach the output
        zones = ["Europe/Paris", "America/New_York", "Asia/Tokyo", "America/Chicago"]
        out = await run("zone_filter", {"zones": zones})
        assert out.output["kept"] == 2
        assert out.output["dropped"] == ["Europe/Paris", "Asia/Tokyo"]
        assert [t["timezone"] for t in out.output["times"]] == ["America/New_York", "America/Chicago"]

        # zone_branch: UTC never observes DST, so the `else` step list runs with its own dataflow
        out = await run("zone_branch", {"timezone": "UTC"})
        assert out.kind == "ok", out.error
        assert out.output["branch"] == "else" and out.output["verdict"] is False
        assert out.output["result"]["source"]["timezone"] == "UTC"
        assert out.output["again"] == "UTC"
        assert out.steps_executed == 5  # E0, decide + two branch steps, E2
        summer = next(
            z
            for z in ("Australia/Sydney", "Europe/London", "America/Santiago", "America/New_York")
            if on_dst(z)
        )
        out = await run("zone_branch", {"timezone": summer})
        assert out.output["branch"] == "then" and out.output["verdict"] is True
        assert out.output["result"]["target"]["timezone"] == "UTC"

        # dst_gate: a success exit with an output map, or the unconditional error exit
        out = await run("dst_gate", {"timezone": summer})
        assert out.kind == "exit" and exit_code(out) == 0
        assert out.output == {"timezone": summer, "is_dst": True}
        assert out.exit == {
            "status": "success",
            "message": f"{summer} is on daylight saving time.",
            "step": "E1",
            "output": {"timezone": summer, "is_dst": True},
        }
        out = await run("dst_gate", {"timezone": "UTC"})
        assert exit_code(out) == 4 and out.exit is not None
        assert out.exit["message"] == "UTC is on standard time." and out.exit["step"] == "E2"

        # release_channel: nobody can answer → templated default, then the `answered` gate exits
        out = await run("release_channel", {})
        assert out.kind == "exit" and exit_code(out) == 0
        assert out.output == {"channel": "beta", "released": False}
        out = await run("release_channel", {}, ScriptedAsker({"E0": {"channel": "nightly", "confirm": True}}))
        assert out.kind == "ok" and out.output == {"channel": "nightly", "released": True}
    finally:
        await run.catalog.aclose()


async def test_reference_plans_with_a_model(
    ref_workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in model_server.env().items():
        monkeypatch.setenv(key, value)
    run = Runner(ref_workspace)
    try:
        # clock_report: a sub-plan as one step, then the solver
        model_server.push({"text": "Tokyo is ahead."})
        out = await run("clock_report", {"zones": ["Asia/Tokyo", "UTC"]})
        assert out.kind == "ok", out.error
        assert out.answer == "Tokyo is ahead."
        sent = model_server.requests[-1]["messages"][-1]["content"]
        assert 'Start with the zone "Asia/Tokyo".' in sent and '"timezone": "UTC"' in sent
        assert out.steps_executed == 2  # the sub-plan step + the exit; the sub-plan's own steps are its own
        out = await run("clock_report", {"zones": []})
        assert out.kind == "exit" and out.exit is not None and out.exit["message"] == "No timezones given."

        # time_agent (camelCase spellings): the agent calls a time tool, then answers the schema
        model_server.push(
            {"tool_calls": [{"name": "time__get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}]},
            {"text": '{"hours": 9}'},
        )
        out = await run("time_agent", {"a": "Asia/Tokyo", "b": "UTC"})
        assert out.kind == "ok", out.error
        assert out.output == {"hours": 9, "rounds": 2}
        tool_reply = [m for m in model_server.requests[-1]["messages"] if m["role"] == "tool"][0]
        assert "Asia/Tokyo" in tool_reply["content"]
    finally:
        await run.catalog.aclose()
