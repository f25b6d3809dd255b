"""`graphchat ask` on a pseudo-terminal: what a person sees besides the answer."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect

from tests.conftest import clean_env
from tests.scripted_server import ScriptedModelServer
from tests.test_chat_pty import plain


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
    return plain(output)


def test_a_usage_line_follows_the_answer_on_a_terminal(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "forty-two", "usage": {"prompt_tokens": 1234, "completion_tokens": 5}})
    screen = run_on_terminal(workspace, model_server, "the answer?")
    lines = [line for line in screen.splitlines() if line.strip()]
    assert lines[0] == "forty-two"
    assert lines[-1].startswith("calls 1 · input 1,234 tokens · output 5 tokens"), screen
