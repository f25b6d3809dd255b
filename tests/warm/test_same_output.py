"""A warm `ask` gives what a local `ask` gives: stdout byte for byte, the exit code, and stderr
with timings masked (issue 14, item 2). Every case asks the same question locally
(GRAPHCHAT_WARM=0, the real entry point run in process) and then through the helper, the model replying alike, and proves that the
second one really went through the helper (its `turns_served` grew by one).

The module's tests share two helpers (tests/warm/conftest.py, `Helpers`): one for a workspace
without MCP servers (`warm`), one for a workspace with the test tools server `t` (`tools_warm`);
each test begins with an empty history and model script, and counts its own turns."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.scripted_server import ScriptedModelServer
from tests.servers.support import seed_cache, stdio, write_servers
from tests.warm.conftest import Helpers, Warm

TIMINGS = re.compile(
    r"\d+(\.\d+)?\s?(s|ms)\b|\"ms\":\s*[\d.]+|\"(ts|at|started|ended)\":\s*\"[^\"]*\""
    r"|\d{4}-\d\d-\d\dT[\d:.]+(Z|[+-]\d\d:?\d\d)?"
)
IDS = re.compile(r"(?<![0-9a-f])[0-9a-f]{6,}(?![0-9a-f])")


def masked(text: str) -> str:
    """Timings and ids (thread, request and call ids differ between any two runs) masked."""
    return IDS.sub("<id>", TIMINGS.sub("<t>", text))


def ask_local(
    warm: Warm, server: ScriptedModelServer, replies: list[Any], *args: str, **kw: Any
) -> subprocess.CompletedProcess[str]:
    server.script.clear()
    server.push(*replies)
    return warm.ask_in_process(*args, **kw)


def ask_warm(
    warm: Warm, server: ScriptedModelServer, replies: list[Any], *args: str, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """`ask` through the helper, proving it went there: the helper counted one more turn."""
    before = warm.served()
    server.script.clear()
    server.push(*replies)
    done = warm.ask(*args, **kw)
    assert warm.served() == before + 1, ("the helper did not take the question", done.stderr)
    return done


def assert_same(local: subprocess.CompletedProcess[str], warmed: subprocess.CompletedProcess[str]) -> None:
    """stdout byte for byte (but for the new thread's id in a --json object), the exit code,
    stderr with timings and ids masked."""
    if local.stdout.startswith("{"):  # a --json object: the thread's (or request's) id differs
        assert masked(warmed.stdout) == masked(local.stdout), (local.stderr, warmed.stderr)
        assert json.loads(warmed.stdout).keys() == json.loads(local.stdout).keys()
    else:
        assert warmed.stdout == local.stdout, (local.stderr, warmed.stderr)
    assert warmed.returncode == local.returncode, (local.stderr, warmed.stderr)
    assert masked(warmed.stderr) == masked(local.stderr)


def both(
    warm: Warm, server: ScriptedModelServer, replies: list[Any], *args: str, **kw: Any
) -> tuple[subprocess.CompletedProcess[str], subprocess.CompletedProcess[str]]:
    """The same question asked locally and then through the helper, the model replying alike;
    the two runs' model requests are the same too (ids masked)."""
    first, made = len(server.requests), thread_ids(warm)
    local = ask_local(warm, server, replies, *args, **kw)
    middle, local_made = len(server.requests), thread_ids(warm)
    warmed = ask_warm(warm, server, replies, *args, **kw)
    warm_made = thread_ids(warm)
    assert_same(local, warmed)
    assert masked(json.dumps(server.requests[middle:])) == masked(json.dumps(server.requests[first:middle]))
    # a new thread each: what the two turns recorded is the same too
    local_new, warm_new = local_made - made, warm_made - local_made
    assert len(local_new) == len(warm_new)
    if local_new:
        (local_thread,), (warm_thread,) = local_new, warm_new
        assert thread_text(warm, warm_thread) == thread_text(warm, local_thread)
    return local, warmed


def thread_ids(warm: Warm) -> set[str]:
    return {p.name for p in (warm.workspace / "threads").iterdir() if (p / "messages.jsonl").exists()}


def thread_text(warm: Warm, thread: str) -> str:
    return masked((warm.workspace / "threads" / thread / "messages.jsonl").read_text())


def messages(body: dict[str, Any], role: str) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == role]


def tools_workspace(warm: Warm) -> None:
    write_servers(warm.workspace, {"t": stdio()})
    seed_cache(warm.workspace)


@pytest.fixture
def warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace without MCP servers."""
    return helpers.warm("plain")


@pytest.fixture
def tools_warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace with the test tools server `t`."""
    return helpers.warm("tools", tools_workspace)


# --- 1. answers, a tool round, --json, --no-stream, narration ----------------------------------


def test_a_tool_round_and_the_answer_are_the_same_warm_and_local(
    tools_warm: Warm, model_server: ScriptedModelServer
) -> None:
    tools_warm.start()
    calls = [{"name": "t__slow", "arguments": {"seconds": 0.2, "label": str(i)}} for i in range(3)]
    local, warmed = both(tools_warm, model_server, [{"tool_calls": calls}, {"text": "done **bold**"}], "go")
    assert (local.returncode, local.stdout) == (0, "done **bold**\n"), local.stderr
    results = messages(model_server.requests[-1], "tool")
    assert [json.loads(r) for r in results] == [{"result": f"{i}: slept 0.2s"} for i in range(3)]
    assert (tools_warm.status()["turns_running"], tools_warm.served()) == (0, 1)


def test_a_plain_answer_json_and_no_stream(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    local, _ = both(warm, model_server, [{"text": "Paris, *of course*.\n"}], "capital of France?")
    assert (local.returncode, local.stdout) == (0, "Paris, *of course*.\n")

    local, warmed = both(warm, model_server, [{"text": "Lyon"}], "second city?", "--json")
    doc, warm_doc = json.loads(local.stdout), json.loads(warmed.stdout)
    assert doc["content"] == "Lyon" and warm_doc["content"] == "Lyon"
    assert doc["thread_id"] != warm_doc["thread_id"]  # each its own new thread
    assert (warm.workspace / "threads" / warm_doc["thread_id"] / "messages.jsonl").exists()

    local, _ = both(warm, model_server, [{"text": "Marseille"}], "third?", "--no-stream")
    assert (local.returncode, local.stdout) == (0, "Marseille\n")
    assert model_server.requests[-1].get("stream") in (None, False)


def test_narration_before_tool_calls_goes_to_stderr_alike(
    tools_warm: Warm, model_server: ScriptedModelServer
) -> None:
    tools_warm.start()
    calls = [{"name": "t__slow", "arguments": {"seconds": 0, "label": x}} for x in ("a", "b")]
    replies = [{"text": "Let me look at both.", "tool_calls": calls}, {"text": "Both slept."}]
    local, _ = both(tools_warm, model_server, replies, "look")
    assert (local.returncode, local.stdout) == (0, "Both slept.\n"), local.stderr
    assert "Let me look at both." in local.stderr
    local, _ = both(tools_warm, model_server, replies, "look", "--json")
    assert json.loads(local.stdout)["content"] == "Both slept."


# --- 2. piped stdin ----------------------------------------------------------------------------


def test_piped_stdin_is_context_or_the_question_alike(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    local, _ = both(warm, model_server, [{"text": "3 lines"}], "count the lines", input="a\nb\nc\n")
    assert local.stdout == "3 lines\n"
    (question,) = messages(model_server.requests[-1], "user")
    assert question == "count the lines\n\nContext (piped input):\na\nb\nc"

    local, _ = both(warm, model_server, [{"text": "42"}], "", input="what is six times seven?\n")
    assert local.stdout == "42\n"
    assert messages(model_server.requests[-1], "user") == ["what is six times seven?"]

    local, _ = both(warm, model_server, [{"text": "alone"}], "just this", input="")
    assert local.stdout == "alone\n"
    assert messages(model_server.requests[-1], "user") == ["just this"]

    # nothing but blanks piped: refused before anything starts, the helper never asked
    local = ask_local(warm, model_server, [], "", input="  \n")
    warmed = warm.ask("", input="  \n")
    assert_same(local, warmed)
    assert local.returncode == 2 and "nothing to ask" in local.stderr, local.stderr
    assert warm.served() == 3


def test_an_empty_question_is_refused_alike_and_never_reaches_the_helper(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm.start()
    local = ask_local(warm, model_server, [], "  ")
    warmed = warm.ask("  ")
    assert_same(local, warmed)
    assert local.returncode == 2 and "nothing to ask" in local.stderr
    assert warm.served() == 0 and model_server.requests == []


def test_piped_stdin_without_a_message_is_the_question_alike(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm.start()
    local, _ = both(warm, model_server, [{"text": "Tuesday"}], input="what day is it?\n")
    assert (local.returncode, local.stdout) == (0, "Tuesday\n"), local.stderr
    assert messages(model_server.requests[-1], "user") == ["what day is it?"]
    # nothing piped, no message: a usage error before anything starts
    local = ask_local(warm, model_server, [], input="")
    warmed = warm.ask(input="")
    assert_same(local, warmed)
    assert local.returncode == 2 and "the question is missing" in local.stderr, local.stderr


def test_a_model_override_is_used_alike(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    local, _ = both(warm, model_server, [{"text": "other"}], "which model?", "--model", "openai/other")
    assert (local.returncode, local.stdout) == (0, "other\n"), local.stderr
    assert model_server.requests[-1]["model"] == "other"


# --- 3. continuing a thread --------------------------------------------------------------------


def test_thread_id_and_c_continue_a_thread_alike(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    ids = []
    for _ in range(2):  # two alike threads: one continued locally, one through the helper
        made = ask_local(warm, model_server, [{"text": "Noted: blue."}], "my color is blue", "--json")
        ids.append(json.loads(made.stdout)["thread_id"])
    start = len(model_server.requests)
    local = ask_local(warm, model_server, [{"text": "blue"}], f"--thread={ids[0]}", "my color?")
    warmed = ask_warm(warm, model_server, [{"text": "blue"}], f"--thread={ids[1]}", "my color?")
    assert_same(local, warmed)
    assert local.stdout == "blue\n"
    for body in model_server.requests[start:]:
        assert messages(body, "user") == ["my color is blue", "my color?"]
        assert messages(body, "assistant") == ["Noted: blue."]
    assert masked(json.dumps(model_server.requests[start])) == masked(
        json.dumps(model_server.requests[start + 1])
    )

    # -c: the latest thread (made locally before each run)
    for where in ("local", "warm"):
        ask_local(warm, model_server, [{"text": "Noted: 7."}], "my number is 7")
        run = ask_local if where == "local" else ask_warm
        done = run(warm, model_server, [{"text": "7"}], "-c", "my number?")
        assert (done.returncode, done.stdout) == (0, "7\n"), done.stderr
        assert messages(model_server.requests[-1], "user") == ["my number is 7", "my number?"]
        if where == "local":
            local = done
        else:
            assert_same(local, done)


def held_thread(warm: Warm, server: ScriptedModelServer, local: bool) -> tuple[str, list[str], str, str, int]:
    """A thread whose turn lock another process (this test) holds: a `--no-wait` ask is
    refused; a plain one waits and, once the lock is released, answers with the thread's
    earlier messages. Returns the refusal's stderr, the waiting ask's first stderr line, its
    stdout, the rest of its stderr, and its exit code."""
    import fcntl
    import os

    made = ask_local(warm, server, [{"text": "Noted."}], "remember 5", "--json")
    thread = json.loads(made.stdout)["thread_id"]
    run = ask_local if local else ask_warm
    fd = os.open(warm.workspace / "threads" / thread / "turn.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        refused = run(warm, server, [{"text": "never"}], f"--thread={thread}", "--no-wait", "and?")
        assert refused.returncode == 1 and f"thread {thread} is busy" in refused.stderr, refused.stderr
        assert f"(pid {os.getpid()})" in refused.stderr

        before = warm.served()
        asked = len(server.requests)
        server.script.clear()
        server.push({"text": "5"})
        waiting = subprocess.Popen(
            warm.command("ask", f"--thread={thread}", "and?"),
            env={**warm.env, **({"GRAPHCHAT_WARM": "0"} if local else {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(warm.workspace),
        )
        said: list[str] = []
        reader = threading.Thread(target=lambda: said.append(str(waiting.stderr.readline())), daemon=True)
        reader.start()
        reader.join(timeout=90)  # the first line it writes: it waits for the lock
        assert said and "waiting for it to end" in said[0], said
        assert waiting.poll() is None and len(server.requests) == asked
        assert warm.served() == before + (0 if local else 1)
    finally:
        os.close(fd)  # the lock is released
    out, err = waiting.communicate(timeout=120)
    assert messages(server.requests[-1], "user") == ["remember 5", "and?"]
    return (
        refused.stderr.replace(thread, "<thread>"),
        said[0].replace(thread, "<thread>"),
        out,
        err,
        waiting.returncode,
    )


def test_a_busy_thread_is_refused_or_waited_for_alike(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    local = held_thread(warm, model_server, local=True)
    assert local[2:] == ("5\n", "", 0), local
    assert held_thread(warm, model_server, local=False) == local


def test_nothing_to_continue_and_an_unknown_thread_alike(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm.start()
    threads = warm.workspace / "threads"
    local = ask_local(warm, model_server, [{"text": "fresh"}], "-c", "hello")
    shutil.rmtree(threads)  # a fresh workspace again
    threads.mkdir()
    warmed = ask_warm(warm, model_server, [{"text": "fresh"}], "-c", "hello")
    assert_same(local, warmed)
    assert (local.returncode, local.stdout) == (0, "fresh\n")
    assert "there is no thread to continue yet" in local.stderr

    local, _ = both(warm, model_server, [{"text": "never"}], "--thread=nonexistent", "hello")
    assert local.returncode != 0 and "nonexistent" in local.stderr, local.stderr


# --- 4. errors ---------------------------------------------------------------------------------


def test_model_errors_are_reported_alike(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    local, _ = both(warm, model_server, [{"error": 401, "message": "bad key sk-t…"}], "hi")
    assert local.returncode != 0 and local.stdout == "", local.stderr
    local, _ = both(warm, model_server, [{"error": 500}] * 8, "hi")
    assert local.returncode != 0 and local.stdout == "", local.stderr
    local, _ = both(warm, model_server, [{"error": "context"}], "hi")
    assert local.returncode != 0 and local.stdout == "", local.stderr


def test_a_dropped_stream_and_a_rate_limit_are_the_same(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm.start()
    replies = [{"text": "a long answer that breaks", "dropmid": True}, {"text": "the whole answer"}]
    local, _ = both(warm, model_server, replies, "hi")
    assert local.returncode == 1 and "broke off mid-reply" in local.stderr, local.stderr
    assert local.stdout == ""  # a partial answer is not the deliverable (the thread keeps it)
    local, _ = both(warm, model_server, [{"error": 429, "retry_after": 0}, {"text": "after the wait"}], "hi")
    assert (local.returncode, local.stdout) == (0, "after the wait\n"), local.stderr


def test_odd_text_reaches_stdout_alike(warm: Warm, model_server: ScriptedModelServer) -> None:
    """Control characters, line separators, emoji, a carriage return: byte for byte on a pipe."""
    warm.start()
    text = "\x1b[31mred\x1b[0m caf\u00e9 \U0001f389\r\nnext\u2028line\ttab\x07 end"
    local, _ = both(warm, model_server, [{"text": text}], "say odd things")
    assert local.returncode == 0, local.stderr
    local, _ = both(warm, model_server, [{"text": "half \ud800 a surrogate"}], "say it")


def test_a_failing_tool_and_an_unknown_tool_are_the_same(
    tools_warm: Warm, model_server: ScriptedModelServer
) -> None:
    tools_warm.start()
    replies = [
        {"tool_calls": [{"name": "t__fail", "arguments": {"message": "disk on fire"}}]},
        {"text": "It failed."},
    ]
    local, _ = both(tools_warm, model_server, replies, "try it")
    assert (local.returncode, local.stdout) == (0, "It failed.\n"), local.stderr
    assert "disk on fire" in messages(model_server.requests[-1], "tool")[0]

    replies = [{"tool_calls": [{"name": "nosuch__tool", "arguments": {}}]}, {"text": "No such tool."}]
    local, _ = both(tools_warm, model_server, replies, "try it")
    assert (local.returncode, local.stdout) == (0, "No such tool.\n"), local.stderr
    assert "nosuch__tool" in messages(model_server.requests[-1], "tool")[0]


def test_a_server_crashing_mid_call_is_the_same_and_the_helper_goes_on(
    tools_warm: Warm, model_server: ScriptedModelServer
) -> None:
    tools_warm.start()
    replies = [{"tool_calls": [{"name": "t__crash", "arguments": {}}]}, {"text": "It crashed."}]
    local, _ = both(tools_warm, model_server, replies, "crash it")
    assert (local.returncode, local.stdout) == (0, "It crashed.\n"), local.stderr
    # the helper's server is started again for the next question
    replies = [
        {"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 0, "label": "up"}}]},
        {"text": "Up."},
    ]
    local, _ = both(tools_warm, model_server, replies, "again")
    assert (local.returncode, local.stdout) == (0, "Up.\n"), local.stderr
    assert json.loads(messages(model_server.requests[-1], "tool")[0]) == {"result": "up: slept 0.0s"}


# --- 5. a question nobody can answer parks the turn --------------------------------------------

ASK_COLOR = {
    "tool_calls": [
        {"name": "ask_user", "arguments": {"question": "Which color?", "options": ["red", "blue"]}}
    ]
}


def request_id(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 5, run.stderr
    match = re.search(r"request ([0-9a-f]{6,}): ", run.stderr)
    assert match, run.stderr
    return match.group(1)


def test_an_unanswerable_question_parks_alike_and_resumes_after_a_warm_park(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm.start()
    local, warmed = both(warm, model_server, [ASK_COLOR], "Paint it.")
    assert local.stdout == "" and "1. red" in local.stderr
    ids = {request_id(local), request_id(warmed)}
    local_json, warm_json = both(warm, model_server, [ASK_COLOR], "Paint it.", "--json")
    assert json.loads(warm_json.stdout)["parked"] is True
    ids |= {request_id(local_json), request_id(warm_json)}

    listed = warm.run_in_process("requests", "--json")
    assert listed.returncode == 0, listed.stderr
    requests = json.loads(listed.stdout)["requests"]
    assert {r["id"] for r in requests} == ids
    assert {r["mode"] for r in requests} == {"options"}

    answers = []
    for parked in (local, warmed):
        model_server.script.clear()
        model_server.push({"text": "Teal it is."})
        answered = warm.run_in_process("answer", request_id(parked), "teal")
        assert (answered.returncode, answered.stdout) == (0, "Teal it is.\n"), answered.stderr
        assert json.loads(messages(model_server.requests[-1], "tool")[0]) == {
            "answer": "teal",
            "answered": True,
        }
        answers.append(answered)
    assert masked(answers[0].stderr) == masked(answers[1].stderr)
    left = json.loads(warm.run_in_process("requests", "--json").stdout)["requests"]
    assert {r["id"] for r in left} == {request_id(local_json), request_id(warm_json)}

    # the thread of the warm park goes on as any other, through the helper
    (thread,) = [r["source"]["thread"] for r in requests if r["id"] == request_id(warmed)]
    more = ask_warm(warm, model_server, [{"text": "Still teal."}], f"--thread={thread}", "and now?")
    assert (more.returncode, more.stdout) == (0, "Still teal.\n"), more.stderr
    assert messages(model_server.requests[-1], "user") == ["Paint it.", "and now?"]
    assert messages(model_server.requests[-1], "assistant")[-1] == "Teal it is."


# --- 6. --answers, --yes, approvals without a terminal -----------------------------------------


def test_answers_file_answers_ask_user_alike(
    warm: Warm, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    warm.start()
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"Which color?": "blue"}))
    local, _ = both(
        warm, model_server, [ASK_COLOR, {"text": "Blue it is."}], "Paint it.", "--answers", str(answers)
    )
    assert (local.returncode, local.stdout) == (0, "Blue it is.\n"), local.stderr
    assert json.loads(messages(model_server.requests[-1], "tool")[0])["answer"] == "blue"


def test_yes_approves_a_sensitive_tool_and_without_it_nobody_can(
    tools_warm: Warm, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    tools_warm.start()
    target = tmp_path / "made.txt"
    replies = [{"tool_calls": [{"name": "t__touch", "arguments": {"path": str(target)}}]}, {"text": "Made."}]
    for run in (ask_local, ask_warm):
        done = run(tools_warm, model_server, replies, "make it", "--yes")
        assert (done.returncode, done.stdout) == (0, "Made.\n"), done.stderr
        assert target.exists()
        target.unlink()
        if run is ask_local:
            local = done
        else:
            assert_same(local, done)

    # no terminal, no --yes: the turn parks on the approval (exit 5), nothing runs
    local, warmed = both(tools_warm, model_server, replies, "make it")
    assert local.returncode == 5 and not target.exists(), local.stderr
    requests = json.loads(tools_warm.run_in_process("requests", "--json").stdout)["requests"]
    assert [r["kind"] for r in requests] == ["approval", "approval"]
    # --no-park: refused at once, the model told so
    local, warmed = both(tools_warm, model_server, replies, "make it", "--no-park")
    assert (local.returncode, local.stdout) == (0, "Made.\n"), local.stderr
    assert not target.exists()
    assert "t__touch" in messages(model_server.requests[-1], "tool")[0]


# --- 7. JSONL events ---------------------------------------------------------------------------


def test_jsonl_events_are_the_same(tools_warm: Warm, model_server: ScriptedModelServer) -> None:
    tools_warm.start()
    calls = [{"name": "t__slow", "arguments": {"seconds": 0, "label": x}} for x in ("a", "b")]
    env = {"GRAPHCHAT_EVENTS": "jsonl"}
    local, warmed = both(
        tools_warm, model_server, [{"text": "Checking.", "tool_calls": calls}, {"text": "ok"}], "go", env=env
    )
    assert local.stdout == "ok\n"
    events = [json.loads(line) for line in local.stderr.splitlines()]  # stderr: JSON lines only
    warm_events = [json.loads(line) for line in warmed.stderr.splitlines()]
    unmeasured = [{k: v for k, v in e.items() if k != "ms"} for e in events]
    assert [{k: v for k, v in e.items() if k != "ms"} for e in warm_events] == unmeasured
    kinds = [e["event"] for e in events]
    assert kinds.count("tool_started") == 2 and kinds.count("tool_finished") == 2, kinds
    assert {"event": "narration", "text": "Checking."} in events  # the narration too, as an event

    # a question nobody can answer parks the turn: the request is an event too
    local, warmed = both(tools_warm, model_server, [ASK_COLOR], "Paint it.", env=env)
    assert local.returncode == 5 and local.stdout == "", local.stderr
    events = [json.loads(line) for line in local.stderr.splitlines()]
    (opened,) = [e for e in events if e["event"] == "request_opened"]
    assert opened["question"] == "Which color?"


# --- 8. several clients at once ----------------------------------------------------------------


def echo_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A reply that depends on the request, not the order: first a call echoing the question,
    then the echoed result as the answer."""
    tool = [m for m in body["messages"] if m.get("role") == "tool"]
    question = messages(body, "user")[-1]
    if not tool:
        return {"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 0.3, "label": question}}]}
    return {"text": "answer: " + json.loads(str(tool[-1]["content"]))["result"]}


def test_three_clients_at_once_each_get_their_own_answer(
    tools_warm: Warm, model_server: ScriptedModelServer
) -> None:
    tools_warm.start()
    model_server.script.clear()
    model_server.push(*[echo_reply] * 6)
    procs = [
        subprocess.Popen(
            tools_warm.command("ask", f"q{i}", "--json"),
            env=tools_warm.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=str(tools_warm.workspace),
        )
        for i in range(3)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outs]
    docs = [json.loads(out) for out, _ in outs]
    assert [d["content"] for d in docs] == [f"answer: q{i}: slept 0.3s" for i in range(3)]
    assert len({d["thread_id"] for d in docs}) == 3
    assert tools_warm.served() == 3
    for i, doc in enumerate(docs):
        lines = (tools_warm.workspace / "threads" / doc["thread_id"] / "messages.jsonl").read_text()
        assert f"q{i}" in lines and all(f"q{j}" not in lines for j in range(3) if j != i)
