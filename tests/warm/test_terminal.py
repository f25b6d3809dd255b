"""A warm `ask` on a real pseudo-terminal shows and asks what a local `ask` shows and asks
(issue 14, item 2): the rendered answer and the tool lines, questions and approvals typed on
the client's terminal, Ctrl-C, SIGTERM and SIGHUP during a slow tool call or at a question
(the turn cancelled and recorded as a local interruption records it, the helper still
serving), and a second Ctrl-C that never waits for the helper.

The tests share the module's helpers (tests/warm/conftest.py, `Helpers`), one per workspace:
without MCP servers (`warm`), with the test tools server `t` (`slow_warm`), with it named
`files` (`files_warm`)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pexpect
import pytest

from graphchat.warm.control import alive
from tests.cli.test_ask_on_a_terminal import screen
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers
from tests.warm.conftest import Helpers, Warm, wait_until

TIMINGS = re.compile(r"\d+(\.\d+)?s\b")
# A spinner frame (`\r ESC[2K ESC[2m⠼ ask_user 0.3s ESC[0m`): how many are drawn depends on time.
SPINNER = re.compile(r"\r\x1b\[2K\x1b\[2m[\u2800-\u28ff][^\x1b]*\x1b\[0m")
ANSWER = "# Plan\n\nUse **bold** moves.\n\n- one\n- two\n"


def masked(text: str) -> str:
    return TIMINGS.sub("<t>", text)


def shown(raw: str) -> str:
    """What stays on the terminal, the spinner's frames left out."""
    return screen(SPINNER.sub("", raw))


class Terminals:
    """Spawns `graphchat ask` on pseudo-terminals; kills what a failed test left running."""

    def __init__(self, warm: Warm) -> None:
        self.warm = warm
        self.children: list[pexpect.spawn] = []

    def ask(self, *args: str, local: bool = False, env: dict[str, str] | None = None) -> pexpect.spawn:
        environment = {**self.warm.env, "TERM": "xterm-256color", "NO_COLOR": "1", **(env or {})}
        if local:
            environment["GRAPHCHAT_WARM"] = "0"
        child = pexpect.spawn(
            sys.executable,
            ["-m", "graphchat", "--home", str(self.warm.workspace), "ask", *args],
            env=environment,
            cwd=str(self.warm.workspace),
            dimensions=(30, 100),
            encoding="utf-8",
            codec_errors="replace",
            timeout=90,
        )
        child.logfile_read = io.StringIO()  # everything it printed
        self.children.append(child)
        return child


def called_file(warm: Warm) -> Path:
    """The file the `t` server of `slow_warm` writes when a call reaches it."""
    return warm.workspace.parent / "called"


@pytest.fixture
def warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace without MCP servers."""
    return helpers.warm("plain")


@pytest.fixture
def slow_warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace with the test tools server `t` (which writes
    `called_file` when a call reaches it; no such file when the test begins)."""

    def configure(warm: Warm) -> None:
        write_servers(warm.workspace, {"t": stdio(env={"GRAPHCHAT_TEST_CALLED": str(called_file(warm))})})

    state = helpers.warm("t", configure)
    called_file(state).unlink(missing_ok=True)
    return state


@pytest.fixture
def files_warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace with the test tools server named `files`."""
    return helpers.warm("files", lambda warm: write_servers(warm.workspace, {"files": stdio()}))


@pytest.fixture
def terminals(request: pytest.FixtureRequest) -> Iterator[Terminals]:
    """Terminals asking in the test's workspace (whichever of the module's helpers it takes)."""
    [name] = [n for n in ("warm", "slow_warm", "files_warm") if n in request.fixturenames]
    made = Terminals(request.getfixturevalue(name))
    yield made
    for child in made.children:
        if child.isalive():
            child.terminate(force=True)


def ended(child: pexpect.spawn) -> tuple[int | None, str]:
    """Once the child exited: its exit code and everything it printed."""
    child.expect(pexpect.EOF)
    child.close()
    code = child.exitstatus if child.exitstatus is not None else 128 + int(child.signalstatus or 0)
    return code, child.logfile_read.getvalue()


def served(warm: Warm) -> int:
    return warm.served()


def tool_messages(server: ScriptedModelServer) -> list[str]:
    """The tool results the model was sent in the last request."""
    return [str(m.get("content")) for m in server.requests[-1]["messages"] if m.get("role") == "tool"]


def thread_events(workspace: Path, thread_id: str) -> list[dict[str, Any]]:
    path = workspace / "threads" / thread_id / "messages.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def threads(workspace: Path) -> set[str]:
    return {p.name for p in (workspace / "threads").iterdir() if not p.name.startswith(".") and p.is_dir()}


# --- 1. the streamed answer --------------------------------------------------------------------


def test_a_rendered_answer_and_its_tool_lines_look_the_same_warm_and_local(
    slow_warm: Warm, model_server: ScriptedModelServer, terminals: Terminals
) -> None:
    warm = slow_warm
    warm.start()
    replies = [
        {
            "text": "Let me look.",
            "tool_calls": [{"name": "t__slow", "arguments": {"seconds": 0.1, "label": "a"}}],
        },
        {"text": ANSWER},
    ]
    seen, raws = {}, {}
    for where in ("local", "warm"):
        model_server.push(*replies)
        code, raw = ended(terminals.ask("plan?", local=where == "local"))
        assert code == 0, raw
        seen[where] = shown(raw)
        raws[where] = masked(SPINNER.sub("", raw))
    assert served(warm) == 1  # the second went through the helper
    local = seen["local"]
    assert "Use bold moves." in local and "• one" in local and "**" not in local, local
    assert re.search(r"^→ t__slow", local, re.M) and re.search(r"^✓ t__slow", local, re.M), local
    assert masked(seen["warm"]) == masked(local)
    assert raws["warm"] == raws["local"]  # the same bytes, escape codes and all


# --- 2. questions ------------------------------------------------------------------------------

NAME = {"question": "Your name?"}
ZONE = {"question": "Which zone?", "options": ["UTC", "CET"]}


def two_questions() -> list[dict[str, Any]]:
    return [
        {"tool_calls": [{"name": "ask_user", "arguments": NAME}]},
        {"tool_calls": [{"name": "ask_user", "arguments": ZONE}]},
        {"text": "Thanks."},
    ]


def test_questions_are_asked_on_the_client_terminal_and_the_model_gets_the_answers(
    warm: Warm, model_server: ScriptedModelServer, terminals: Terminals
) -> None:
    warm.start()
    seen, results = {}, {}
    for where in ("local", "warm"):
        model_server.push(*two_questions())
        child = terminals.ask("set me up", local=where == "local")
        child.expect_exact("? Your name?")
        child.expect_exact("> ")
        # while the person types, no spinner frame redraws the line (it erased prompt and answer)
        assert child.expect([SPINNER.pattern, pexpect.TIMEOUT], timeout=1) == 1, where
        child.sendline("Ada Lovelace")
        child.expect_exact("? Which zone?")
        child.expect_exact("2. CET")
        child.expect_exact("> ")
        child.sendline("2")
        code, rest = ended(child)
        assert code == 0, rest
        assert "Thanks." in rest
        seen[where] = shown(rest)
        results[where] = tool_messages(model_server)
    assert served(warm) == 1
    assert "Ada Lovelace" in results["local"][0] and "CET" in results["local"][1], results
    assert results["warm"] == results["local"]
    assert masked(seen["warm"]) == masked(seen["local"])


def test_an_answers_file_answers_one_question_and_the_client_terminal_the_other(
    warm: Warm, model_server: ScriptedModelServer, terminals: Terminals, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text(json.dumps({"Your name?": "Grace Hopper"}))
    warm.start()
    results = {}
    for where in ("local", "warm"):
        model_server.push(*two_questions())
        child = terminals.ask("set me up", "--answers", str(answers), local=where == "local")
        child.expect_exact("? Which zone?")
        assert "? Your name?" not in child.before  # the file answered it
        child.expect_exact("> ")
        child.sendline("UTC")
        code, rest = ended(child)
        assert code == 0, rest
        results[where] = tool_messages(model_server)
    assert served(warm) == 1
    assert "Grace Hopper" in results["local"][0] and "UTC" in results["local"][1], results
    assert results["warm"] == results["local"]


# --- 3. approvals ------------------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "runs"), [("once", True), ("refuse", False)])
def test_an_approval_is_asked_on_the_client_terminal_as_locally(
    files_warm: Warm,
    model_server: ScriptedModelServer,
    terminals: Terminals,
    tmp_path: Path,
    reply: str,
    runs: bool,
) -> None:
    warm = files_warm
    target = tmp_path / "made.txt"
    warm.start()
    seen, results = {}, {}
    for where in ("local", "warm"):
        target.unlink(missing_ok=True)
        model_server.push(
            {"tool_calls": [{"name": "files__touch", "arguments": {"path": str(target)}}]}, {"text": "Over."}
        )
        child = terminals.ask("make it", local=where == "local")
        child.expect_exact("? Allow files__touch (destructive) with these arguments?")
        child.expect_exact("\n> ")
        child.sendline(reply)
        code, rest = ended(child)
        assert code == 0, rest
        assert target.exists() is runs, rest
        seen[where] = shown(rest)
        results[where] = tool_messages(model_server)
    assert served(warm) == 1
    assert ("touched" in results["local"][0]) is runs, results
    assert ("the user refused it" in results["local"][0]) is not runs, results
    assert results["warm"] == results["local"]
    assert masked(seen["warm"]) == masked(seen["local"])


# --- 4 and 5. Ctrl-C, SIGTERM, SIGHUP ----------------------------------------------------------


def slow_call() -> list[dict[str, Any]]:
    return [{"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 600, "label": "long"}}]}]


def interrupted_turn(
    warm: Warm,
    server: ScriptedModelServer,
    terminals: Terminals,
    replies: list[dict[str, Any]],
    ready: Callable[[pexpect.spawn], object],
    *,
    local: bool,
    sig: int,
) -> tuple[int | None, str, str, list[dict[str, Any]]]:
    """Ask, send `sig` once `ready(child)` returned; the exit code, what the terminal showed,
    the thread's id and its events."""
    before = threads(warm.workspace)
    server.push(*replies)
    child = terminals.ask("wait a long time", local=local)
    assert ready(child), child.logfile_read.getvalue()
    if sig == signal.SIGINT:
        child.sendintr()
    else:
        os.kill(child.pid, sig)
    code, raw = ended(child)
    [thread_id] = threads(warm.workspace) - before
    return code, shown(raw), thread_id, thread_events(warm.workspace, thread_id)


def kinds_and_failure(events: list[dict[str, Any]]) -> tuple[list[str], dict[str, Any], dict[str, Any]]:
    result = next(e for e in events if e["kind"] == "tool_result")
    failed = events[-1]
    return (
        [e["kind"] for e in events],
        {"is_error": result.get("is_error"), "content": result.get("content")},
        {"error": failed.get("error"), "interrupted": failed.get("interrupted")},
    )


def during_the_call(called: Path) -> Callable[[pexpect.spawn], bool]:
    """Ready once the call has reached the server and the terminal shows it (a warm client
    draws the line when the helper's message arrives, which can be after the call started)."""

    def ready(child: pexpect.spawn) -> bool:
        child.expect_exact("→ t__slow")
        return wait_until(called.exists, timeout=90)

    return ready


def at_the_question(child: pexpect.spawn) -> bool:
    child.expect_exact("? Your name?")
    child.expect_exact("> ")
    return True


SIGNALS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "interrupted (SIGTERM)")}
SIGNALS[signal.SIGHUP] = (129, "interrupted (SIGHUP)")


@pytest.mark.parametrize(
    ("sig", "during"),
    [
        (signal.SIGINT, "tool"),
        (signal.SIGTERM, "tool"),
        (signal.SIGHUP, "tool"),
        (signal.SIGINT, "question"),
    ],
    ids=["Ctrl-C", "SIGTERM", "SIGHUP", "Ctrl-C-at-a-question"],
)
def test_an_interrupted_warm_turn_is_cancelled_and_recorded_as_a_local_one(
    slow_warm: Warm, model_server: ScriptedModelServer, terminals: Terminals, sig: int, during: str
) -> None:
    """During a 10-minute tool call (or at a question): the client says so and exits 128 + the
    signal, the thread records what a local `ask` records, and the helper serves on."""
    warm = slow_warm
    called = called_file(warm)
    pid = warm.start()
    if during == "tool":
        replies, ready = slow_call(), during_the_call(called)
    else:
        replies, ready = [{"tool_calls": [{"name": "ask_user", "arguments": NAME}]}], at_the_question
    runs = {}
    for where in ("local", "warm"):
        called.unlink(missing_ok=True)
        runs[where] = interrupted_turn(
            warm, model_server, terminals, replies, ready, local=where == "local", sig=sig
        )
    assert served(warm) == 1
    code, said = SIGNALS[sig]
    local, warmed = runs["local"], runs["warm"]
    assert local[0] == code, local[1]
    assert said in local[1].splitlines(), local[1]
    assert (warmed[0], masked(warmed[1])) == (local[0], masked(local[1]))
    kinds, result, failure = kinds_and_failure(local[3])
    assert kinds == ["user", "assistant", "tool_result", "turn_failed"], kinds
    assert failure["interrupted"] is True, failure
    assert kinds_and_failure(warmed[3]) == (kinds, result, failure)
    listed = warm.run("threads", "show", warmed[2])
    assert listed.returncode == 0, listed.stderr
    # the helper is still there and answers the next question
    assert alive(pid)
    model_server.push({"text": "still here"})
    after = warm.ask("are you there?")
    assert (after.returncode, after.stdout) == (0, "still here\n"), after.stderr
    assert served(warm) == 2
    assert warm.status()["pid"] == pid


def test_a_second_ctrl_c_does_not_wait_for_the_helper(
    slow_warm: Warm, model_server: ScriptedModelServer, terminals: Terminals
) -> None:
    """The helper is stopped (SIGSTOP) before the first Ctrl-C: it cannot wind the turn down;
    the second Ctrl-C ends the client all the same, and the helper, let go on, cancels the
    turn and serves the next one."""
    warm = slow_warm
    called = called_file(warm)
    pid = warm.start()
    model_server.push(*slow_call())
    child = terminals.ask("wait a long time")
    assert wait_until(called.exists, timeout=90)
    os.kill(pid, signal.SIGSTOP)
    try:
        child.sendintr()
        child.expect(pexpect.TIMEOUT, timeout=1)  # the client waits for the helper to wind down
        assert child.isalive()
        child.sendintr()
        code, rest = ended(child)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert code == 130, rest
    assert "interrupted" in shown(rest).splitlines(), rest
    [thread_id] = threads(warm.workspace)
    assert wait_until(
        lambda: thread_events(warm.workspace, thread_id)[-1]["kind"] == "turn_failed", timeout=60
    )
    assert thread_events(warm.workspace, thread_id)[-1]["interrupted"] is True
    assert warm.run("threads", "show", thread_id).returncode == 0
    model_server.push({"text": "still here"})
    after = warm.ask("are you there?")
    assert (after.returncode, after.stdout) == (0, "still here\n"), after.stderr
    assert warm.status()["pid"] == pid
