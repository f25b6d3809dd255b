"""Workbench runs (issue 23): debug runs (pauses before calls, breakpoints, skip with an injected
result, abort, break on a failing call), live step status, the inputs editor, questions in the
pane, what a run spent. The app on textual's pilot against real tools: builtin__reshape and the
MCP test server's `note` (a write tool that appends a line to a file: what ran is on disk) and
`fail`; the agent against the scripted model server."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

NOTES = """\
identifier: notes
name: Notes
description: Writes two lines around a reshape.
steps:
  - id: E0
    tool_name: files__note
    input: {path: "{{input.file}}", text: first}
  - id: E1
    tool_name: builtin__reshape
    input:
      shape: {seen: "from {{E0.result}}"}
  - id: E2
    tool_name: files__note
    input: {path: "{{input.file}}", text: "after {{E1.seen}}"}
output:
  said: "{{E1.seen}}"
"""

MAPPED = """\
identifier: mapped
name: Mapped
description: Notes each item.
steps:
  - id: E0
    tool_name: builtin__reshape
    input:
      shape: {items: [a, b]}
  - id: E1
    tool_name: map
    input:
      over: "{{E0.items}}"
      concurrency: 1
      do:
        tool_name: files__note
        input: {path: "{{input.file}}", text: "item {{item}}"}
  - id: E2
    tool_name: files__note
    input: {path: "{{input.file}}", text: end}
output:
  count: "{{E1.count}}"
"""

FAILING = """\
identifier: failing
name: Failing
description: A call that fails, then a step reading it.
steps:
  - id: E0
    tool_name: files__fail
    input: {message: the disk is gone}
  - id: E1
    tool_name: builtin__reshape
    input:
      shape: {got: "{{E0.value}}"}
output:
  got: "{{E1.got}}"
"""


def _settings(workspace: Path, server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch) -> Any:
    for key, value in server.env().items():
        monkeypatch.setenv(key, value)
    config = workspace / "graphchat.yaml"
    if config.is_file() and '"models"' in config.read_text():  # the model is the workspace's
        monkeypatch.delenv("GRAPHCHAT_MODEL")
    write_servers(workspace, {"files": stdio()})
    from graphchat.host import load_settings

    return load_settings(str(workspace))


@asynccontextmanager
async def _bench_app(
    workspace: Path, server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, plan: str
) -> AsyncIterator[tuple[Any, Any, Any]]:
    """(app, pilot, bench) with `plan` loaded, the pane as the asker, the MCP server reachable."""
    from graphchat.sources import build_catalog
    from graphchat.workbench.app import WorkbenchApp
    from graphchat.workbench.bench import Bench
    from graphchat.workbench.pane_asker import PaneAsker

    identifier = plan.split("\n", 1)[0].split(": ", 1)[1]
    (workspace / "plans" / f"{identifier}.yaml").write_text(plan)
    settings = _settings(workspace, server, monkeypatch)
    catalog = build_catalog(settings)
    bench = Bench(settings, catalog, asker=PaneAsker())
    bench.draft.load(identifier)
    app = WorkbenchApp(bench)
    try:
        async with app.run_test(size=(170, 50)) as pilot:
            yield app, pilot, bench
    finally:
        await catalog.aclose()


def _rows(app: Any) -> list[str]:
    from textual.widgets import OptionList

    steps = app.query_one("#steps", OptionList)
    return [str(steps.get_option_at_index(i).prompt) for i in range(steps.option_count)]


def _row(app: Any, step: str) -> str:
    rows = _rows(app)
    found = [row for row in rows if re.sub(r"^[^A-Za-z_]*", "", row).split(" ", 1)[0] == step]
    assert found, rows
    return found[0]


def _run_log(app: Any) -> str:
    from textual.widgets import Log

    return "\n".join(app.query_one("#run-log", Log).lines)


def _shown(app: Any, selector: str) -> str:
    """What a widget of the screen on top shows ("" while it is not composed yet)."""
    from textual.css.query import NoMatches

    try:
        return str(app.screen.query_one(selector).render())
    except NoMatches:
        return ""


async def _until(pilot: Any, done: Callable[[], bool], what: str, seconds: float = 30.0) -> None:
    for _ in range(int(seconds / 0.05)):
        if done():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def _paused(app: Any, pilot: Any, text: str) -> str:
    """Wait for the pause dialog showing `text`; what it shows."""
    from graphchat.workbench.screens import PauseScreen

    await _until(
        pilot,
        lambda: isinstance(app.screen, PauseScreen) and text in _shown(app, "#pause-text"),
        f"a pause showing {text!r}",
    )
    return _shown(app, "#pause-text")


async def _approve(app: Any, pilot: Any, tool: str) -> None:
    """The approval question of a write tool called outside a pause, answered `once` in the pane."""
    from textual.widgets import Input

    from graphchat.workbench.screens import QuestionScreen

    await _until(
        pilot,
        lambda: isinstance(app.screen, QuestionScreen) and f"Allow {tool}" in _shown(app, "#question-text"),
        f"the approval of {tool}",
    )
    assert "1) once  2) always  3) refuse" in _shown(app, "#question-text")
    app.screen.query_one("#answer", Input).value = "once"
    await pilot.press("enter")


async def _run_ended(app: Any, pilot: Any) -> None:
    await _until(pilot, lambda: "spent: " in _run_log(app), "the run's end")
    await pilot.pause()


async def _inject(app: Any, pilot: Any, value: str) -> None:
    from textual.widgets import Input

    await pilot.press("k")
    app.screen.query_one("#inject", Input).value = value
    await pilot.press("enter")
    await pilot.pause()


async def test_a_debug_run_pauses_before_the_first_call_and_a_skip_injects_what_the_next_step_reads(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from graphchat.workbench.screens import InputsScreen, PauseScreen, QuestionScreen

    out = tmp_path / "notes.txt"
    plan = NOTES.replace("steps:\n", f"input_schema: {json.dumps(_file_input(out))}\nsteps:\n", 1)
    async with _bench_app(workspace, model_server, monkeypatch, plan) as (app, pilot, bench):
        await pilot.press("tab", "g")  # to the plan, then a debug run
        await _until(pilot, lambda: isinstance(app.screen, InputsScreen), "the inputs editor")
        await pilot.press("ctrl+r")  # the prefilled default is the file
        shown = await _paused(app, pilot, "before files__note in E0")
        assert '"text": "first"' in shown
        assert "⏸ paused" in _row(app, "E0") and "· pending" in _row(app, "E2")
        assert not out.exists()  # nothing ran yet

        await pilot.press("s")  # step: E0 runs (the pause was its approval: no second question)
        await _paused(app, pilot, "before builtin__reshape in E1")
        assert not isinstance(app.screen, QuestionScreen)
        assert out.read_text() == "first\n" and "✓ done" in _row(app, "E0")

        await _inject(app, pilot, "{not json")
        assert isinstance(app.screen, PauseScreen) and "not JSON" in _shown(app, "#dialog-error")
        await _inject(app, pilot, '{"seen": "the injected value"}')
        shown = await _paused(app, pilot, "before files__note in E2")
        assert '"text": "after the injected value"' in shown  # E2 read what was injected for E1
        assert "⤼ skipped" in _row(app, "E1")

        await pilot.press("c")
        await _run_ended(app, pilot)
        assert out.read_text() == "first\nafter the injected value\n"
        log = _run_log(app)
        assert "outcome: ok" in log and "spent: 2 tool calls · 0 model calls" in log, log
        assert "✓ done" in _row(app, "E2") and app.screen is app.screen_stack[0]


def _file_input(out: Path) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"file": {"type": "string", "default": str(out)}},
        "required": ["file"],
    }


async def test_an_abort_stops_the_run_and_nothing_after_it_runs(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    async with _bench_app(workspace, model_server, monkeypatch, NOTES) as (app, pilot, bench):
        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await bench.run({"file": str(out)}, debug=True))

        app.run_worker(run())
        await _paused(app, pilot, "before files__note in E0")
        await pilot.press("s")
        await _paused(app, pilot, "before builtin__reshape in E1")
        await pilot.press("a")
        await _run_ended(app, pilot)
        await pilot.pause(0.5)  # were anything still to run, it would have by now
        assert out.read_text() == "first\n"  # E2's note never ran
        assert result["outcome"] == "aborted" and result["spent"]["tool_calls"] == 1
        assert "■ aborted" in _row(app, "E1") and "· not run" in _row(app, "E2")
        assert "outcome: aborted" in _run_log(app)
        assert not bench.running


async def test_a_breakpoint_on_a_map_step_pauses_its_body_calls_only(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    async with _bench_app(workspace, model_server, monkeypatch, MAPPED) as (app, pilot, bench):
        await pilot.press("tab", "down", "down", "b")  # the map step E1 gets a breakpoint
        assert "● breakpoint" in _row(app, "E1") and "●" not in _row(app, "E0")
        app.run_worker(bench.run({"file": str(out)}, debug=True))
        first = await _paused(app, pilot, "before files__note in E1/do/")
        assert '"text": "item a"' in first and "⏸ paused" in _row(app, "E1")
        assert "✓ done" in _row(app, "E0")  # E0 ran without a pause: no breakpoint there
        await pilot.press("c")  # continue: to the next breakpoint, the map's next item
        second = await _paused(app, pilot, "before files__note in E1/do/")
        assert '"text": "item b"' in second
        await pilot.press("c")
        await _approve(app, pilot, "files__note")  # E2: no breakpoint, no pause, so its approval
        await _run_ended(app, pilot)
        assert out.read_text() == "item a\nitem b\nend\n"
        assert "outcome: ok" in _run_log(app) and "spent: 4 tool calls" in _run_log(app)


async def test_a_failing_call_breaks_inject_a_result_or_let_it_fail(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _bench_app(workspace, model_server, monkeypatch, FAILING) as (app, pilot, bench):
        bench.breakpoints.add("E1")  # not on E0: only its failure pauses there
        app.run_worker(bench.run({}, debug=True))
        shown = await _paused(app, pilot, "files__fail failed in E0")
        assert "the disk is gone" in shown
        await _inject(app, pilot, '{"value": "patched"}')
        await _paused(app, pilot, "before builtin__reshape in E1")  # E1's breakpoint
        await pilot.press("c")
        await _run_ended(app, pilot)
        assert "outcome: ok" in _run_log(app)
        assert "✓ done" in _row(app, "E1")

        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await bench.run({}, debug=True))

        app.run_worker(run())
        await _paused(app, pilot, "files__fail failed in E0")
        await pilot.press("c")  # continue: the call stays failed, the run fails there
        await _run_ended(app, pilot)
        assert result["outcome"] == "failed" and "the disk is gone" in result["error"]
        assert "✗ failed" in _row(app, "E0") and "· not run" in _row(app, "E1")


ASKING = """\
identifier: asking
name: Asking
description: Asks a name, then greets.
input_schema:
  type: object
  properties:
    greeting: {type: string, examples: [hello]}
    times: {type: integer}
  required: [greeting, times]
steps:
  - id: Q
    tool_name: ask
    input:
      prompt: "Who should be greeted?"
      output_schema: {type: object, properties: {name: {type: string}}, required: [name]}
  - id: E1
    tool_name: builtin__reshape
    input:
      shape: {text: "{{input.greeting}} {{Q.answer.name}}"}
output:
  text: "{{E1.text}}"
"""


async def test_required_inputs_open_a_prefilled_editor_and_ask_steps_are_answered_in_the_pane(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from textual.widgets import Input, TextArea

    from graphchat.workbench.screens import InputsScreen, QuestionScreen

    async with _bench_app(workspace, model_server, monkeypatch, ASKING) as (app, pilot, bench):
        await pilot.press("tab", "r")
        await _until(pilot, lambda: isinstance(app.screen, InputsScreen), "the inputs editor")
        editor = app.screen.query_one("#inputs-editor", TextArea)
        assert json.loads(editor.text) == {"greeting": "hello", "times": 0}  # example, placeholder
        editor.text = '{"greeting": "hi",'
        await pilot.press("ctrl+r")
        assert "not JSON" in _shown(app, "#dialog-error") and isinstance(app.screen, InputsScreen)
        editor.text = '{"greeting": "hi", "times": "twice"}'
        await pilot.press("ctrl+r")
        assert "'twice' is not of type 'integer'" in _shown(app, "#dialog-error")
        editor.text = '{"greeting": "hi", "times": 2}'
        await pilot.press("ctrl+r")

        await _until(pilot, lambda: isinstance(app.screen, QuestionScreen), "the ask step's question")
        assert "Who should be greeted?" in _shown(app, "#question-text")
        box = app.screen.query_one("#answer", Input)
        box.value = "Ada"  # not a JSON object
        await pilot.press("enter")
        assert "JSON" in _shown(app, "#dialog-error") and isinstance(app.screen, QuestionScreen)
        box.value = '{"name": "Ada"}'
        await pilot.press("enter")
        await _run_ended(app, pilot)
        log = _run_log(app)
        assert "outcome: ok" in log and "✓ done" in _row(app, "Q") and "✓ done" in _row(app, "E1")
        assert "spent: 1 tool call · 0 model calls" in log, log


async def test_the_agent_can_start_a_debug_run_and_the_person_answers_its_pauses(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from textual.widgets import Input

    out = tmp_path / "notes.txt"
    model_server.push(
        {
            "tool_calls": [
                {"name": "workbench__run_plan", "arguments": {"inputs": {"file": str(out)}, "debug": True}}
            ]
        },
        {"text": "The debug run is done."},
    )
    async with _bench_app(workspace, model_server, monkeypatch, NOTES) as (app, pilot, bench):
        app.query_one("#prompt", Input).value = "debug-run it"
        await pilot.press("enter")
        await _until(pilot, lambda: bool(bench.run_lines), f"the run's start {bench.chat_lines}", 60)
        await _paused(app, pilot, "before files__note in E0")
        assert len(model_server.requests) == 1  # the agent waits: the pause is not its to answer
        await pilot.press("c")
        await _approve(app, pilot, "files__note")  # E2 after a continue: asked as any write call
        await _until(
            pilot,
            lambda: "model> The debug run is done." in bench.chat_lines,
            f"the agent's answer {bench.chat_lines}",
        )
        told = json.loads(
            next(m for m in model_server.requests[-1]["messages"] if m.get("role") == "tool")["content"]
        )
        assert told["outcome"] == "ok" and told["spent"]["tool_calls"] == 3
        assert out.read_text() == "first\nafter from noted\n"


JUDGED = """\
identifier: judged
name: Judged
description: A decide whose gate a model judges.
steps:
  - id: E0
    tool_name: builtin__reshape
    input:
      shape: {ticket: "the server is down"}
  - id: E1
    tool_name: decide
    input:
      infer: "Is this urgent: {{E0.ticket}}?"
      then: {tool_name: builtin__reshape, input: {shape: {level: high}}}
      else: {tool_name: builtin__reshape, input: {shape: {level: low}}}
output:
  level: "{{E1.result.level}}"
"""


async def test_a_breakpoint_on_a_decide_pauses_its_model_call_and_the_run_ends_with_tokens_and_cost(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_server.push(
        {
            "json": {"verdict": True, "reason": "an outage"},
            "usage": {"prompt_tokens": 1000, "completion_tokens": 50},
        }
    )
    model = {"model": "openai/scripted", "input_cost_per_token": 0.000001, "output_cost_per_token": 0.000002}
    (workspace / "graphchat.yaml").write_text(json.dumps({"models": {"default": model}}))  # a known price
    async with _bench_app(workspace, model_server, monkeypatch, JUDGED) as (app, pilot, bench):
        bench.breakpoints.add("E1")
        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await bench.run({}, debug=True))

        app.run_worker(run())
        await _paused(app, pilot, "before a model call (judge) in E1")
        assert not model_server.requests  # the judge has not been asked yet
        assert "s step · c continue · k skip with an answer · a abort" in _shown(app, "#pause-keys")
        await pilot.press("s")
        await _paused(app, pilot, "before builtin__reshape in E1/then/")  # the branch's call, same breakpoint
        await pilot.press("c")
        await _run_ended(app, pilot)
        assert len(model_server.requests) == 1 and result["output"] == {"level": "high"}
        log = _run_log(app)
        assert "spent: 2 tool calls · 1 model call · 1,000 in / 50 out tokens · $0.0011" in log, log
        assert result["spent"]["input_tokens"] == 1000 and result["spent"]["cost_usd"] == pytest.approx(
            0.0011
        )


async def test_a_model_call_skipped_at_a_pause_is_not_made_and_its_injected_answer_decides(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from graphchat.workbench.screens import PauseScreen

    async with _bench_app(workspace, model_server, monkeypatch, JUDGED) as (app, pilot, bench):
        bench.breakpoints.add("E1")
        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await bench.run({}, debug=True))

        app.run_worker(run())
        shown = await _paused(app, pilot, "before a model call (judge) in E1")
        assert "Is this urgent: the server is down?" in shown  # what the model would be asked
        await _inject(app, pilot, '{"verdict": "no"}')  # not the judge's answer: said, still paused
        assert isinstance(app.screen, PauseScreen) and "does not fit" in _shown(app, "#dialog-error")
        await _inject(app, pilot, '{"verdict": false, "reason": "injected: not urgent"}')
        await _paused(app, pilot, "before builtin__reshape in E1/else/")  # the injected verdict chose
        await pilot.press("c")
        await _run_ended(app, pilot)
        assert model_server.requests == []  # the judge was never asked
        assert result["outcome"] == "ok" and result["output"] == {"level": "low"}, result
        log = _run_log(app)
        assert "⤼ the model call (judge) in E1 skipped: answer injected" in log
        assert "spent: 2 tool calls · 0 model calls" in log and "⤼ skipped" in _row(app, "E1")


AGENT = """\
identifier: agented
name: Agented
description: An agent step.
steps:
  - id: E0
    tool_name: agent
    input:
      prompt: Say hello.
      tools: ['builtin__reshape']
      max_iterations: 2
      output_schema: {type: object, required: [greeting], properties: {greeting: {type: string}}}
output:
  said: "{{E0.output.greeting}}"
"""


async def test_an_agent_steps_model_call_skipped_at_a_pause_answers_with_the_typed_value(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _bench_app(workspace, model_server, monkeypatch, AGENT) as (app, pilot, bench):
        bench.breakpoints.add("E0")
        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await bench.run({}, debug=True))

        app.run_worker(run())
        shown = await _paused(app, pilot, "before a model call")
        assert "Say hello." in shown
        await _inject(app, pilot, '{"greeting": "hello from the pause"}')  # the model's answer
        await _run_ended(app, pilot)
        assert model_server.requests == []
        assert result["outcome"] == "ok" and result["output"] == {"said": "hello from the pause"}, result


@pytest.mark.slow
def test_on_a_terminal_a_debug_run_pauses_steps_aborts_and_quits(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    import time

    import pexpect

    from tests.workbench.test_workbench import GREET, _spawn

    (workspace / "plans" / "greet.yaml").write_text(GREET)
    child = _spawn(workspace, model_server, "greet")
    try:
        child.expect("E1  builtin__reshape")  # the plan is on the screen
        time.sleep(2)  # keys sent while the app still mounts can reach the chat's input instead
        child.send("\t")  # to the plan
        time.sleep(0.5)
        child.send("g")
        child.expect("before builtin__reshape in E0")
        time.sleep(1)  # the screen draws only what changed: long lines may never come whole
        child.send("s")
        child.expect("before builtin__reshape in E1")
        time.sleep(1)  # the pause dialog is up (not only the run tab's line)
        child.send("a")
        child.expect("outcome: aborted")
        child.expect("spent: 1 tool call")
        child.send("q")  # nothing unsaved: no question
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0


async def test_a_pause_is_the_approval_but_deny_rules_win_over_it(
    workspace: Path, model_server: ScriptedModelServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = tmp_path / "notes.txt"
    (workspace / "graphchat.yaml").write_text(json.dumps({"approvals": {"deny": ["files__note"]}}))
    async with _bench_app(workspace, model_server, monkeypatch, NOTES) as (app, pilot, bench):
        result: dict[str, Any] = {}

        async def run() -> None:
            result.update(await bench.run({"file": str(out)}, debug=True))

        app.run_worker(run())
        await _paused(app, pilot, "before files__note in E0")
        await pilot.press("s")  # let it go: the deny rule still refuses it
        await _run_ended(app, pilot)
        assert result["outcome"] == "failed" and "the approvals policy denies it" in result["error"]
        assert not out.exists() and "✗ failed" in _row(app, "E0")
