"""The chat's /retry, /edit, /clear and /exit, /help and Tab over every command (issue 24 point 7),
through the real `graphchat chat` on a pseudo-terminal against the scripted model server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pexpect

from graphchat.chat.commands import COMMANDS
from tests.chat.test_pty import Spawn, leave, send_message, thread_events, transcript, user_messages
from tests.chat.test_pty import chat as chat  # noqa: F401 - the pseudo-terminal fixture
from tests.conftest import clean_env
from tests.scripted_server import ScriptedModelServer


def conversation(request: dict) -> list[tuple[str, str]]:
    """(role, content) of the user and assistant messages the model was sent."""
    return [
        (m["role"], m.get("content") or "") for m in request["messages"] if m["role"] in ("user", "assistant")
    ]


def test_retry_sends_the_last_message_again_in_place_of_the_last_turn(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push({"text": "First try: 4."}, {"text": "Second try: 7."}, {"text": "Still 7."})
    child = chat()
    send_message(child, "pick a number")
    child.expect_exact("First try: 4.")
    send_message(child, "/retry")
    child.expect_exact("↻ retrying: pick a number")
    child.expect_exact("Second try: 7.")
    send_message(child, "sure?")
    child.expect_exact("Still 7.")
    leave(child)
    # the retried turn went with the same message and without the answer it replaces ...
    assert conversation(model_server.requests[1]) == [("user", "pick a number")]
    # ... and the turns after it never see the answer taken back
    assert conversation(model_server.requests[2]) == [
        ("user", "pick a number"),
        ("assistant", "Second try: 7."),
        ("user", "sure?"),
    ]
    kinds = [e["kind"] for e in thread_events(workspace)]  # one thread; the record keeps both tries
    assert kinds.count("user") == 3 and kinds.count("turn_retracted") == 1
    assert kinds.index("turn_retracted") == kinds.index("turn_end") + 1
    (thread_id,) = [p.name for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    for command in ("show", "export"):
        shown = subprocess.run(
            [sys.executable, "-m", "graphchat", "--home", str(workspace), "threads", command, thread_id],
            env=clean_env({"NO_COLOR": "1"}, workspace.parent),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        said = shown.stdout
        assert said.index("First try: 4.") < said.index("was taken back") < said.index("Second try"), command


def test_retry_after_a_failed_turn_and_with_nothing_to_retry(
    chat: Spawn, model_server: ScriptedModelServer
) -> None:
    model_server.push({"error": 401, "message": "bad key"}, {"text": "Now it works."})
    child = chat()
    send_message(child, "/retry")
    child.expect_exact("nothing to retry yet: send a message first")
    send_message(child, "hello?")
    child.expect_exact("error:")
    send_message(child, "/retry")
    child.expect_exact("Now it works.")
    leave(child)
    assert conversation(model_server.requests[-1]) == [("user", "hello?")]


def test_edit_puts_the_last_message_in_the_input_box_and_resends_it(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push(
        {"text": "No such country."}, {"text": "Paris."}, {"text": "It has 2.1 million people."}
    )
    child = chat()
    send_message(child, "capital of Frnace?")
    child.expect_exact("No such country.")
    send_message(child, "/edit")
    child.expect_exact("capital of Frnace?")  # in the input box, the cursor at its end
    child.send("\x7f" * len("Frnace?") + "France?\r")
    child.expect_exact("Paris.")
    # a cleared line changes nothing
    send_message(child, "/edit")
    child.expect_exact("capital of France?")
    child.send("\x15\r")  # Ctrl-U clears the line, Enter
    child.expect_exact("edit cancelled")
    send_message(child, "and its population?")
    child.expect_exact("2.1 million")
    out = leave(child)
    assert conversation(model_server.requests[1]) == [("user", "capital of France?")]
    assert conversation(model_server.requests[2]) == [
        ("user", "capital of France?"),
        ("assistant", "Paris."),
        ("user", "and its population?"),
    ]
    assert len(model_server.requests) == 3  # the cancelled edit sent nothing
    assert "No such country." in out
    kinds = [e["kind"] for e in thread_events(workspace)]
    assert kinds.count("turn_retracted") == 1


def test_clear_starts_a_new_thread_on_a_cleared_screen_and_exit_leaves(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push({"text": "One."}, {"text": "Two."})
    child = chat()
    send_message(child, "first")
    child.expect_exact("One.")
    send_message(child, "/clear")
    child.expect_exact("new thread: the next message starts it")
    send_message(child, "second")
    child.expect_exact("Two.")
    send_message(child, "/exit")  # leaves as /quit does
    child.expect(r"resume with: graphchat chat --thread (\S+)")
    second_thread = child.match.group(1)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    raw = "".join(child.transcript)  # type: ignore[attr-defined]
    cleared = raw.index("\x1b[2J")  # the screen was cleared ...
    assert raw.index("One.") < cleared < raw.rindex("Two.")  # ... between the two turns
    assert user_messages(model_server.requests[1]) == ["second"]  # nothing of the first thread
    threads = sorted(p.name for p in (workspace / "threads").iterdir() if not p.name.startswith("."))
    assert len(threads) == 2 and second_thread in threads


def test_every_command_is_in_help_and_the_new_ones_complete_with_tab(chat: Spawn) -> None:
    child = chat()
    child.expect_exact("you>")
    before = len(transcript(child))
    child.send("/\t")  # Tab on a bare slash: the menu of the commands (the first rows shown)
    child.expect_exact("/help")
    child.expect_exact("/tools")
    child.send("\x15")  # clear the line
    # a unique prefix completes (and Enter runs the command)
    for typed, effect in (
        ("/ret", "nothing to retry yet"),
        ("/ed", "nothing to edit yet"),
        ("/cl", "new thread"),
    ):
        child.send(f"{typed}\t\r")
        child.expect_exact(effect)
    send_message(child, "/help")
    child.expect_exact("A message that starts with //")
    help_text = transcript(child)[before:].split("/help", 1)[1]
    for name in COMMANDS:
        assert f"/{name}" in help_text, name
    child.send("/exi\t\r")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
