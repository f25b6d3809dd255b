"""`workbench__draft_plan` (issue 23): the agent has the planner (`plan draft`'s drafter, the
`planner` model role) draft the whole plan; it replaces the draft under the draft's protection,
is validated and shown at once, and one undo gives the old draft back. The app on textual's
pilot, the agent and the planner against the scripted model server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_server import ScriptedModelServer
from tests.workbench.test_workbench import GREET, _say, _settings, _shown, _tool_messages

SHOUT = {
    "identifier": "shout",
    "name": "Shout",
    "description": "Shouts a greeting.",
    "input_schema": {"type": "object", "properties": {"who": {"type": "string", "default": "world"}}},
    "steps": [
        {"id": "E0", "tool_name": "builtin__reshape", "input": {"shape": {"greeting": "hi {{input.who}}"}}},
        {"id": "E1", "tool_name": "builtin__reshape", "input": {"shape": {"loud": "{{E0.greeting}}!"}}},
    ],
    "output": {"text": "{{E1.loud}}"},
}


def _draft_call(**arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": "workbench__draft_plan", "arguments": arguments}]}


def _planner_requests(server: ScriptedModelServer) -> list[dict[str, Any]]:
    return [
        r
        for r in server.requests
        if r["messages"][0]["role"] == "system" and "You are the planner" in r["messages"][0]["content"]
    ]


async def test_the_agent_drafts_a_plan_it_is_validated_shown_at_once_and_undone_with_u(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.sources import build_catalog
    from graphchat.workbench.app import WorkbenchApp
    from graphchat.workbench.bench import Bench

    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)  # a new, empty draft
    model_server.push(
        _draft_call(goal="a plan that greets someone loudly"),
        {"json": SHOUT},  # the planner's draft
        {"text": "Drafted `shout`: two steps."},
    )
    app = WorkbenchApp(bench)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            assert not any("E0" in row for row in _shown(app))
            await _say(app, pilot, "draft a plan that greets someone loudly")
            shown = _shown(app)
            assert shown[0].startswith("plan__shout") and any("E1  builtin__reshape" in r for r in shown), (
                shown
            )
            assert "✓ valid" in app.validation_text() and "[unsaved]" in app.validation_text()
            told = json.loads(_tool_messages(model_server)[-1]["content"])
            assert told["ok"] is True and told["identifier"] == "shout" and told["steps"] == 2
            assert told["validation"] == "ok"
            planner = _planner_requests(model_server)
            assert len(planner) == 1 and "a plan that greets someone loudly" in json.dumps(planner[0])
            # the planner sees the plan catalog, never the workbench's tools
            assert "builtin__reshape" in json.dumps(planner[0]) and "workbench__" not in json.dumps(
                planner[0]
            )

            await pilot.press("tab", "u")  # undo, from the plan: the empty draft again
            await pilot.pause()
            assert not any("E0" in row for row in _shown(app)) and not bench.draft.dirty
            await pilot.press("u")  # again: redo
            await pilot.pause()
            assert _shown(app) == shown
    finally:
        await catalog.aclose()
    assert list((workspace / "plans").iterdir()) == []  # nothing saved


async def test_drafting_over_unsaved_changes_is_refused_until_the_person_agrees(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.catalog.base import CallContext
    from graphchat.sources import build_catalog
    from graphchat.workbench.bench import Bench

    plan_file = workspace / "plans" / "greet.yaml"
    plan_file.write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)
    bench.draft.load("greet")
    ctx = CallContext()
    call = bench.agent_catalog.call
    try:
        edit = {"id": "E1", "reasoning": "shout it"}
        assert not (await call("workbench__update_step", edit, ctx)).is_error
        edited = bench.draft.text
        refused = await call("workbench__draft_plan", {"goal": "greet twice"}, ctx)
        assert refused.is_error and "unsaved changes" in refused.error_message
        assert "overwrite_draft: true" in refused.error_message
        assert model_server.requests == [] and bench.draft.text == edited  # no planner call was spent

        # agreed: not fresh, the draft keeps its identity (and its file); the planner saw it
        model_server.push({"json": SHOUT})
        done = await call("workbench__draft_plan", {"goal": "greet twice", "overwrite_draft": True}, ctx)
        assert not done.is_error, done.value
        assert done.value["identifier"] == "greet" and bench.draft.path == plan_file
        assert bench.draft.data["name"] == "Greet" and "hi {{input.who}}" in bench.draft.text
        assert bench.draft.text.startswith("# Drafted in the workbench for: greet twice")
        assert "shout it" in json.dumps(model_server.requests[-1])  # the current draft, as context
        assert plan_file.read_text() == GREET  # drafting changes the draft, not the file

        undone = await call("workbench__restore_draft", {}, ctx)  # one level: the edited draft
        assert not undone.is_error and bench.draft.text == edited

        # fresh, over a saved draft: a new plan, with a new file
        await call("workbench__load_plan", {"plan": "greet", "overwrite_draft": True}, ctx)
        model_server.push({"json": SHOUT})
        fresh = await call("workbench__draft_plan", {"goal": "a shouting plan", "fresh": True}, ctx)
        assert not fresh.is_error and fresh.value["identifier"] == "shout"
        assert bench.draft.path is None and bench.draft.dirty
        assert (await call("workbench__save_plan", {}, ctx)).value["savedTo"] == str(
            workspace / "plans" / "shout.yaml"
        )
        assert plan_file.read_text() == GREET
    finally:
        await catalog.aclose()


async def test_a_draft_that_never_validates_leaves_its_valid_first_steps_and_says_so(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.catalog.base import CallContext
    from graphchat.sources import build_catalog
    from graphchat.workbench.bench import Bench

    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)
    broken = json.loads(json.dumps(SHOUT))
    broken["steps"][1]["tool_name"] = "no_such__tool"
    broken.pop("output")
    model_server.push({"json": broken}, {"json": broken}, {"json": broken})
    try:
        result = await bench.agent_catalog.call("workbench__draft_plan", {"goal": "shout"}, CallContext())
        assert result.is_error and "valid first 1 of 2 steps are now the draft" in result.error_message
        assert any("no_such__tool" in p for p in result.value["problems"]), result.value
        assert "editing tools" in result.value["note"]
        assert len(_planner_requests(model_server)) == 3
        plan = bench.draft.plan()
        assert plan is not None and [s.label for s in plan.steps] == ["E0"] and bench.draft.dirty
    finally:
        await catalog.aclose()


@pytest.mark.slow
def test_on_a_terminal_the_agent_drafts_a_plan_and_the_tree_shows_it(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    import pexpect

    from tests.workbench.test_workbench import _spawn

    model_server.push(
        _draft_call(goal="a plan that greets someone loudly", fresh=True),
        {"json": SHOUT},
        {"text": "Drafted shout."},
    )
    child = _spawn(workspace, model_server)  # a new, empty draft
    try:
        child.expect("palette", timeout=120)  # the first screen, painted whole
        child.send("draft a plan that greets someone loudly\r")
        child.expect("plan__shout", timeout=120)  # the drafted plan's tree (litellm loads first)
        child.expect("E1  builtin__reshape")
        child.expect("Drafted shout.")
        child.sendcontrol("q")  # quit (wherever the focus is): the draft is unsaved, so it asks
        child.expect("unsaved changes")
        child.send("y")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert len(_planner_requests(model_server)) == 1
    assert list((workspace / "plans").iterdir()) == []  # never saved
