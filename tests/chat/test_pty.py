"""`graphchat chat` driven through a pseudo-terminal (pexpect) against the scripted model server.

The real command runs (`python -m graphchat --home <ws> chat`), so the real prompt_toolkit
session, rich rendering and signal handling are what is tested. Tests wait for prompts and
texts (never sleep); prompt_toolkit draws `you> ` / `answer> ` without the trailing space.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pexpect
import pytest
import yaml

from tests.conftest import clean_env
from tests.scripted_server import ScriptedModelServer

TIMEOUT = 40  # generous: the first model call imports litellm (~3 s, more on a loaded CI box)
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\r")

Spawn = Callable[..., pexpect.spawn]


def plain(text: str) -> str:
    return ANSI.sub("", text)


@pytest.fixture
def chat(workspace: Path, model_server: ScriptedModelServer) -> Iterator[Spawn]:
    """Start `graphchat chat` on a 40x120 pseudo-terminal; everything it printed is in `.transcript`."""
    children: list[pexpect.spawn] = []

    def spawn(*args: str, env: dict[str, str] | None = None) -> pexpect.spawn:
        environment = clean_env(
            {
                **model_server.env(),
                "TERM": "xterm-256color",
                "NO_COLOR": "1",
                "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
                "GRAPHCHAT_TEST_TOOLS": "1",
                **(env or {}),
            },
            workspace.parent,
        )
        child = pexpect.spawn(
            sys.executable,
            ["-m", "graphchat", "--home", str(workspace), "chat", *args],
            env=environment,
            cwd=str(workspace),
            dimensions=(40, 120),
            encoding="utf-8",
            codec_errors="replace",
            timeout=TIMEOUT,
        )
        child.transcript = []  # type: ignore[attr-defined]

        class Tee:
            def write(self, data: str) -> None:
                child.transcript.append(data)  # type: ignore[attr-defined]

            def flush(self) -> None:
                pass

        child.logfile_read = Tee()
        children.append(child)
        return child

    yield spawn
    for child in children:
        print(f"--- transcript (pid {child.pid}) ---\n{transcript(child)}")  # shown on failure
        if child.isalive():
            child.terminate(force=True)


def colours(raw: str) -> set[str]:
    """The colour parameters of the SGR escape sequences in `raw` (bold or dim are not colours)."""
    found = set()
    for params in re.findall(r"\x1b\[([0-9;]*)m", raw):
        for p in params.split(";"):
            if p.isdigit() and (30 <= int(p) <= 49 or 90 <= int(p) <= 107):
                found.add(p)
    return found


def transcript(child: pexpect.spawn) -> str:
    return plain("".join(child.transcript))  # type: ignore[attr-defined]


def send_message(child: pexpect.spawn, text: str) -> None:
    child.expect_exact("you>")
    child.sendline(text)


def leave(child: pexpect.spawn) -> str:
    """Ctrl-D at the prompt; returns the whole transcript once the process has ended."""
    child.expect_exact("you>")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, transcript(child)
    return transcript(child)


def user_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "user"]


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_message_gets_its_answer_rendered_once(chat: Spawn, model_server: ScriptedModelServer) -> None:
    # The server streams 8 characters a chunk: "nd.\n\nSec" ends the first paragraph and its
    # blank line in one chunk, so the live region never holds that paragraph complete.
    model_server.push({"text": "Hello **there**, my friend.\n\nSecond paragraph here.", "pace": 0.02})
    child = chat()
    send_message(child, "hi")
    child.expect_exact("Second paragraph here.")
    out = leave(child)
    assert user_messages(model_server.requests[0]) == ["hi"]
    assert "Hello there, my friend." in out  # rendered as markdown: no asterisks
    assert "**there**" not in out
    # a finished block is printed once, for good: never redrawn into the scrollback
    assert out.count("Hello there, my friend.") == 1


def test_ask_user_is_answered_inline(chat: Spawn, model_server: ScriptedModelServer) -> None:
    model_server.push(
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which colour do you like?"}}]},
        {"text": "Blue it is."},
    )
    child = chat()
    send_message(child, "pick a colour for me")
    child.expect_exact("? Which colour do you like?")
    child.expect_exact("answer>")
    child.sendline("blue, obviously")
    child.expect_exact("Blue it is.")
    out = leave(child)
    results = tool_messages(model_server.requests[1])
    assert len(results) == 1
    assert json.loads(results[0]["content"]) == {"answer": "blue, obviously", "answered": True}
    assert "→ ask_user" in out and "✓ ask_user" in out
    assert colours("".join(child.transcript)) == set()  # NO_COLOR=1 (set for every test here)


def thread_events(workspace: Path) -> list[dict]:
    (folder,) = [p for p in (workspace / "threads").iterdir() if p.is_dir() and not p.name.startswith(".")]
    return [json.loads(line) for line in (folder / "messages.jsonl").read_text().splitlines()]


def test_ctrl_c_cancels_a_slow_tool_and_the_session_goes_on(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push(
        {"tool_calls": [{"name": "debug__sleep", "arguments": {"seconds": 60, "label": "slow"}}]},
        {"text": "Second answer arrives."},
    )
    child = chat()
    send_message(child, "run the slow tool")
    child.expect_exact("→ debug__sleep")
    child.sendintr()
    child.expect_exact("turn cancelled")
    send_message(child, "are you there?")
    child.expect_exact("Second answer arrives.")
    out = leave(child)
    assert "⏹ turn cancelled" in out
    assert len(model_server.requests) == 2  # the cancelled turn sent nothing more
    # the cancelled turn is recorded as interrupted, and the model is told of it (issue 10 point 9):
    # the message, the call, and that the call was cancelled
    kinds = [(e["kind"], e.get("content")) for e in thread_events(workspace)]
    assert kinds[0] == ("user", "run the slow tool")
    assert any(kind == "turn_failed" for kind, _ in kinds)
    assert kinds[-1][0] == "turn_end"
    assert user_messages(model_server.requests[1]) == ["run the slow tool", "are you there?"]
    [tool_message] = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert "cancelled" in tool_message["content"]


def test_quit_prints_the_resume_hint(chat: Spawn, model_server: ScriptedModelServer, workspace: Path) -> None:
    model_server.push({"text": "Noted."})
    child = chat()
    send_message(child, "remember this")
    child.expect_exact("Noted.")
    send_message(child, "/quit")
    child.expect(r"resume with: graphchat chat --thread (\S+)")
    thread_id = child.match.group(1)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (workspace / "threads" / thread_id).is_dir()
    # and the thread resumes: the model gets the earlier conversation
    model_server.push({"text": "You said: remember this."})
    child = chat("--thread", thread_id)
    send_message(child, "what did I say?")
    child.expect_exact("You said: remember this.")
    leave(child)
    assert user_messages(model_server.requests[-1]) == ["remember this", "what did I say?"]


def test_a_destructive_tool_asks_inline_and_always_is_remembered(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path, tmp_path: Path
) -> None:
    server = Path(__file__).resolve().parent.parent / "servers" / "tools_server.py"
    (workspace / "catalog" / "servers.yaml").write_text(
        json.dumps({"mcpServers": {"files": {"command": sys.executable, "args": [str(server)]}}})
    )
    first, second = tmp_path / "first.txt", tmp_path / "second.txt"
    first.write_text("x")
    second.write_text("y")
    model_server.push(
        {"tool_calls": [{"name": "files__delete_file", "arguments": {"path": str(first)}}]},
        {"text": "Deleted the first."},
        {"tool_calls": [{"name": "files__delete_file", "arguments": {"path": str(second)}}]},
        {"text": "Deleted the second."},
    )
    child = chat()
    send_message(child, "delete the first file")
    child.expect_exact("? Allow files__delete_file (destructive)")
    child.expect_exact("answer>")
    child.sendline("always")
    child.expect_exact("Deleted the first.")
    assert not first.exists()
    config = yaml.safe_load((workspace / "graphchat.yaml").read_text())
    assert "files__delete_file" in config["approvals"]["allow"]
    send_message(child, "and the second")
    child.expect_exact("Deleted the second.")
    out = leave(child)
    assert not second.exists()
    assert out.count("? Allow files__delete_file") == 1  # "always" was not asked again
    assert "✓ files__delete_file" in out


PLAN = """\
identifier: pick_colour
name: Pick a colour
description: Ask the person for a colour and a count, and report them.
steps:
  - id: choice
    tool_name: ask
    input:
      prompt: "Which colour, and how many?"
      output_schema:
        type: object
        required: [colour, count]
        properties:
          colour: {enum: [red, green, blue]}
          count: {type: integer}
output:
  colour: "{{choice.answer.colour}}"
  count: "{{choice.answer.count}}"
  answered: "{{choice.answered}}"
"""


def test_a_plan_tool_that_asks_is_answered_inline(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path
) -> None:
    (workspace / "plans" / "pick_colour.yaml").write_text(PLAN)
    model_server.push(
        {"tool_calls": [{"name": "plan__pick_colour", "arguments": {}}]},
        {"text": "You picked 3 blue ones."},
    )
    child = chat()
    send_message(child, "help me pick a colour")
    child.expect_exact("→ plan__pick_colour")
    child.expect_exact("? Which colour, and how many?")
    for number, colour in enumerate(("red", "green", "blue"), 1):  # numbered, one a line
        child.expect_exact(f"{number}. {colour}")
    child.expect_exact("colour (1-3):")
    child.sendline("purple")
    child.expect_exact("choose one of: red, green, blue")  # re-asked, not failed
    child.expect_exact("colour (1-3):")
    child.sendline("3")  # by its number
    child.expect_exact("count (integer):")
    child.sendline("3")
    child.expect_exact("You picked 3 blue ones.")
    out = leave(child)
    assert "✓ plan__pick_colour" in out
    assert "plan__pick_colour" in [t["function"]["name"] for t in model_server.requests[0]["tools"]]
    (result,) = tool_messages(model_server.requests[1])
    assert json.loads(result["content"]) == {"colour": "blue", "count": 3, "answered": True}


def test_answers_file_answers_known_questions_and_others_are_asked_inline(
    chat: Spawn, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("Which colour do you like?: green\n")
    model_server.push(
        {
            "tool_calls": [
                {"name": "ask_user", "arguments": {"question": "Which colour do you like?"}},
                {"name": "ask_user", "arguments": {"question": "And which fruit?"}},
            ]
        },
        {"text": "Green and pears."},
    )
    child = chat("--answers", str(answers))
    send_message(child, "choose for me")
    child.expect_exact("? And which fruit?")
    child.expect_exact("answer>")
    child.sendline("pears")
    child.expect_exact("Green and pears.")
    out = leave(child)
    assert "? Which colour do you like?" not in out
    results = [json.loads(m["content"]) for m in tool_messages(model_server.requests[1])]
    assert results == [{"answer": "green", "answered": True}, {"answer": "pears", "answered": True}]


def test_resuming_shows_a_recap_and_tab_completes(
    chat: Spawn, model_server: ScriptedModelServer, workspace: Path
) -> None:
    """Issue 11 points 7 and 13: the banner names model and workspace; `chat --thread ID`
    shows the last exchange; Tab completes a slash command and a tool name after /tools."""
    model_server.push({"text": "The capital of France is Paris."})
    child = chat()
    # a long path may wrap onto its own line (styles around the break)
    child.expect(r"workspace(?:\s|\x1b\[[0-9;]*m)+" + re.escape(str(workspace)))
    send_message(child, "capital of France?")
    child.expect_exact("Paris.")
    leave(child)
    (thread_id,) = [p.name for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    again = chat("--thread", thread_id)
    again.expect_exact(f"continuing thread {thread_id}")
    again.expect_exact("you: capital of France?")
    again.expect_exact("model: The capital of France is Paris.")
    again.expect_exact("you>")
    again.send("/too\t")  # completes to /tools
    again.send(" debug__sl\t")  # a tool name after /tools (GRAPHCHAT_TEST_TOOLS=1)
    again.send("\r")
    again.expect_exact("debug__sleep")
    again.expect_exact("1 tools")
    leave(again)


def test_a_message_typed_during_a_turn_is_sent_next(chat: Spawn, model_server: ScriptedModelServer) -> None:
    """Issue 11 point 13: type-ahead keeps its Enter: the line is the next message, whole."""
    model_server.push({"delay": 2.0, "text": "first answer"}, {"text": "second answer"})
    child = chat()
    send_message(child, "one")
    child.expect_exact("thinking")  # the first turn runs
    child.send("and two\rthree")  # typed while the model thinks: one line with its Enter, then more
    child.expect_exact("first answer")
    child.expect_exact("second answer")  # "and two" went as the next message, whole
    child.expect_exact("three")  # what followed waits, unsent, in the prompt
    child.sendcontrol("u")  # clear it, so leaving is Ctrl-D at an empty prompt
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert user_messages(model_server.requests[1]) == ["one", "and two"]
