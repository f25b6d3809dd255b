"""`graphchat ask` on a pseudo-terminal: what a person sees besides the answer; and what a pipe
gets instead, in process (`cli`: stdout and stderr are never terminals there)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pexpect
import pytest

from tests.chat.test_pty import plain
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer

# a test that runs `graphchat ask` on a pseudo-terminal is in the process tier
on_a_terminal = pytest.mark.process

_TOKEN = re.compile(r"\x1b\[\??([\d;]*)([A-Za-z])|\x1b\][^\x07]*\x07|\r\n|\n|\r|[^\x1b\r\n]+|\x1b")


def screen(raw: str) -> str:
    """What stays on the terminal: the text as a terminal shows it once everything was
    written — lines erased (`ESC[2K`) and rewritten after the cursor moved up (`ESC[nA`, as
    the spinner and the answer's live tail do) keep only what was written last."""
    lines, row, col = [""], 0, 0
    for match in _TOKEN.finditer(raw):
        token = match.group(0)
        if token in ("\r\n", "\n"):
            row, col = row + 1, 0
            if row == len(lines):
                lines.append("")
        elif token == "\r":
            col = 0
        elif match.group(2) == "A":
            row = max(0, row - int(match.group(1) or 1))
        elif match.group(2) == "K":
            lines[row] = "" if match.group(1) == "2" else lines[row][:col]
        elif match.group(2) or token.startswith("\x1b"):
            continue  # colours, the cursor shown or hidden, titles
        else:
            line = lines[row].ljust(col)
            lines[row] = line[:col] + token + line[col + len(token) :]
            col += len(token)
    return plain("\n".join(lines))


def run_on_terminal(workspace: Path, server: ScriptedModelServer, *args: str) -> str:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", *args],
        env=clean_env({**server.env(), "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        dimensions=(30, 100),
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
    )
    output = child.read()
    child.close()
    assert child.exitstatus == 0, output
    return screen(output)


@on_a_terminal
def test_a_usage_line_follows_the_answer_on_a_terminal(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "forty-two", "usage": {"prompt_tokens": 1234, "completion_tokens": 5}})
    shown = run_on_terminal(workspace, model_server, "the answer?")
    lines = [line for line in shown.splitlines() if line.strip()]
    assert lines[0] == "forty-two"
    assert lines[-1].startswith("calls 1 · input 1,234 tokens · output 5 tokens"), shown


def test_narration_before_tool_calls_is_not_part_of_the_answer(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """Issue 11 point 3: stdout (a pipe) is the final answer byte for byte; the text the model
    wrote before its tool calls goes to stderr, on its own line before the tool line."""
    model_server.push(
        {
            "text": "Let me check both clocks.",
            "tool_calls": [{"name": "debug__sleep", "arguments": {"seconds": 0}}],
        },
        {"text": "It is noon in both."},
    )
    done = cli("ask", "what time is it?", env={**model_server.env(), "GRAPHCHAT_TEST_TOOLS": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is noon in both.\n"
    lines = done.stderr.splitlines()
    assert lines[0] == "Let me check both clocks."
    assert lines[1].startswith("→ debug__sleep")


@on_a_terminal
def test_narration_on_a_terminal_ends_its_line_before_the_tool_line(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push(
        {"text": "Let me check.", "tool_calls": [{"name": "debug__sleep", "arguments": {"seconds": 0}}]},
        {"text": "Done."},
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "go"],
        env=clean_env(
            {**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1", "GRAPHCHAT_TEST_TOOLS": "1"},
            workspace.parent,
        ),
        cwd=str(workspace), dimensions=(30, 100), encoding="utf-8", timeout=60,
    )  # fmt: skip
    shown = screen(child.read())
    child.close()
    lines = [line for line in shown.splitlines() if line.strip()]
    assert lines[0] == "Let me check."
    assert lines[1].startswith("→ debug__sleep")
    assert "Done." in lines


@on_a_terminal
def test_a_spinner_shows_the_wait_on_a_terminal_and_never_in_a_pipe(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """Issue 11 point 6: while the model thinks, a terminal shows it with the elapsed time."""
    import re

    model_server.push({"delay": 1.0, "text": "slow answer"})
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "take your time"],
        env=clean_env({**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace), dimensions=(30, 100), encoding="utf-8", timeout=60,
    )  # fmt: skip
    raw = child.read()
    child.close()
    assert child.exitstatus == 0, raw
    assert re.search(r"thinking \d+\.\ds", raw), raw  # the spinner with its elapsed time
    assert "slow answer" in raw
    model_server.push({"delay": 1.0, "text": "slow answer"})
    piped = cli("ask", "take your time", env=model_server.env())
    assert (piped.returncode, piped.stdout, piped.stderr) == (0, "slow answer\n", "")
    jsonl = cli("ask", "again", env={**model_server.env(), "GRAPHCHAT_EVENTS": "jsonl"})
    assert "thinking" not in jsonl.stderr and "\r" not in jsonl.stderr


@on_a_terminal
def test_a_pipe_that_stays_open_is_reported_on_the_terminal(
    workspace: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    """Issue 11 point 14: stdin that never closes is said on stderr after a second."""
    import os

    model_server.push({"text": "read it"})
    fifo = tmp_path / "stdin.fifo"
    os.mkfifo(fifo)
    child = pexpect.spawn(
        "/bin/sh",
        ["-c", f'exec "{sys.executable}" -m graphchat --home "{workspace}" ask "summarise" < "{fifo}"'],
        env=clean_env({**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace), dimensions=(30, 100), encoding="utf-8", timeout=60,
    )  # fmt: skip
    with open(fifo, "w") as writer:  # opens once the shell opened the other end: stdin stays open
        child.expect_exact("reading stdin…")
        writer.write("some context\n")
    child.expect_exact("read it")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "some context" in model_server.requests[-1]["messages"][-1]["content"]


@on_a_terminal
def test_ask_on_a_terminal_renders_markdown_and_a_pipe_gets_the_text(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """Issue 11 point 13: as the chat renders it on a terminal; byte for byte on a pipe."""
    answer = "# Plan\n\nUse **bold** moves.\n\n- one\n- two\n"
    model_server.push({"text": answer})
    shown = run_on_terminal(workspace, model_server, "plan?")
    assert "Use bold moves." in shown and "**" not in shown and "# Plan" not in shown
    assert "• one" in shown
    model_server.push({"text": answer})
    piped = cli("ask", "plan?", env=model_server.env())
    assert piped.stdout == answer


@on_a_terminal
def test_a_question_left_unanswered_is_never_shown_done(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    """Issue 11 point 12: a question the person declines reads `– ask_user … not answered
    (declined)`, never `✓ ask_user`."""
    question = {"question": "Which zone?", "options": ["UTC", "CET"]}
    model_server.push(
        {"tool_calls": [{"name": "ask_user", "arguments": question}]},
        {"text": "Fine, no zone."},
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "convert the time"],
        env=clean_env({**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace), dimensions=(30, 100), encoding="utf-8", timeout=60,
    )  # fmt: skip
    child.expect_exact("? Which zone?")
    child.expect_exact("> ")
    child.sendline("")  # a blank line declines
    raw = child.read()
    child.close()
    assert child.exitstatus == 0, raw
    shown = screen(raw)
    assert "✓ ask_user" not in shown
    assert re.search(r"^– ask_user \d+\.\ds not answered \(declined\)$", shown, re.M), shown
