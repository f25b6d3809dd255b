"""The plan workbench (issue 23, first cut): the app on textual's headless pilot, its agent
against the scripted model server through litellm's real HTTP path, and the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env
from tests.scripted_server import ScriptedModelServer

GREET = """\
# a plan the workbench test edits
identifier: greet
name: Greet
description: Greets someone.
input_schema:
  type: object
  properties:
    who: {type: string, default: world}
steps:
  - id: E0
    tool_name: builtin__reshape
    input:
      shape: {greeting: "hello {{input.who}}"}
  - id: E1
    tool_name: builtin__reshape
    input:
      shape: {loud: "{{E0.greeting}}!"}
output:
  text: "{{E1.loud}}"
"""


def _settings(workspace: Path, server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    from graphchat.host import load_settings

    return load_settings(str(workspace))


def _shown(app: Any) -> list[str]:
    """The rows the plan tab's step tree shows."""
    from textual.widgets import OptionList

    steps = app.query_one("#steps", OptionList)
    return [str(steps.get_option_at_index(i).prompt) for i in range(steps.option_count)]


def _tool_messages(server: ScriptedModelServer) -> list[dict[str, Any]]:
    """Every tool result the model was sent, in the last request (the whole conversation)."""
    return [m for m in server.requests[-1]["messages"] if m.get("role") == "tool"]


async def _say(app: Any, pilot: Any, text: str) -> None:
    from textual.widgets import Input

    app.query_one("#prompt", Input).value = text
    await pilot.press("enter")
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_the_agent_adds_a_step_its_delete_is_rejected_it_saves_what_was_shown(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.sources import build_catalog
    from graphchat.workbench.app import WorkbenchApp
    from graphchat.workbench.bench import Bench

    plan_file = workspace / "plans" / "greet.yaml"
    plan_file.write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)
    bench.draft.load("greet")
    model_server.push(
        {
            "tool_calls": [
                {
                    "name": "workbench__add_step",
                    "arguments": {
                        "id": "E2",
                        "tool": "builtin__reshape",
                        "input": {"shape": {"twice": "{{E1.loud}} {{E1.loud}}"}},
                    },
                }
            ]
        },
        {"text": "Added E2, which repeats E1."},
        {"tool_calls": [{"name": "workbench__delete_step", "arguments": {"id": "E1"}}]},
        {"text": "E1 cannot go: E2 and the output read it."},
        {"tool_calls": [{"name": "workbench__save_plan", "arguments": {}}]},
        {"text": "Saved."},
    )
    app = WorkbenchApp(bench)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            assert any("E1" in row for row in _shown(app)) and not any("E2" in row for row in _shown(app))

            await _say(app, pilot, "add a step E2 that says E1 twice")
            shown = _shown(app)
            assert any(row.lstrip("├└─ ").startswith("E2") for row in shown), shown
            assert bench.draft.dirty and "[unsaved]" in app.validation_text()
            assert "E2" not in plan_file.read_text()  # an edit changes the draft, not the file
            # the tools the model was offered: the chat's catalog plus the workbench's
            offered = {t["function"]["name"] for t in model_server.requests[0]["tools"]}
            assert {"workbench__add_step", "workbench__delete_step", "builtin__reshape"} <= offered

            await _say(app, pilot, "now delete E1")
            assert _shown(app) == shown  # rejected: the draft is untouched
            told = json.loads(_tool_messages(model_server)[-1]["content"])
            assert told["ok"] is False
            assert "would introduce new validation problems" in told["error"]
            assert any("E1" in problem for problem in told["problemsIntroduced"]), told

            await _say(app, pilot, "save it")
            assert json.loads(_tool_messages(model_server)[-1]["content"])["savedTo"] == str(plan_file)
            assert not bench.draft.dirty and "[unsaved]" not in app.validation_text()
            assert "model> Saved." in bench.chat_lines

            await pilot.press("tab", "q")  # the keys are the workspace's; saved: quits without asking
            await pilot.pause()
            assert not app.is_running
    finally:
        await catalog.aclose()

    from graphchat.plans.loader import load_plan
    from graphchat.plans.picture import tree

    saved = plan_file.read_text()
    assert saved.startswith("# a plan the workbench test edits")  # the author's comment survives
    assert tree(load_plan(plan_file)) == shown  # the file is what the plan tab showed


async def test_keys_validate_run_undo_and_quit_asks_when_unsaved(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import Log

    from graphchat.plans import authoring
    from graphchat.sources import build_catalog
    from graphchat.workbench.app import ConfirmQuit, WorkbenchApp
    from graphchat.workbench.bench import Bench

    plan_file = workspace / "plans" / "greet.yaml"
    plan_file.write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)
    bench.draft.load(str(plan_file))
    app = WorkbenchApp(bench)
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.press("tab")  # from the chat's input to the plan
            await pilot.press("down")  # the row under the plan's title: E0
            await pilot.pause()
            shown_input = str(app.query_one("#step-input").render())
            assert "E0 → builtin__reshape" in shown_input and "hello {{input.who}}" in shown_input
            await pilot.press("v")
            await pilot.pause()
            assert "✓ valid" in app.validation_text()

            await pilot.press("r")
            await app.workers.wait_for_complete()
            await pilot.pause()
            run_log = "\n".join(app.query_one("#run-log", Log).lines)
            assert "✓ E0 builtin__reshape" in run_log and "outcome: ok" in run_log

            before = bench.draft.text
            bench.draft.edit(lambda data: authoring.update_step(data, "E1", "reasoning", "shout it"))
            await pilot.pause()
            assert "[unsaved]" in app.validation_text() and "○ not validated" in app.validation_text()
            await pilot.press("u")
            await pilot.pause()
            assert bench.draft.text == before and not bench.draft.dirty

            bench.draft.edit(lambda data: authoring.update_step(data, "E1", "reasoning", "shout it"))
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuit) and app.is_running
            await pilot.press("n")
            await pilot.pause()
            assert app.is_running and not isinstance(app.screen, ConfirmQuit)
            await pilot.press("ctrl+q")  # textual's own quit key asks too
            await pilot.pause()
            assert isinstance(app.screen, ConfirmQuit) and app.is_running
            await pilot.press("escape")
            await pilot.pause()
            assert app.is_running and not isinstance(app.screen, ConfirmQuit)
            await pilot.press("q", "y")
            await pilot.pause()
            assert not app.is_running
    finally:
        await catalog.aclose()
    assert plan_file.read_text() == GREET  # quitting unsaved drops the draft, never the file


async def test_load_plan_refuses_to_drop_unsaved_changes_and_workbench_tools_are_never_plan_tools(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.catalog.base import CallContext
    from graphchat.sources import build_catalog
    from graphchat.workbench.bench import Bench

    (workspace / "plans" / "greet.yaml").write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)
    ctx = CallContext()
    try:
        done = await bench.agent_catalog.call("workbench__load_plan", {"plan": "greet"}, ctx)
        assert not done.is_error
        edit = {"id": "E2", "tool": "workbench__save_plan", "input": {}}
        added = await bench.agent_catalog.call("workbench__add_step", edit, ctx)
        assert added.is_error and "draft is unchanged" in added.value["error"]
        assert any("workbench__" in p for p in added.value["problemsIntroduced"]), added.value
        assert catalog.get("workbench__save_plan") is None
        assert all(not t["function"]["name"].startswith("workbench__") for t in catalog.model_tools())

        edit = {"id": "E1", "reasoning": "shout it"}
        assert not (await bench.agent_catalog.call("workbench__update_step", edit, ctx)).is_error
        refused = await bench.agent_catalog.call("workbench__load_plan", {"plan": "greet"}, ctx)
        assert refused.is_error and "unsaved changes" in refused.error_message
        forced = {"plan": "greet", "overwrite_draft": True}
        assert not (await bench.agent_catalog.call("workbench__load_plan", forced, ctx)).is_error
        assert "shout it" not in bench.draft.text and not bench.draft.dirty

        undone = await bench.agent_catalog.call("workbench__restore_draft", {}, ctx)
        assert not undone.is_error and "shout it" in bench.draft.text and bench.draft.dirty  # one level back
    finally:
        await catalog.aclose()


def test_the_command_refuses_without_a_terminal(workspace: Path, model_server: ScriptedModelServer) -> None:
    (workspace / "plans" / "greet.yaml").write_text(GREET)
    for group in ("workbench", "wb"):
        done = subprocess.run(
            [sys.executable, "-m", "graphchat", "--home", str(workspace), group, "plan", "greet"],
            env=clean_env(model_server.env(), workspace.parent),
            input="",
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert "needs a terminal" in done.stderr and "graphchat plan run" in done.stderr
        assert done.stdout == ""


def test_ask_and_help_never_import_textual(workspace: Path, model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "hi"})
    for args in (["--help"], ["workbench", "--help"], ["ask", "hello"]):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "graphchat", "--home", str(workspace), *args],
            env=clean_env(model_server.env(), workspace.parent),
            input="",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        imported = [
            line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "import time:" in line
        ]
        assert "graphchat.cli.main" in imported  # the probe sees graphchat's own imports
        assert not [m for m in imported if m == "textual" or m.startswith("textual.")], args


def test_saving_a_draft_never_writes_over_another_plan(tmp_path: Path) -> None:
    from graphchat.plans import authoring
    from graphchat.workbench.draft import Draft, DraftError

    plans = tmp_path / "plans"
    plans.mkdir()
    (plans / "greet.yaml").write_text(GREET)
    draft = Draft(plans)
    assert not draft.dirty  # a new, empty draft holds nothing to lose
    draft.edit(lambda data: authoring.set_attribute(data, "identifier", ["greet"]))
    with pytest.raises(DraftError, match="already exists and was not loaded here"):
        draft.save()
    draft.edit(lambda data: authoring.set_attribute(data, "identifier", ["hello"]))
    draft.edit(lambda data: authoring.add_step(data, "E0", "builtin__reshape", {"shape": {"a": 1}}))
    assert draft.save() == plans / "hello.yaml" and not draft.dirty

    draft.load("greet")
    draft.edit(lambda data: authoring.set_attribute(data, "identifier", ["greet2"]))
    assert draft.save() == plans / "greet2.yaml"  # a new identity is a new file
    assert (plans / "greet.yaml").read_text() == GREET


def _spawn(workspace: Path, server: ScriptedModelServer, *args: str) -> Any:
    import pexpect

    return pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "wb", "plan", *args],
        env=clean_env({**server.env(), "TERM": "xterm-256color"}, workspace.parent),
        cwd=str(workspace),
        dimensions=(40, 140),
        encoding="utf-8",
        codec_errors="replace",
        timeout=40,
    )


@pytest.mark.slow
def test_on_a_terminal_it_opens_the_plan_validates_and_quits(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    import pexpect

    (workspace / "plans" / "greet.yaml").write_text(GREET)
    child = _spawn(workspace, model_server, "greet")
    try:
        # the plan tab's step tree is on the screen (a start on a loaded machine may be slow)
        child.expect("E1  builtin__reshape", timeout=120)
        child.expect("palette")  # and the footer: the first screen is painted whole, the prompt
        # focused (the app focuses it as the screen is composed, so Tab always goes to the plan)
        child.send("\t")  # to the plan
        child.send("v")
        child.expect("✓ valid")
        child.send("q")  # nothing unsaved: no question
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    unknown = _spawn(workspace, model_server, "no_such_plan")
    unknown.expect(pexpect.EOF, timeout=120)
    unknown.close()
    assert unknown.exitstatus == 2 and "unknown plan 'no_such_plan'" in (unknown.before or "")
    assert (workspace / "plans" / "greet.yaml").read_text() == GREET


async def test_the_iteration_budget_counts_rounds_without_a_successful_edit(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.sources import build_catalog
    from graphchat.workbench.bench import Bench

    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 3\n")
    (workspace / "plans" / "greet.yaml").write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    catalog = build_catalog(settings, include_mcp=False)
    bench = Bench(settings, catalog)
    bench.draft.load("greet")
    look = {"tool_calls": [{"name": "workbench__get_plan", "arguments": {}}]}
    add = {
        "tool_calls": [
            {
                "name": "workbench__add_step",
                "arguments": {
                    "id": "E2",
                    "tool": "builtin__reshape",
                    "input": {"shape": {"a": "{{E1.loud}}"}},
                },
            }
        ]
    }
    rejected = {"tool_calls": [{"name": "workbench__delete_step", "arguments": {"id": "E0"}}]}
    try:
        # six rounds in a turn of budget 3: the edit in the third starts the count again
        model_server.push(look, look, add, look, look, {"text": "E2 added."})
        assert await bench.turn("add E2") == "E2 added."
        assert len(model_server.requests) == 6 and "E2" in bench.draft.text

        # a rejected edit is no progress: the third round in a row without one is the last
        model_server.push(rejected, rejected, rejected)
        assert await bench.turn("delete E0") == ""
        assert len(model_server.requests) == 9
        assert bench.chat_lines[-1].startswith(
            "✗ the agent stopped: 3 rounds in a row without a successful edit"
        )
        assert "E0" in bench.draft.text and "E2" in bench.draft.text  # what it did stays

        model_server.push({"text": "Going on: E0 stays, E1 reads it."})
        assert await bench.turn("continue") == "Going on: E0 stays, E1 reads it."
        sent = model_server.requests[-1]["messages"]  # the stopped turn is still in the conversation
        assert [m["content"] for m in sent if m["role"] == "user"] == ["add E2", "delete E0", "continue"]
        assert sum(1 for m in sent if m.get("role") == "tool" and "would introduce" in m["content"]) == 3
    finally:
        await catalog.aclose()


async def test_prompts_workbench_replaces_the_agents_system_prompt(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.sources import build_catalog
    from graphchat.workbench.bench import SYSTEM_PROMPT, Bench

    (workspace / "graphchat.yaml").write_text("prompts:\n  workbench: You edit plans tersely.\n")
    (workspace / "plans" / "greet.yaml").write_text(GREET)
    settings = _settings(workspace, model_server, monkeypatch)
    bench = Bench(settings, build_catalog(settings, include_mcp=False))
    bench.draft.load("greet")
    model_server.push({"text": "Fine."})
    assert await bench.turn("hello") == "Fine."
    system = model_server.requests[-1]["messages"][0]["content"]
    assert system.startswith("You edit plans tersely.\n") and "name: Greet" in system
    assert SYSTEM_PROMPT not in system
