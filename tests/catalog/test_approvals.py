"""Approvals: families from annotations, the workspace policy, the one asker, "always" persisted."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from graphchat.asks import Answer, Asker, Question, UnavailableAsker
from graphchat.catalog.approvals import add_allow_entry, family_from_annotations, make_approver
from graphchat.catalog.base import CallContext, Catalog, ToolResult, ToolSource, ToolSpec
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.servers.support import stdio, write_servers


@pytest.mark.parametrize(
    ("annotations", "override", "family"),
    [
        (None, None, "destructive"),  # the server says nothing
        ({}, None, "destructive"),
        ({"read_only_hint": True}, None, "read"),
        ({"readOnlyHint": True, "destructiveHint": True}, None, "read"),
        ({"destructive_hint": True}, None, "destructive"),
        ({"read_only_hint": False, "destructive_hint": False}, None, "write"),
        ({"idempotent_hint": True}, None, "destructive"),  # silent on destructiveness
        ({"read_only_hint": True}, "write", "write"),  # tool_overrides win
    ],
)
def test_family_from_annotations(annotations: Any, override: str | None, family: str) -> None:
    assert family_from_annotations(annotations, override) == family


class ScriptAsker(Asker):
    def __init__(self, *answers: Answer) -> None:
        super().__init__()
        self.answers = list(answers)
        self.questions: list[Question] = []

    async def _ask(self, question: Question) -> Answer:
        self.questions.append(question)
        await asyncio.sleep(0)
        return self.answers.pop(0) if self.answers else Answer.declined()


class Recorder(ToolSource):
    """A source with one tool of each family that records what actually ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def specs(self) -> list[ToolSpec]:
        schema = {"type": "object"}
        return [
            ToolSpec("fs__read", "", schema, "mcp:fs", family="read"),
            ToolSpec("fs__write", "", schema, "mcp:fs", family="write"),
            ToolSpec("fs__delete_all", "", schema, "mcp:fs", family="destructive"),
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        self.ran.append(spec.name)
        return ToolResult({"ok": True})

    async def aclose(self) -> None:
        pass


def setup(workspace: Path, config: str) -> tuple[Catalog, Recorder]:
    (workspace / "graphchat.yaml").write_text(config)
    recorder = Recorder()
    return Catalog([recorder], approver=make_approver(load_settings(workspace))), recorder


async def test_read_tools_run_and_others_are_refused_when_nobody_can_answer(workspace: Path) -> None:
    catalog, ran = setup(workspace, "approvals: {mode: ask}\n")
    ctx = CallContext(asker=UnavailableAsker())
    read = await catalog.call("fs__read", {}, ctx)
    write = await catalog.call("fs__write", {}, ctx)
    nobody = await catalog.call("fs__delete_all", {}, CallContext())  # no asker at all
    assert not read.is_error
    assert write.is_error and "was not run" in write.error_message and "--yes" in write.error_message
    assert nobody.is_error
    assert ran.ran == ["fs__read"]


async def test_yes_and_auto_mode_approve_and_deny_globs_always_win(workspace: Path) -> None:
    catalog, ran = setup(workspace, "approvals:\n  mode: ask\n  deny: ['*__delete_*']\n")
    assert not (await catalog.call("fs__write", {}, CallContext(assume_yes=True))).is_error
    denied = await catalog.call("fs__delete_all", {}, CallContext(assume_yes=True))
    assert denied.is_error and "denies it" in denied.error_message
    asker = ScriptAsker(Answer(True, "once"))  # would approve, if it were asked
    denied = await catalog.call("fs__delete_all", {}, CallContext(asker=asker))
    assert denied.is_error and "denies it" in denied.error_message and asker.questions == []
    catalog, ran2 = setup(workspace, "approvals: {mode: auto}\n")
    assert not (await catalog.call("fs__delete_all", {}, CallContext())).is_error
    assert ran.ran == ["fs__write"] and ran2.ran == ["fs__delete_all"]


async def test_deny_mode_refuses_every_non_read_tool_and_allow_globs_give_consent(workspace: Path) -> None:
    catalog, ran = setup(workspace, "approvals:\n  mode: deny\n  allow: ['fs__wr*']\n")
    asker = ScriptAsker(Answer(True, "once"))
    ctx = CallContext(asker=asker)
    assert not (await catalog.call("fs__write", {}, ctx)).is_error  # standing consent
    refused = await catalog.call("fs__delete_all", {}, ctx)
    assert refused.is_error and "mode is deny" in refused.error_message
    assert asker.questions == [] and ran.ran == ["fs__write"]


async def test_once_always_refuse_through_the_one_asker(workspace: Path) -> None:
    original = "# my settings\nsettings:\n  max_agent_iterations: 7   # keep me\napprovals:\n  mode: ask\n"
    catalog, ran = setup(workspace, original)
    asker = ScriptAsker(Answer(True, "refuse"), Answer(True, "once"), Answer(True, "always"))
    ctx = CallContext(asker=asker)
    refused = await catalog.call("fs__write", {"path": "a"}, ctx)
    assert refused.is_error and "refused" in refused.error_message
    assert not (await catalog.call("fs__write", {}, ctx)).is_error  # once
    assert not (await catalog.call("fs__write", {}, ctx)).is_error  # always
    assert not (await catalog.call("fs__write", {}, ctx)).is_error  # remembered: no question
    assert len(asker.questions) == 3
    question = asker.questions[0]
    assert question.kind == "approval" and question.options == ["once", "always", "refuse"]
    assert "fs__write" in question.prompt
    assert question.detail is not None and '"path": "a"' in question.detail  # the arguments, in full
    text = (workspace / "graphchat.yaml").read_text()
    assert "# my settings" in text and "max_agent_iterations: 7   # keep me" in text  # kept as written
    assert yaml.safe_load(text)["approvals"] == {"mode": "ask", "allow": ["fs__write"]}
    # a new run reads it back: no question at all
    catalog2, _ = setup(workspace, text)
    asker2 = ScriptAsker()
    assert not (await catalog2.call("fs__write", {}, CallContext(asker=asker2))).is_error
    assert asker2.questions == []
    assert ran.ran == ["fs__write"] * 3


async def test_always_on_the_first_of_parallel_calls_answers_the_others(workspace: Path) -> None:
    catalog, ran = setup(workspace, "approvals: {mode: ask}\n")
    asker = ScriptAsker(Answer(True, "always"))
    ctx = CallContext(asker=asker)
    results = await asyncio.gather(*(catalog.call("fs__delete_all", {"i": i}, ctx) for i in range(8)))
    assert not any(r.is_error for r in results)
    assert len(asker.questions) == 1 and len(ran.ran) == 8


async def test_declined_or_unanswered_questions_refuse(workspace: Path) -> None:
    catalog, ran = setup(workspace, "")
    asker = ScriptAsker(Answer.declined(), Answer.unavailable())
    ctx = CallContext(asker=asker)
    assert "declined" in (await catalog.call("fs__write", {}, ctx)).error_message
    assert "nobody could answer" in (await catalog.call("fs__write", {}, ctx)).error_message
    assert ran.ran == []


def inserted_only(before: str, after: str) -> bool:
    """`after` is `before` with one piece of text inserted somewhere, nothing else changed."""
    head = 0
    while head < len(before) and before[head] == after[head]:
        head += 1
    return after[head + len(after) - len(before) :] == before[head:]


@pytest.mark.parametrize(
    "text",
    [
        "",
        "# only a comment\n",
        "models: {default: openai/x}\n",
        "approvals:\n  mode: ask\n",
        "approvals:\n  allow: [a, 'b*']\n  mode: ask\n",
        "approvals:\n  allow:\n    - a  # why\n    - b\n  deny: []\n# tail\n",
        "approvals:\n  allow:\n  mode: ask\n",
        "approvals:\n",
        "approvals: {mode: auto}\n",
        "# why\napprovals: {mode: ask, allow: [a, b]}  # tail\n",
        "approvals: {mode: ask}  # why\n",
        "approvals: {}\n",
        "approvals: {mode: ask, allow: []}\n",
        "approvals:\n  allow: [a,  # why\n    'b*',\n  ]  # tail\n  mode: ask\n",
        "approvals: {mode: ask,\n  # why\n  allow: [x]  # tail\n}\n",
        "{models: {default: openai/x}, approvals: {mode: ask}}  # tail\n",
        "{models: {default: openai/x}}  # why\n",
    ],
)
def test_always_edits_graphchat_yaml_in_place(text: str) -> None:
    before = yaml.safe_load(text) or {}
    after_text = add_allow_entry(text, "srv__tool")
    after = yaml.safe_load(after_text)
    old_allow = list((before.get("approvals") or {}).get("allow") or [])
    assert after["approvals"]["allow"] == [*old_allow, "srv__tool"]
    assert {k: v for k, v in after.items() if k != "approvals"} == {
        k: v for k, v in before.items() if k != "approvals"
    }
    for comment in ("# only a comment", "# why", "# tail"):
        if comment in text:
            assert comment in after_text
    assert inserted_only(text, after_text), after_text  # the rest of the file byte for byte
    assert add_allow_entry(after_text, "srv__tool") == after_text  # idempotent


async def test_a_destructive_mcp_tool_is_refused_headless_and_runs_with_yes(workspace: Path) -> None:
    victim = workspace / "victim.txt"
    victim.write_text("precious")
    write_servers(workspace, {"t": stdio()})
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        await catalog.prepare()
        assert catalog.get("t__delete_file").family == "destructive"
        refused = await catalog.call(
            "t__delete_file", {"path": str(victim)}, CallContext(asker=UnavailableAsker())
        )
        assert refused.is_error and victim.exists()
        done = await catalog.call("t__delete_file", {"path": str(victim)}, CallContext(assume_yes=True))
    finally:
        await catalog.aclose()
    assert not done.is_error and not victim.exists()


FLOW_CONFIG = """\
# my workspace: keep these notes
settings: {max_agent_iterations: 15}  # enough
approvals: {mode: ask, allow: [
    t__note,  # notes are harmless
  ]}  # asked for the rest
# end of file
"""


@pytest.mark.process
def test_always_on_a_terminal_keeps_a_flow_style_graphchat_yaml_byte_for_byte(
    workspace: Path, tmp_path: Path
) -> None:
    """Issue 10 point 15: "always" to a `tools call` approval inserts the tool into a flow-style
    `approvals: {…, allow: […]}` and changes nothing else in the file, comments included."""
    import sys

    import pexpect

    from tests.conftest import clean_env

    (workspace / "graphchat.yaml").write_text(FLOW_CONFIG)
    write_servers(workspace, {"t": stdio()})
    target = tmp_path / "touched.txt"
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "tools", "call", "t__touch",
         json.dumps({"path": str(target)})],
        env=clean_env({"TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace), dimensions=(30, 100), encoding="utf-8", timeout=60,
    )  # fmt: skip
    child.expect_exact("? Allow t__touch (destructive)")
    child.expect_exact("> ")
    child.sendline("always")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert target.exists()
    after = (workspace / "graphchat.yaml").read_text()
    assert after == FLOW_CONFIG.replace("t__note,", 't__note, "t__touch",'), after
    assert yaml.safe_load(after)["approvals"]["allow"] == ["t__note", "t__touch"]
