"""Issue 10 point 4: escape sequences from a tool's description, result and error, the model's
answer and a replayed thread never reach a person's terminal raw; the answer on a pipe stays
byte-exact."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import pytest

from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import write_servers

HOSTILE = str(Path(__file__).resolve().parent / "raw_hostile_server.py")
ESC = "\x1b"
ANSWER = f"Done.{ESC}]0;answer-title\x07{ESC}]52;c;c2VjcmV0\x07 bye\u009b1A"


def hostile(workspace: Path, **env: str) -> None:
    body: dict = {"command": sys.executable, "args": [HOSTILE]}
    if env:
        body["env"] = env
    write_servers(workspace, {"h": body})


def raw_controls(text: str) -> list[str]:
    """Control characters a terminal would act on (newline and tab are fine)."""
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def test_tools_list_show_and_mcp_list_escape_a_hostile_description(
    workspace: Path, cli: GraphchatRunner
) -> None:
    hostile(workspace)
    listed = cli("tools", "list")
    assert listed.returncode == 0, listed.stderr
    assert "h__evil" in listed.stdout
    assert raw_controls(listed.stdout) == [] and raw_controls(listed.stderr) == []
    assert "\\x1b]0;pwned-title\\x07" in listed.stdout  # shown, escaped
    shown = cli("tools", "show", "h__evil")
    assert shown.returncode == 0, shown.stderr
    assert raw_controls(shown.stdout) == [] and "\\x1b]52;" in shown.stdout
    write_servers(workspace, {"h": {"command": sys.executable, "args": [HOSTILE, f"{ESC}]0;x\x07"]}})
    servers = cli("mcp", "list")
    assert servers.returncode == 0, servers.stderr
    assert raw_controls(servers.stdout) == [] and "\\x1b]0;x" in servers.stdout


def test_ask_tools_and_threads_escape_what_a_person_reads(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    hostile(workspace)
    model_server.push(
        {"tool_calls": [{"name": "h__evil", "arguments": {}}, {"name": "h__fail", "arguments": {}}]},
        {"text": ANSWER},
    )
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == ANSWER + "\n"  # the deliverable on a pipe: byte for byte, ending its line
    assert raw_controls(done.stderr) == [], done.stderr  # activity lines: escaped
    assert "✗ h__fail" in done.stderr and "\\x1b[1A" in done.stderr
    called = cli("tools", "call", "h__fail")
    assert called.returncode == 1 and raw_controls(called.stderr) == []
    assert "error: it broke \\x1b]0;pwned-title" in called.stderr

    thread = json.loads(cli("threads", "list", "--json").stdout)["threads"][0]["id"]
    shown = cli("threads", "show", thread)
    assert shown.returncode == 0, shown.stderr
    assert raw_controls(shown.stdout) == [] and "Done.\\x1b]0;answer-title" in shown.stdout
    assert "h__evil" in shown.stdout and "pwned-title" in shown.stdout, shown.stdout
    exported = cli("threads", "export", thread, "--format", "md")
    assert exported.returncode == 0, exported.stderr
    assert raw_controls(exported.stdout) == [] and "\\x1b]52;c;c2VjcmV0" in exported.stdout


@pytest.mark.process
def test_ask_on_a_terminal_escapes_the_answer_and_the_activity(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    hostile(workspace)
    model_server.push(
        {"tool_calls": [{"name": "h__fail", "arguments": {}}]},
        {"text": ANSWER},
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "go"],
        env=clean_env({**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        dimensions=(30, 100),
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
    )
    out = child.read()
    child.close()
    assert child.exitstatus == 0, out
    assert f"{ESC}]" not in out and "\x07" not in out and "\x9b" not in out  # no OSC, BEL, CSI
    # no cursor-up faking an activity line: the only one is the answer's live region going
    # away (up one line, then erase it)
    assert f"{ESC}[1A" not in out.replace(f"{ESC}[1A{ESC}[2K", "")
    assert "Done.\\x1b]0;answer-title" in out


@pytest.mark.process
def test_chat_escapes_the_answer_and_tool_errors(workspace: Path, model_server: ScriptedModelServer) -> None:
    from tests.chat.test_pty import TIMEOUT

    hostile(workspace)
    model_server.push(
        {"tool_calls": [{"name": "h__fail", "arguments": {}}]},
        {"text": ANSWER},
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "chat"],
        env=clean_env(
            {**model_server.env(), "TERM": "xterm-256color", "NO_COLOR": "1", "PROMPT_TOOLKIT_NO_CPR": "1"},
            workspace.parent,
        ),
        cwd=str(workspace),
        dimensions=(40, 120),
        encoding="utf-8",
        codec_errors="replace",
        timeout=TIMEOUT,
    )
    child.expect_exact("you>")
    child.sendline("go")
    child.expect_exact("bye")
    seen = child.before
    child.expect_exact("you>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    seen += child.before
    child.close()
    assert "\\x1b]0;answer-title" in seen
    assert f"{ESC}]0;answer-title" not in seen and f"{ESC}]52;" not in seen and f"{ESC}]0;pwned" not in seen
    assert "\x9b" not in seen
