"""`graphchat ask` against the scripted model server (the real command, real HTTP): in process
(`cli`), and as a process where the boundary is the point (stdout purity, signals, a terminal)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GraphchatRunner, GraphchatSpawner, clean_env
from tests.scripted_server import ScriptedModelServer


def env_for(server: ScriptedModelServer, **extra: str) -> dict[str, str]:
    return {**server.env(), "GRAPHCHAT_TEST_TOOLS": "1", **extra}


def sleep_call(seconds: float, label: str) -> dict[str, Any]:
    return {"name": "debug__sleep", "arguments": {"seconds": seconds, "label": label}}


def thread_events(workspace: Path, thread_id: str) -> list[dict[str, Any]]:
    lines = (workspace / "threads" / thread_id / "messages.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def only_thread(workspace: Path) -> str:
    [thread_id] = [p.name for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    return thread_id


def ts(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def test_ask_prints_exactly_the_answer_and_keeps_a_titled_thread(
    graphchat: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "Hello! **Nice** to meet you."})
    done = graphchat("ask", "hi there\nsecond line", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Hello! **Nice** to meet you.\n"
    assert done.stderr == ""  # no banners, no warnings, no tool lines
    [request] = model_server.requests
    assert request["messages"] == [{"role": "user", "content": "hi there\nsecond line"}]
    assert request["stream"] is True
    listed = graphchat("threads", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [thread] = json.loads(listed.stdout)["threads"]
    assert thread["title"] == "hi there"
    assert thread["message_count"] == 2


def test_json_envelope(cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path) -> None:
    model_server.push(
        {"tool_calls": [sleep_call(0, "x")], "usage": {"prompt_tokens": 30, "completion_tokens": 3}},
        {"text": "The end.", "usage": {"prompt_tokens": 50, "completion_tokens": 4}},
    )
    done = cli("ask", "go", "--json", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope == {
        "content": "The end.",
        "thread_id": only_thread(workspace),
        "tool_calls_made": 1,
        "usage": {"calls": 2, "input_tokens": 80, "output_tokens": 7},
    }
    assert "debug__sleep" in done.stderr  # tool activity on stderr, never stdout


def test_three_slow_tool_calls_run_in_parallel_and_return_in_call_order(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push(
        {"tool_calls": [sleep_call(1, "first"), sleep_call(1, "second"), sleep_call(1, "third")]},
        {"text": "all three slept"},
    )
    done = cli("ask", "sleep thrice", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "all three slept\n"
    second = model_server.requests[1]["messages"]
    call_ids = [call["id"] for call in second[1]["tool_calls"]]
    results = second[2:]
    assert [m["role"] for m in results] == ["tool"] * 3
    assert [m["tool_call_id"] for m in results] == call_ids
    assert [json.loads(m["content"])["label"] for m in results] == ["first", "second", "third"]
    events = thread_events(workspace, only_thread(workspace))
    assistant = next(e for e in events if e["kind"] == "assistant")
    last_result = [e for e in events if e["kind"] == "tool_result"][-1]
    assert ts(last_result["ts"]) - ts(assistant["ts"]) < 1.6  # sequential would be 3 s
    assert done.stderr.count("→ debug__sleep") == 3 and done.stderr.count("✓ debug__sleep") == 3


def test_thread_flag_sends_the_whole_earlier_conversation(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push(
        {"tool_calls": [sleep_call(0, "t")]}, {"text": "first answer"}, {"text": "second answer"}
    )
    assert cli("ask", "first", env=env_for(model_server)).returncode == 0
    first_id = only_thread(workspace)
    done = cli("ask", "second", "--thread", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "second answer\n"
    sent = model_server.requests[2]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert sent[0]["content"] == "first" and sent[3]["content"] == "first answer"
    assert sent[4]["content"] == "second"
    assert only_thread(workspace) == first_id  # continued, not a new thread
    again = cli("ask", "third", "--thread", first_id[:8], "--json", env=env_for(model_server))
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["thread_id"] == first_id


def test_unknown_thread_id_is_an_error(cli: GraphchatRunner, model_server: ScriptedModelServer) -> None:
    done = cli("ask", "x", "--thread", "abcdef123456", env=env_for(model_server))
    assert done.returncode == 1
    assert done.stderr.startswith("error: unknown thread") and done.stdout == ""


def _wait_for_line(proc: subprocess.Popen[str], needle: str) -> list[str]:
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} never appeared on stderr: {seen}")


def test_sigkill_mid_tool_call_leaves_a_thread_that_replays_without_orphans(
    graphchat: GraphchatRunner,
    spawn_graphchat: GraphchatSpawner,
    model_server: ScriptedModelServer,
    workspace: Path,
) -> None:
    model_server.push({"tool_calls": [sleep_call(60, "never finishes")]}, {"text": "resumed"})
    proc = spawn_graphchat("ask", "start something slow", env=env_for(model_server))
    try:
        _wait_for_line(proc, "→ debug__sleep")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        proc.communicate()
    thread_id = only_thread(workspace)
    shown = graphchat("threads", "show", thread_id)
    assert shown.returncode == 0, shown.stderr
    assert "debug__sleep" in shown.stdout
    done = graphchat("ask", "what happened?", "--thread", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "resumed\n"
    sent = model_server.requests[1]["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
    assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
    assert "interrupted" in sent[2]["content"]


def test_ctrl_c_during_a_slow_tool_exits_130_and_keeps_what_completed(
    spawn_graphchat: GraphchatSpawner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    # the first call is in flight at Ctrl-C; the second has completed
    model_server.push({"tool_calls": [sleep_call(60, "slow"), sleep_call(0, "quick")]})
    proc = spawn_graphchat("ask", "two tools", env=env_for(model_server))
    try:
        _wait_for_line(proc, "✓ debug__sleep")
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr
    assert stdout == ""
    assert "Traceback" not in stderr
    events = thread_events(workspace, only_thread(workspace))
    assert [e["kind"] for e in events] == ["user", "assistant", "tool_result", "tool_result", "turn_failed"]
    results = {e["tool_call_id"]: e for e in events[2:4]}  # recorded as they finish, by call id
    slow, quick = (results[c["id"]] for c in events[1]["tool_calls"])
    assert slow["is_error"] and "cancelled" in slow["content"]
    assert not quick["is_error"] and json.loads(quick["content"])["label"] == "quick"
    assert len(model_server.requests) == 1


def test_no_model_configured_exits_2_naming_what_to_set(cli: GraphchatRunner) -> None:
    done = cli("ask", "hi")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "GRAPHCHAT_MODEL" in done.stderr and "graphchat.yaml" in done.stderr
    assert "Traceback" not in done.stderr


def test_429_then_success_retries_once(cli: GraphchatRunner, model_server: ScriptedModelServer) -> None:
    model_server.push({"error": 429, "retry_after": 0}, {"text": "worth the wait"})
    done = cli("ask", "hi", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "worth the wait\n" and done.stderr == ""
    assert len(model_server.requests) == 2


def test_401_is_one_clear_line_and_exit_2(
    graphchat: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    """A rejected key is a configuration mistake (exit 2, issue 11 point 4), never retried."""
    model_server.push({"error": 401})
    done = graphchat("ask", "hi", env=env_for(model_server))
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[0].startswith("error: ") and "401" in lines[0]
    assert len(lines) <= 2 and "GRAPHCHAT_API_KEY" in done.stderr  # the line, and what to check
    assert "Traceback" not in done.stderr and "LiteLLM" not in done.stderr
    assert len(model_server.requests) == 1
    assert not [p for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]  # no thread left


def test_piped_stdin_is_appended_as_context(cli: GraphchatRunner, model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "summary"})
    done = cli("ask", "summarise this", input="line one\nline two\n", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "summary\n"
    content = model_server.requests[0]["messages"][0]["content"]
    assert content.startswith("summarise this\n\n") and content.endswith("line one\nline two")


def test_jsonl_events_and_no_stream(cli: GraphchatRunner, model_server: ScriptedModelServer) -> None:
    model_server.push(
        {"tool_calls": [sleep_call(0, "a"), {"name": "ask_user", "arguments": {"question": "ok?"}}]},
        {"text": "finished"},
    )
    # --no-park: the unanswerable ask_user is `unavailable` at once (parking: test_requests.py)
    done = cli("ask", "go", "--no-stream", "--no-park", env=env_for(model_server, GRAPHCHAT_EVENTS="jsonl"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "finished\n"
    events = [json.loads(line) for line in done.stderr.splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.count("llm_call") == 2 and kinds.count("agent_round") == 2
    assert {"event": "ask", "prompt": "ok?", "answered": False, "reason": "unavailable"} in events
    assert kinds[-1] == "usage_summary"
    assert "stream" not in model_server.requests[0] or model_server.requests[0]["stream"] is False
    # ask_user answered "unavailable" at once (JSONL turns questions off): the model was told so
    tool_messages = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_messages[1]["content"]) == {"answered": False, "reason": "unavailable"}


def test_answers_file_answers_ask_user(
    cli: GraphchatRunner, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text("'Which region?': eu-west\n")
    model_server.push(
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which region?"}}]},
        {"text": "eu-west it is"},
    )
    done = cli("ask", "deploy", "--answers", str(answers), env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "eu-west it is\n"
    [tool_message] = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == {"answer": "eu-west", "answered": True}


@pytest.mark.process  # a terminal: pexpect
def test_answers_file_first_then_the_terminal_asks_what_the_file_does_not_answer(
    workspace: Path, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    import pexpect

    answers = tmp_path / "answers.yaml"
    answers.write_text("'Which region?': eu-west\n")
    model_server.push(
        {
            "tool_calls": [
                {"name": "ask_user", "arguments": {"question": "Which region?"}},
                {"name": "ask_user", "arguments": {"question": "How many replicas?"}},
            ]
        },
        {"text": "eu-west, 3 replicas"},
    )
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "deploy", "--answers", str(answers)],
        env=clean_env({**env_for(model_server), "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=40,
    )
    try:
        child.expect_exact("? How many replicas?")
        child.expect_exact("> ")
        child.sendline("3")
        child.expect_exact("eu-west, 3 replicas")
        child.expect(pexpect.EOF)
        shown = child.before or ""
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, shown
    results = [json.loads(m["content"]) for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == [{"answer": "eu-west", "answered": True}, {"answer": "3", "answered": True}]


def test_continue_flag_and_a_message_taken_for_a_thread_id(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    """Issue 11 point 10: `-c` continues the latest thread; `--thread "a message"` is told so."""
    model_server.push({"text": "first"}, {"text": "second"})
    assert cli("ask", "hello", env=env_for(model_server)).returncode == 0
    done = cli("ask", "-c", "and the docs?", env=env_for(model_server))
    assert (done.returncode, done.stdout) == (0, "second\n"), done.stderr
    assert only_thread(workspace)  # one thread: the same one went on
    last = model_server.requests[-1]["messages"]
    assert [m["content"] for m in last if m["role"] == "user"] == ["hello", "and the docs?"]
    wrong = cli("ask", "--thread", "and the docs?", env=env_for(model_server))
    assert wrong.returncode == 2
    assert "there is no thread 'and the docs?'" in wrong.stderr
    assert "graphchat ask -c 'and the docs?'" in wrong.stderr
    assert len(model_server.requests) == 2  # nothing was sent


def test_a_settable_system_prompt_reaches_the_model_first(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    """Issue 11 point 13: settings.system_prompt (or _file) for ask and chat; never stored."""
    (workspace / "voice.md").write_text("Answer like a pirate.")
    (workspace / "graphchat.yaml").write_text("settings:\n  system_prompt_file: voice.md\n")
    model_server.push({"text": "arr"})
    done = cli("ask", "hi", env=env_for(model_server))
    assert (done.returncode, done.stdout) == (0, "arr\n"), done.stderr
    first = model_server.requests[-1]["messages"][0]
    assert first == {"role": "system", "content": "Answer like a pirate."}
    assert "pirate" not in (workspace / "threads" / only_thread(workspace) / "messages.jsonl").read_text()
    (workspace / "graphchat.yaml").write_text("settings:\n  system_prompt_file: nowhere.md\n")
    missing = cli("ask", "hi", env=env_for(model_server))
    assert missing.returncode == 2
    assert "graphchat.yaml:2: settings.system_prompt_file: cannot read" in missing.stderr


def test_parallel_calls_of_one_tool_are_told_apart(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """Issue 11 point 14: `→ debug__sleep`, `→ debug__sleep#2`; JSONL events carry a call id."""
    calls = {"tool_calls": [sleep_call(0.3, "a"), sleep_call(0.3, "b")]}
    model_server.push(calls, {"text": "ok"})
    done = cli("ask", "go", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(line.startswith("→ debug__sleep {") for line in lines)
    assert any(line.startswith("→ debug__sleep#2 {") for line in lines)
    assert any(line.startswith("✓ debug__sleep#2 ") for line in lines), lines
    model_server.push(calls, {"text": "ok"})
    jsonl = cli("ask", "go", env=env_for(model_server, GRAPHCHAT_EVENTS="jsonl"))
    events = [json.loads(line) for line in jsonl.stderr.splitlines() if line.startswith("{")]
    started = [e["call"] for e in events if e["event"] == "tool_started"]
    finished = [e["call"] for e in events if e["event"] == "tool_finished"]
    assert len(set(started)) == 2 and sorted(started) == sorted(finished)
