"""From a chat to the workbench: `graphchat workbench plan --from-thread [ID]` freezes a thread
made by a real `ask` against the scripted model (the deterministic `plan freeze`) and opens it as
an unsaved draft, on a pseudo-terminal through the real command."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest

from tests.chat.test_pty import Spawn, leave, send_message
from tests.chat.test_pty import chat as chat  # noqa: F401 - the pseudo-terminal fixture
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer

pytestmark = pytest.mark.slow


def _spawn(workspace: Path, server: ScriptedModelServer, *args: str) -> Any:
    return pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "workbench", "plan", *args],
        env=clean_env({**server.env(), "TERM": "xterm-256color"}, workspace.parent),
        cwd=str(workspace),
        dimensions=(40, 160),
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
    )


def _push_two_calls(server: ScriptedModelServer) -> None:
    server.push(
        {
            "tool_calls": [
                {
                    "name": "builtin__reshape",
                    "arguments": {"shape": {"city": "Lisbon", "count": 3}},
                }
            ]
        },
        {
            "tool_calls": [
                {
                    "name": "builtin__reshape",
                    "arguments": {"shape": {"headline": "3 days in Lisbon", "place": "Lisbon"}},
                }
            ]
        },
        {"text": "A 3-day headline for Lisbon."},
    )


def _chat_with_two_calls(cli: GraphchatRunner, server: ScriptedModelServer) -> None:
    """The thread the workbench opens, made by `ask` in process (only the workbench needs the
    terminal)."""
    _push_two_calls(server)
    asked = cli("ask", "Plan a headline for 3 days in Lisbon", env=server.env())
    assert asked.returncode == 0, asked.stderr


def test_from_thread_opens_the_latest_chat_frozen_as_an_unsaved_draft_that_ctrl_s_saves(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    _chat_with_two_calls(cli, model_server)
    frozen = cli("plan", "freeze", "--stdout")  # what `plan freeze` makes of the same thread
    assert frozen.returncode == 0, frozen.stderr
    identifier = next(
        line.split(":", 1)[1].strip() for line in frozen.stdout.splitlines() if line.startswith("identifier:")
    )
    assert not list((workspace / "plans").iterdir())  # --stdout wrote nothing

    child = _spawn(workspace, model_server, "--from-thread")
    try:
        child.expect_exact("E1  builtin__reshape")  # the frozen steps, on the plan tab
        child.expect_exact("[unsaved]")
        assert not list((workspace / "plans").iterdir())  # opened, not saved
        child.send("\x13")  # Ctrl-S
        saved = workspace / "plans" / f"{identifier}.yaml"
        _wait_for(saved, child)
        child.send("\x11")  # Ctrl-Q; saved: it quits without asking
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    assert saved.read_text() == frozen.stdout  # the draft is the deterministic freeze, byte for byte


def test_from_thread_with_an_id_and_its_refusals(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    none_yet = _spawn(workspace, model_server, "--from-thread")
    none_yet.expect(pexpect.EOF)
    none_yet.close()
    assert none_yet.exitstatus == 1 and "there are no threads yet" in (none_yet.before or "")
    assert "Traceback" not in (none_yet.before or "")

    _chat_with_two_calls(cli, model_server)
    listed = cli("threads", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    import json

    thread_id = json.loads(listed.stdout)["threads"][0]["id"]
    child = _spawn(workspace, model_server, "--from-thread", thread_id)
    try:
        child.expect_exact("E1  builtin__reshape")
        child.expect_exact(f"opened thread {thread_id}")
        child.send("\x11")  # Ctrl-Q; unsaved: it asks
        child.expect_exact("Quit anyway?")
        child.send("y")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
    assert not list((workspace / "plans").iterdir())  # dropped, never written

    unknown = _spawn(workspace, model_server, "--from-thread", "nosuchthread")
    unknown.expect(pexpect.EOF)
    unknown.close()
    assert unknown.exitstatus != 0 and "nosuchthread" in (unknown.before or "")
    both = _spawn(workspace, model_server, "greet", "--from-thread")
    both.expect(pexpect.EOF)
    both.close()
    assert both.exitstatus == 2 and "not both" in (both.before or "")


def _wait_for(path: Path, child: Any) -> None:
    for _ in range(200):  # the key is read by the app's loop: wait for the file
        if path.exists():
            return
        child.expect([pexpect.TIMEOUT], timeout=0.1)
    raise AssertionError(f"{path} was not written")


def test_slash_workbench_in_chat_opens_the_thread_as_a_draft_and_comes_back(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    _push_two_calls(model_server)
    child = chat()
    send_message(child, "Plan a headline for 3 days in Lisbon")
    child.expect_exact("A 3-day headline for Lisbon.")
    send_message(child, "/workbench")
    child.expect_exact("E1  builtin__reshape")  # the workbench owns the screen, this thread frozen
    child.expect_exact("[unsaved]")
    assert not list((workspace / "plans").iterdir())
    child.send("\x13")  # Ctrl-S
    saved = workspace / "plans" / "plan_a_headline_for_3_days_in_lisbon.yaml"
    _wait_for(saved, child)
    child.send("\x11")  # Ctrl-Q
    child.expect_exact("back in the chat (thread ")
    model_server.push({"text": "Still here."})
    send_message(child, "are you there?")  # the same chat goes on, with its own catalog
    child.expect_exact("Still here.")
    leave(child)
    offered = {t["function"]["name"] for t in model_server.requests[-1]["tools"]}
    assert "builtin__reshape" in offered and not [n for n in offered if n.startswith("workbench__")]
    assert [m["content"] for m in model_server.requests[-1]["messages"] if m["role"] == "user"] == [
        "Plan a headline for 3 days in Lisbon",
        "are you there?",
    ]
    assert "builtin__reshape" in saved.read_text()
