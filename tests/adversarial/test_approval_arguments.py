"""Issue 10 points 2 and 5: an approval shows every argument in full (wrapped, paged, escaped)
on a terminal and in `mcp serve` elicitations, and an "always" given over MCP lasts for that
serve session only."""

from __future__ import annotations

import sys
from pathlib import Path

import pexpect
import pytest
from mcp.types import ElicitResult

from tests.chat.test_pty import TIMEOUT, leave, plain, send_message
from tests.conftest import clean_env
from tests.mcp_server.test_serve import TOUCH, answering, serve, text_of
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

# A path whose dangerous end sits far past any "short" display of the arguments.
HIDDEN = "/home/me/project/build/tmp/" + "./" * 150 + "../../../.ssh/authorized_keys"


def ask_on_terminal(workspace: Path, server: ScriptedModelServer, rows: int = 30) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "do it"],
        env=clean_env({**server.env(), "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        dimensions=(rows, 100),
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
    )


@pytest.mark.process
def test_a_terminal_approval_shows_the_whole_argument(
    workspace: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    write_servers(workspace, {"files": stdio()})
    model_server.push(
        {"tool_calls": [{"name": "files__touch", "arguments": {"path": HIDDEN}}]},
        {"text": "I did not touch it."},
    )
    child = ask_on_terminal(workspace, model_server)
    child.expect_exact("? Allow files__touch (destructive)")
    child.expect_exact("> ")
    shown = plain(child.before).replace("\n", "").replace("    ", "")
    assert ".ssh/authorized_keys" in shown, shown  # the end of the path is on the screen
    assert "…" not in shown
    child.sendline("refuse")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert not Path(HIDDEN).exists()


@pytest.mark.process
def test_long_arguments_are_paged_and_quitting_the_pager_refuses(
    workspace: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    write_servers(workspace, {"files": stdio()})
    target = tmp_path / "notes.txt"
    text = "".join(f"line {i:03} " + "x" * 90 for i in range(60)) + " THE-END\u009b2J\x1b]0;pwned\x07"
    call = {"name": "files__note", "arguments": {"path": str(target), "text": text}}
    # the arguments (6 KB) in one chunk each time, not 600 (CPU)
    model_server.push(
        {"tool_calls": [call], "piece": 8192},
        {"text": "Not noted."},
        {"tool_calls": [call], "piece": 8192},
        {"text": "Noted."},
    )
    child = ask_on_terminal(workspace, model_server, rows=20)
    child.expect_exact("? Allow files__note (write)")
    child.expect(r"-- \d+ more lines: Enter shows them, q refuses --")
    child.sendline("q")  # stopped reading: not asked, refused
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert not target.exists()

    child = ask_on_terminal(workspace, model_server, rows=20)
    child.expect_exact("? Allow files__note (write)")
    raw = ""
    while True:  # page through to the end
        index = child.expect([r"more lines: Enter shows them, q refuses -- ", r"\n> "])
        raw += child.before
        if index == 1:
            break
        child.sendline("")
    shown = plain(raw).replace("\n", "").replace("    ", "")
    assert "line 059" in shown and "THE-END" in shown
    assert "\x1b]0;" not in raw and "\x9b" not in raw  # control characters are escaped
    assert "\\u009b2J" in shown or "\\x9b2J" in shown
    child.sendline("once")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert target.read_text().startswith("line 000")


@pytest.mark.process  # `graphchat mcp serve` is a process an MCP client talks to over its stdio
async def test_an_elicited_approval_shows_every_argument(workspace: Path, tmp_path: Path) -> None:
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "touch_it.yaml").write_text(TOUCH)
    target = tmp_path / ("a" * 120) / ("b" * 120) / "first.txt"  # a path longer than 200 characters
    target.parent.mkdir(parents=True)
    callback, seen = answering(ElicitResult(action="accept", content={"answer": "refuse"}))
    async with serve(workspace, elicit=callback) as client:
        refused = await client.call_tool("plan_touch_it", {"path": str(target)})
    assert refused.is_error and not target.exists()
    assert len(seen) == 1
    assert str(target) in seen[0].message  # the whole path, not its first 200 characters


@pytest.mark.process  # `graphchat mcp serve` is a process an MCP client talks to over its stdio
async def test_always_from_an_mcp_client_lasts_for_that_serve_session_only(
    workspace: Path, tmp_path: Path
) -> None:
    config_before = (workspace / "graphchat.yaml").read_text()
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "touch_it.yaml").write_text(TOUCH)
    first, second, third = (tmp_path / f"{n}.txt" for n in ("first", "second", "third"))
    callback, seen = answering(ElicitResult(action="accept", content={"answer": "always"}))
    async with serve(workspace, elicit=callback) as client:
        one = await client.call_tool("plan_touch_it", {"path": str(first)})
        two = await client.call_tool("plan_touch_it", {"path": str(second)})  # not asked again
    assert not one.is_error and not two.is_error, (text_of(one), text_of(two))
    assert first.exists() and second.exists()
    assert len(seen) == 1
    assert (workspace / "graphchat.yaml").read_text() == config_before  # nothing written

    callback, seen = answering(ElicitResult(action="accept", content={"answer": "refuse"}))
    async with serve(workspace, elicit=callback) as client:
        refused = await client.call_tool("plan_touch_it", {"path": str(third)})
    assert len(seen) == 1, "a new serve session asks again"
    assert refused.is_error and not third.exists()


@pytest.mark.process
def test_a_chat_approval_shows_the_whole_argument(model_server: ScriptedModelServer, workspace: Path) -> None:
    write_servers(workspace, {"files": stdio()})
    model_server.push(
        {"tool_calls": [{"name": "files__touch", "arguments": {"path": HIDDEN}}]},
        {"text": "Left it alone."},
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
    child.transcript = []  # type: ignore[attr-defined]

    class Tee:
        def write(self, data: str) -> None:
            child.transcript.append(data)  # type: ignore[attr-defined]

        def flush(self) -> None:
            pass

    child.logfile_read = Tee()
    send_message(child, "touch it")
    child.expect_exact("? Allow files__touch (destructive)")
    child.expect_exact("answer>")
    child.sendline("refuse")
    child.expect_exact("Left it alone.")
    out = leave(child)
    shown = out.replace("\n", "").replace(" ", "")
    assert ".ssh/authorized_keys" in shown
    assert not Path(HIDDEN).exists()


@pytest.mark.process
def test_arguments_too_long_to_read_are_refused_not_asked(
    workspace: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    write_servers(workspace, {"files": stdio()})
    target = tmp_path / "notes.txt"
    model_server.push(
        {
            "tool_calls": [
                {"name": "files__note", "arguments": {"path": str(target), "text": "z" * 150_000}}
            ],
            "piece": 4096,  # 37 chunks of arguments, not 15,000 (CPU)
        },
        {"text": "It was refused."},
    )
    child = ask_on_terminal(workspace, model_server)
    index = child.expect_exact(["? Allow", "It was refused."])  # not asked: refused at once
    assert index == 1
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert not target.exists()
    told = str(model_server.requests[-1]["messages"][-1]["content"])
    assert "too long to show for approval" in told
