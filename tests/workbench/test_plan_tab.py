"""The workbench's plan tab and run tab (issue 23): what the selected step's tool returns
(declared schema, else the learned shape, else not known yet), `r` from the plan tree showing
the run tab and its live transcript at once, and the mouse (a click selects a step, a click on a
tab switches to it). The app on textual's pilot over real tools: builtin__reshape and the MCP
test server's `stamp` (a declared output schema) and `slow`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scripted_server import ScriptedModelServer
from tests.workbench.test_debug import _bench_app, _rows, _run_ended, _run_log, _until

KINDS = """\
identifier: kinds
name: Kinds
description: A declared result, a learned one, a slow call.
steps:
  - id: E0
    tool_name: files__stamp
    input: {n: 2}
  - id: E1
    tool_name: builtin__reshape
    input:
      shape: {total: "{{E0.total}}"}
  - id: E2
    tool_name: files__slow
    input: {seconds: 1.5, label: "total {{E1.total}}"}
output:
  said: "{{E2.result}}"
"""


def _step_input(app: object) -> str:
    return str(app.query_one("#step-input").render())  # type: ignore[attr-defined]


def _row_offset(app: object, step: str) -> tuple[int, int]:
    """Where step `step`'s row is in the plan tree (the tree's border is one cell)."""
    rows = _rows(app)
    index = next(i for i, row in enumerate(rows) if f" {step}  " in f" {row.lstrip('├└─ ')}")
    return (6, index + 1)


async def test_the_plan_tab_says_what_a_steps_tool_returns_and_r_shows_the_live_run_at_once(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import TabbedContent

    async with _bench_app(workspace, model_server, monkeypatch, KINDS) as (app, pilot, bench):
        tabs = app.query_one("#tabs", TabbedContent)
        await bench.catalog.prepare()  # the MCP server's tools are known (the command warms up)
        await pilot.press("tab", "down")  # the plan tree: E0
        await pilot.pause()
        assert "E0 → files__stamp" in _step_input(app)
        assert "returns (declared output schema):\n  {total: integer, unit: string}" in _step_input(app)
        await pilot.press("down")
        await pilot.pause()
        assert "E1 → builtin__reshape" in _step_input(app)
        assert "returns: not known yet — run it once" in _step_input(app)

        await pilot.press("r")  # with the focus on the plan tree
        await _until(pilot, lambda: "→ files__slow" in _run_log(app), "the slow call's start")

        assert bench.running and tabs.active == "run"  # the run tab shows while it runs
        assert "✓ E1 builtin__reshape" in _run_log(app) and "outcome" not in _run_log(app)
        await _run_ended(app, pilot)
        assert tabs.active == "run" and "outcome: ok" in _run_log(app)

        # the mouse: a click on the plan tab's tab, then on E1's row
        await pilot.click(tabs.get_tab("plan"))
        await pilot.pause()
        assert tabs.active == "plan"
        await pilot.click("#steps", offset=_row_offset(app, "E0"))
        await pilot.pause()
        assert app.selected == "E0"
        await pilot.click("#steps", offset=_row_offset(app, "E1"))
        await pilot.pause()
        assert app.selected == "E1"
        shown = _step_input(app)  # builtin__reshape ran once: its shape is learned
        assert "returns (learned from earlier calls, may vary):\n  {total: integer}" in shown, shown
        await pilot.click(tabs.get_tab("context"))
        await pilot.pause()
        assert tabs.active == "context"
