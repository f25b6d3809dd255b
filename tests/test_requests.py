"""Requests (issue 9): a question nobody can answer parks the run (exit 5); answering it later
resumes the run where it stopped, through the real command and real MCP servers."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GraphchatRunner, clean_env, run_states, spawn_in
from tests.servers.support import seed_cache, stdio, write_servers

CATALOG_SERVER = str(Path(__file__).resolve().parent / "servers" / "catalog_server.py")

SHIP = """identifier: ship
name: Ship
description: List the books, ask which channel, then wait a little.
input_schema:
  type: object
  properties:
    wait: {type: number}
steps:
  - id: E0
    tool_name: shop__list_items
    input: {category: books, count: 2}
  - id: E1
    tool_name: ask
    input:
      prompt: Which channel?
      output_schema:
        type: object
        properties:
          channel: {enum: [stable, beta], description: Release channel}
          count: {type: integer}
        required: [channel]
  - id: E2
    tool_name: tools__slow
    input: {seconds: "{{input.wait}}", label: "{{E1.answer.channel}}"}
output:
  books: "{{E0.items}}"
  channel: "{{E1.answer.channel}}"
  slept: "{{E2}}"
"""

EXPECTED = {
    "books": [{"id": "boo-0", "name": "books #0"}, {"id": "boo-1", "name": "books #1"}],
    "channel": "beta",
}


@pytest.fixture
def ship(workspace: Path) -> Path:
    """The plan, a shop server whose calls are logged, and a tools server whose `slow` writes
    its pid to a FIFO (`called`) before sleeping, so a test knows the call has started."""
    log = workspace / "calls.jsonl"
    called = workspace / "called.fifo"
    os.mkfifo(called)
    write_servers(
        workspace,
        {
            "shop": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(log)}),
            "tools": stdio(env={"GRAPHCHAT_TEST_CALLED": str(called)}),
        },
    )
    seed_cache(workspace)
    (workspace / "plans" / "ship.yaml").write_text(SHIP)
    return workspace


class FifoReader:
    """Reads the `slow` tool's FIFO in the background: each line is one call that started."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: list[str] = []
        self.event = threading.Event()
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            with open(self.path) as handle:  # blocks until a writer opens it
                data = handle.read()
            if data:
                self.lines.append(data.strip())
                self.event.set()

    def close(self) -> None:
        self.stop = True
        try:  # unblock the reader thread
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
        except OSError:
            pass


def shop_calls(workspace: Path) -> list[dict[str, Any]]:
    log = workspace / "calls.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def parked_id(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 5, run.stderr
    match = re.search(r"request ([0-9a-f]{6,}): ", run.stderr)
    assert match, run.stderr
    return match.group(1)


def test_a_headless_plan_parks_and_answering_resumes_it_without_rerunning_a_step(
    cli: GraphchatRunner, ship: Path
) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        run = cli("plan", "run", "ship", '{"wait": 0}')
        request_id = parked_id(run)
        assert run.stdout == ""
        assert "Which channel?" in run.stderr and f" answer {request_id} " in run.stderr
        listed = cli("requests", "--json")
        assert listed.returncode == 0, listed.stderr
        doc = json.loads(listed.stdout)
        assert doc["count"] == 1
        (request,) = doc["requests"]
        assert request["id"] == request_id and request["state"] == "open"
        assert request["kind"] == "question" and request["mode"] == "form"
        assert request["question"] == "Which channel?"
        assert request["source"] == {"plan": "ship", "step": "E1"}
        assert request["schema"]["required"] == ["channel"] and "opened_at" in request
        record = next((ship / "requests" / "runs").glob("*.json"))
        assert record.stat().st_mode & 0o777 == 0o600
        assert (ship / "requests" / f"{request_id}.json").stat().st_mode & 0o777 == 0o600

        answered = cli("answer", request_id, '{"channel": "beta"}')
        assert answered.returncode == 0, answered.stderr
        out = json.loads(answered.stdout)
        assert {k: out[k] for k in EXPECTED} == EXPECTED
        assert out["slept"]["result"].startswith("beta: slept 0")
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]  # once in total
        assert len(fifo.lines) == 1
        assert run_states(ship) == ["finished"]  # the run ended: kept as finished
        assert json.loads(cli("requests", "--json").stdout) == {"requests": [], "count": 0}
        done = json.loads(cli("requests", "--all", "--json").stdout)["requests"]
        assert done[0]["state"] == "answered" and done[0]["answer"] == {"channel": "beta"}
        again = cli("answer", request_id, '{"channel": "stable"}')
        assert again.returncode == 1 and "already answered" in again.stderr
    finally:
        fifo.close()


def test_json_parked_object_and_no_park(cli: GraphchatRunner, ship: Path) -> None:
    run = cli("plan", "run", "ship", '{"wait": 0}', "--json")
    assert run.returncode == 5, run.stderr
    doc = json.loads(run.stdout)
    assert doc["parked"] is True and len(doc["requests"]) == 1
    # the exact command, runnable as it is: every field with a value it accepts (never a literal …)
    assert re.fullmatch(
        rf"""graphchat (--home \S+ )?answer {doc["requests"][0]["id"]} '{{"channel": "stable", "count": 1}}'""",
        doc["resume"],
    )
    run = cli("plan", "run", "ship", '{"wait": 0}', "--no-park")
    assert run.returncode == 1
    assert "the question was not answered (unavailable)" in run.stderr


def test_an_invalid_answer_is_refused_naming_the_field_and_the_request_stays_open(
    cli: GraphchatRunner, ship: Path
) -> None:
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    bad = cli("answer", request_id, '{"channel": "beta", "count": "many"}')
    assert bad.returncode == 1, bad.stderr
    assert "field 'count'" in bad.stderr and "integer" in bad.stderr and "stays open" in bad.stderr
    bad = cli("answer", request_id, '{"channel": "weekly"}')
    assert bad.returncode == 1 and "field 'channel'" in bad.stderr
    wrong = cli("permit", request_id)
    assert wrong.returncode == 2 and f"graphchat answer {request_id}" in wrong.stderr
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    assert request["state"] == "open"
    assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]


def test_a_changed_plan_refuses_to_resume_naming_the_change(cli: GraphchatRunner, ship: Path) -> None:
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    plan = ship / "plans" / "ship.yaml"
    plan.write_text(SHIP.replace("count: 2}", "count: 3}"))
    run = cli("answer", request_id, '{"channel": "beta"}')
    assert run.returncode == 1
    assert "changed since the run parked" in run.stderr and "step E0 changed" in run.stderr
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    assert request["state"] == "open"  # the answer was refused, not used up
    plan.write_text(SHIP)
    fifo = FifoReader(ship / "called.fifo")
    try:
        run = cli("answer", request_id, '{"channel": "beta"}')
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["channel"] == "beta"
    finally:
        fifo.close()


@pytest.mark.process
def test_two_answers_at_once_resume_the_run_exactly_once(cli: GraphchatRunner, ship: Path) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
        first = spawn_in(ship, "answer", request_id, '{"channel": "beta"}')
        second = spawn_in(ship, "answer", request_id, '{"channel": "stable"}')
        results = [p.communicate(timeout=60) + (p.returncode,) for p in (first, second)]
        codes = sorted(code for _out, _err, code in results)
        assert codes == [0, 1], results
        loser = next(err for _out, err, code in results if code == 1)
        assert "already answered" in loser
        winner = next(out for out, _err, code in results if code == 0)
        assert json.loads(winner)["channel"] in ("beta", "stable")
        assert len(fifo.lines) == 1
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]
    finally:
        fifo.close()


@pytest.mark.process
def test_a_resumed_run_killed_midway_resumes_again_without_running_a_finished_step_twice(
    cli: GraphchatRunner, ship: Path
) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(cli("plan", "run", "ship", '{"wait": 3}'))
        resuming = spawn_in(ship, "answer", request_id, '{"channel": "beta"}')
        assert fifo.event.wait(60), "the slow tool never started"
        resuming.send_signal(signal.SIGKILL)
        resuming.communicate(timeout=30)
        server_pid = int(fifo.lines[0])
        try:
            os.kill(server_pid, signal.SIGKILL)  # the killed run's orphaned server
        except ProcessLookupError:
            pass
        (request,) = json.loads(cli("requests", "--all", "--json").stdout)["requests"]
        assert request["state"] == "answered"
        run = cli("resume", request_id)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert {k: out[k] for k in EXPECTED} == EXPECTED
        assert out["slept"]["result"].startswith("beta: slept 3")
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]  # never twice
        assert len(fifo.lines) == 2  # the killed call, then the resumed one
        gone = cli("resume", request_id)
        assert gone.returncode == 1 and "finished at" in gone.stderr and "nothing to resume" in gone.stderr
    finally:
        fifo.close()


def test_declining_a_plan_question_takes_the_unanswered_path(cli: GraphchatRunner, ship: Path) -> None:
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    run = cli("decline", request_id, "--reason", "not now")
    assert run.returncode == 1
    assert "the question was not answered (declined: not now)" in run.stderr
    assert run_states(ship) == ["failed"]


def test_prune_removes_finished_requests_whose_run_ended(cli: GraphchatRunner, ship: Path) -> None:
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    assert cli("decline", request_id, "--no-resume").returncode == 0
    assert cli("resume", request_id).returncode == 1  # declined: the run ends
    assert run_states(ship) == ["failed"]
    path = ship / "requests" / f"{request_id}.json"
    data = json.loads(path.read_text())
    data["settled_at"] = time.time() - 3 * 86400
    path.write_text(json.dumps(data))
    assert cli("requests", "prune", "--older-than", "5").returncode == 0
    assert path.exists()
    pruned = cli("requests", "prune", "--older-than", "2")
    assert pruned.returncode == 0 and "removed 1" in pruned.stderr
    assert not path.exists()


# --- a headless `ask` parks on an approval or an ask_user --------------------------------------


@pytest.fixture
def tools(workspace: Path) -> Path:
    write_servers(workspace, {"t": stdio()})
    seed_cache(workspace)
    return workspace


def tool_messages(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m.get("role") == "tool"]


def test_a_headless_ask_parks_on_a_destructive_tool_and_permit_runs_it(
    cli: GraphchatRunner, tools: Path, model_server: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made.txt"
    model_server.push(
        {"tool_calls": [{"name": "t__touch", "arguments": {"path": str(target)}}]},
        {"text": "I made the file."},
    )
    run = cli("ask", "Make the file.", env=model_server.env())
    request_id = parked_id(run)
    assert run.stdout == "" and not target.exists()
    assert len(model_server.requests) == 1
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    assert request["kind"] == "approval" and request["mode"] == "approval"
    assert request["source"]["tool"] == "t__touch" and request["source"]["arguments"] == {"path": str(target)}
    thread_id = request["source"]["thread"]
    shown = cli("threads", "show", thread_id)
    assert f"waiting for a person: request {request_id}" in shown.stdout, shown.stderr
    busy = cli("ask", "Anything else?", "--thread", thread_id, env=model_server.env())
    assert busy.returncode == 1 and f"waits on request {request_id}" in busy.stderr
    wrong = cli("answer", request_id, "yes", env=model_server.env())
    assert wrong.returncode == 2 and f"graphchat permit {request_id}" in wrong.stderr

    permitted = cli("permit", request_id, "--always", env=model_server.env())
    assert permitted.returncode == 0, permitted.stderr
    assert permitted.stdout == "I made the file.\n"
    assert target.exists()
    assert "t__touch" in (tools / "graphchat.yaml").read_text()  # --always: remembered
    assert len(model_server.requests) == 2
    assert [json.loads(m) for m in tool_messages(model_server.requests[1])] == [
        {"result": f"touched {target}"}
    ]
    # the thread goes on as any other
    model_server.push({"text": "Nothing else."})
    more = cli("ask", "Anything else?", "--thread", thread_id, env=model_server.env())
    assert more.returncode == 0 and more.stdout == "Nothing else.\n", more.stderr
    # the resumed turn is kept as a finished run of its thread (issue 19: retention)
    (run,) = json.loads(cli("runs", "--json").stdout)["runs"]
    assert (run["thread"], run["plan"], run["state"], run["exit"]) == (thread_id, None, "finished", 0)
    again = cli("resume", run["id"])
    assert again.returncode == 1 and f"run {run['id']} finished at " in again.stderr


def test_deny_gives_the_model_a_refusal(
    cli: GraphchatRunner, tools: Path, model_server: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made.txt"
    model_server.push(
        {"tool_calls": [{"name": "t__touch", "arguments": {"path": str(target)}}]},
        {"text": "I was not allowed to."},
    )
    request_id = parked_id(cli("ask", "Make the file.", env=model_server.env()))
    denied = cli("deny", request_id, "--reason", "not today", env=model_server.env())
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout == "I was not allowed to.\n"
    assert not target.exists()
    (refusal,) = tool_messages(model_server.requests[1])
    assert "t__touch was not run: the user refused it (not today)" in refusal


def test_ask_user_with_options_parks_and_takes_a_free_answer_as_typed(
    cli: GraphchatRunner, workspace: Path, model_server: Any
) -> None:
    model_server.push(
        {
            "tool_calls": [
                {"name": "ask_user", "arguments": {"question": "Which color?", "options": ["red", "blue"]}}
            ]
        },
        {"text": "Teal it is."},
    )
    run = cli("ask", "Paint it.", env=model_server.env())
    request_id = parked_id(run)
    assert "1. red" in run.stderr and "2. blue" in run.stderr
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    assert request["mode"] == "options" and request["options"] == ["red", "blue"]
    answered = cli("answer", request_id, '["teal", 2]', env=model_server.env())
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "Teal it is.\n"
    (result,) = tool_messages(model_server.requests[1])
    assert json.loads(result) == {"answer": '["teal", 2]', "answered": True}


def test_jsonl_events_carry_the_request_and_stderr_stays_json(cli: GraphchatRunner, ship: Path) -> None:
    run = cli("plan", "run", "ship", '{"wait": 0}', env={"GRAPHCHAT_EVENTS": "jsonl"})
    assert run.returncode == 5, run.stderr
    events = [json.loads(line) for line in run.stderr.splitlines()]
    (opened,) = [e for e in events if e["event"] == "request_opened"]
    assert opened["question"] == "Which channel?" and opened["state"] == "open"


# --- chat shows what waits and answers it inline -----------------------------------------------

from tests.chat.test_pty import Spawn, leave, send_message  # noqa: E402
from tests.chat.test_pty import chat as chat  # noqa: E402,F401 - the pseudo-terminal fixture


def test_chat_shows_waiting_requests_and_answers_one_inline(
    cli: GraphchatRunner, ship: Path, chat: Spawn
) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
        child = chat()
        child.expect_exact("1 request waits: /requests")
        send_message(child, "/requests")
        child.expect_exact(f"{request_id}  form: Which channel?")
        send_message(child, f'/requests {request_id} {{"channel": "beta"}}')
        child.expect_exact(f"request {request_id} answered")
        out = leave(child)
        assert '"channel": "beta"' in out  # what the resumed run printed, as a block
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]
        assert json.loads(cli("requests", "--json").stdout)["count"] == 0
    finally:
        fifo.close()


PICK = """identifier: pick
name: Pick
description: Look up each item and ask whether to keep it.
steps:
  - id: E0
    tool_name: map
    input:
      over: [a, b, c]
      concurrency: 2
      do:
        - id: G
          tool_name: shop__get_item
          input: {id: "boo-{{index}}"}
        - id: Q
          tool_name: ask
          input:
            prompt: "Keep {{item}}?"
            output_schema:
              type: object
              properties: {keep: {type: boolean}}
              required: [keep]
output:
  kept: "{{E0.results}}"
"""


def test_parking_inside_a_map_keeps_the_finished_items(
    cli: GraphchatRunner, ship: Path, tmp_path: Path
) -> None:
    (ship / "plans" / "pick.yaml").write_text(PICK)
    answers = tmp_path / "answers.yaml"
    answers.write_text("'Keep a?': {keep: true}\n'Keep c?': {keep: false}\n")
    run = cli("plan", "run", "pick", "--answers", str(answers))
    request_id = parked_id(run)
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    assert request["question"] == "Keep b?" and request["source"]["step"] == "E0/do/Q[1]"
    assert sorted(c["args"]["id"] for c in shop_calls(ship)) == ["boo-0", "boo-1", "boo-2"]
    answered = cli("answer", request_id, "yes")  # a one-field form takes a bare value
    assert answered.returncode == 0, answered.stderr
    kept = [r["answer"]["keep"] for r in json.loads(answered.stdout)["kept"]]
    assert kept == [True, True, False]
    # the finished items a and c were kept; of b, in flight, the body step that had finished
    # before its question is not run again either (issue 19: frames at every depth)
    assert sorted(c["args"]["id"] for c in shop_calls(ship)) == ["boo-0", "boo-1", "boo-2"]


def test_two_waiting_items_resume_when_the_last_is_answered(
    cli: GraphchatRunner, ship: Path, tmp_path: Path
) -> None:
    (ship / "plans" / "pick.yaml").write_text(PICK)
    answers = tmp_path / "answers.yaml"
    answers.write_text("'Keep a?': {keep: true}\n")
    run = cli("plan", "run", "pick", "--answers", str(answers))
    assert run.returncode == 5, run.stderr
    waiting = json.loads(cli("requests", "--json").stdout)["requests"]
    assert sorted(r["question"] for r in waiting) == ["Keep b?", "Keep c?"]
    by_question = {r["question"]: r["id"] for r in waiting}
    first = cli("answer", by_question["Keep c?"], '{"keep": false}')
    assert first.returncode == 0 and first.stdout == ""
    assert f"1 more still wait: {by_question['Keep b?']}" in first.stderr
    last = cli("answer", by_question["Keep b?"], "no")
    assert last.returncode == 0, last.stderr
    assert [r["answer"]["keep"] for r in json.loads(last.stdout)["kept"]] == [True, False, False]


def test_an_expired_question_resumes_down_the_unanswered_path(cli: GraphchatRunner, ship: Path) -> None:
    plan = SHIP.replace("      prompt: Which channel?", "      prompt: Which channel?\n      timeout: 0.001")
    plan = plan.replace(
        "        required: [channel]", "        required: [channel]\n      when_unanswered: fail"
    )
    (ship / "plans" / "ship.yaml").write_text(plan)
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    (request,) = json.loads(cli("requests", "--all", "--json").stdout)["requests"]
    assert request["id"] == request_id and request["state"] == "expired"
    late = cli("answer", request_id, '{"channel": "beta"}')
    assert late.returncode == 1 and "already expired" in late.stderr
    run = cli("resume", request_id)
    assert run.returncode == 1
    assert "the question was not answered (expired)" in run.stderr


@pytest.mark.process
def test_answer_without_a_value_asks_on_the_terminal(cli: GraphchatRunner, ship: Path) -> None:
    import pexpect

    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
        child = pexpect.spawn(
            sys.executable,
            ["-m", "graphchat", "--home", str(ship), "answer", request_id],
            env=clean_env({"TERM": "dumb", "NO_COLOR": "1"}, ship.parent),
            cwd=str(ship),
            encoding="utf-8",
            timeout=60,
        )
        child.expect_exact("? Which channel?")
        child.expect_exact("channel (1-")
        child.sendline("beta")
        child.expect_exact("count (integer)")
        child.sendline("")
        child.expect(pexpect.EOF)
        child.close()
        assert child.exitstatus == 0, child.before
        assert '"channel": "beta"' in (child.before or "")
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]
    finally:
        fifo.close()


# --- a thread with a pending request (issue 19, build 6) ----------------------------------------


def test_ask_on_a_parked_thread_refuses_naming_the_request_and_the_command_that_answers_it(
    cli: GraphchatRunner, workspace: Path, model_server: Any
) -> None:
    model_server.push(
        {
            "tool_calls": [
                {"name": "ask_user", "arguments": {"question": "Which color?", "options": ["red", "blue"]}}
            ]
        },
    )
    request_id = parked_id(cli("ask", "Paint it.", env=model_server.env()))
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    thread_id = request["source"]["thread"]
    for how in (["--thread", thread_id], ["-c"]):
        busy = cli("ask", *how, "Anything else?", env=model_server.env())
        assert busy.returncode == 1, busy.stderr
        assert f"thread {thread_id} waits on request {request_id}: Which color?" in busy.stderr
        assert re.search(rf"answer it: graphchat (--home \S+ )?answer {request_id} VALUE\n", busy.stderr)
        assert "VALUE: one of red, blue (or its number)" in busy.stderr
        assert f"chat --thread {thread_id}" in busy.stderr and "…" not in busy.stderr
    assert len(model_server.requests) == 1  # nothing was sent for the refused questions
    # answered but not resumed: the command named is the one that resumes it
    assert cli("answer", request_id, "blue", "--no-resume").returncode == 0
    busy = cli("ask", "-c", "Anything else?", env=model_server.env())
    assert busy.returncode == 1
    assert re.search(rf"resume the turn: graphchat (--home \S+ )?resume {request_id}\n", busy.stderr)


@pytest.mark.process
def test_chat_on_a_parked_thread_asks_the_waiting_question_first_and_the_model_gets_the_answer(
    cli: GraphchatRunner, workspace: Path, model_server: Any, chat: Spawn
) -> None:
    model_server.push(
        {
            "tool_calls": [
                {"name": "ask_user", "arguments": {"question": "Which color?", "options": ["red", "blue"]}}
            ]
        },
        {"text": "Blue it is."},
        {"text": "Nothing else to paint."},
    )
    request_id = parked_id(cli("ask", "Paint it.", env=model_server.env()))
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    thread_id = request["source"]["thread"]
    child = chat("--thread", thread_id)
    child.expect_exact(f"this thread waits for your answer (request {request_id})")
    child.expect_exact("? Which color?")
    child.expect_exact("answer>")
    child.sendline("2")
    child.expect_exact("Blue it is.")
    send_message(child, "Anything else?")
    child.expect_exact("Nothing else to paint.")
    leave(child)
    assert len(model_server.requests) == 3
    (result,) = tool_messages(model_server.requests[1])
    assert json.loads(result) == {"answer": "blue", "answered": True}
    assert json.loads(cli("requests", "--json").stdout)["count"] == 0
    assert run_states(workspace) == ["finished"]  # the chat took the turn over: its run ended
    # the next turn of the thread carries the answered call, not an "interrupted" one
    last = model_server.requests[2]["messages"]
    assert [json.loads(m["content"]) for m in last if m["role"] == "tool"] == [
        {"answer": "blue", "answered": True}
    ]


# --- claims that cannot stick (issue 19, build 7) ------------------------------------------------


def dead_pid() -> int:
    """The pid of a process that has ended."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def start_time(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[19]


def write_claim(workspace: Path, request_id: str, holder: dict[str, Any]) -> Path:
    path = workspace / "requests" / f"{request_id}.claim"
    path.write_text(json.dumps(holder))
    return path


def test_a_stale_claim_is_taken_over_by_the_next_answer(cli: GraphchatRunner, ship: Path) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
        # as a process killed between claiming and settling leaves it: claimed, still open
        dead = dead_pid()
        write_claim(ship, request_id, {"pid": dead, "start": "1", "state": "answered", "answer": {}})
        (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
        assert request["state"] == "open"
        run = cli("answer", request_id, '{"channel": "beta"}')
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["channel"] == "beta"
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]
        claim = json.loads((ship / "requests" / f"{request_id}.claim").read_text())
        assert claim["state"] == "answered" and claim["answer"] == {"channel": "beta"}
        # the claim is the answerer's own (run in process: this process, its start time), not the dead one's
        assert claim["pid"] == os.getpid() != dead and claim["start"] == start_time(os.getpid())
    finally:
        fifo.close()


def test_resume_finishes_the_answer_a_dead_claimer_recorded(cli: GraphchatRunner, ship: Path) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
        write_claim(
            ship,
            request_id,
            {"pid": dead_pid(), "state": "answered", "answer": {"channel": "beta"}, "reason": None},
        )
        run = cli("resume", request_id)
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["channel"] == "beta"
        done = json.loads(cli("requests", "--all", "--json").stdout)["requests"]
        assert done[0]["state"] == "answered" and done[0]["answer"] == {"channel": "beta"}
    finally:
        fifo.close()


def test_a_live_claim_is_respected_and_a_reused_pid_is_not_taken_for_it(
    cli: GraphchatRunner, ship: Path
) -> None:
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    holder = subprocess.Popen(["sleep", "120"])
    try:
        write_claim(
            ship, request_id, {"pid": holder.pid, "start": start_time(holder.pid), "state": "answered"}
        )
        run = cli("answer", request_id, '{"channel": "beta"}')
        assert run.returncode == 1, run.stderr
        assert f"already answered (process {holder.pid} is settling it)" in run.stderr
        resumed = cli("resume", request_id)
        assert resumed.returncode == 1 and "still open" in resumed.stderr
        (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
        assert request["state"] == "open"
        assert shop_calls(ship) and len(shop_calls(ship)) == 1
        # the same pid with another start time is another process: the claim is stale
        write_claim(ship, request_id, {"pid": holder.pid, "start": "1", "state": "answered"})
        fifo = FifoReader(ship / "called.fifo")
        try:
            run = cli("answer", request_id, '{"channel": "stable"}')
            assert run.returncode == 0, run.stderr
            assert json.loads(run.stdout)["channel"] == "stable"
        finally:
            fifo.close()
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.process
def test_a_resuming_answer_killed_before_it_settles_leaves_a_claim_the_next_answer_takes_over(
    cli: GraphchatRunner, ship: Path
) -> None:
    """kill -9 of the process that claimed: its claim holds its pid and start time; once it is
    gone, the claim no longer blocks the request."""
    request_id = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    write_claim(ship, request_id, {"pid": sleeper.pid, "start": start_time(sleeper.pid), "state": "answered"})
    assert cli("answer", request_id, '{"channel": "beta"}').returncode == 1
    sleeper.send_signal(signal.SIGKILL)
    sleeper.wait()
    fifo = FifoReader(ship / "called.fifo")
    try:
        run = cli("answer", request_id, '{"channel": "beta"}')
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["channel"] == "beta"
    finally:
        fifo.close()


# --- how requests read (issue 19, build 4; issue 24, item 4) -------------------------------------


def test_a_parked_question_lists_its_allowed_values_and_the_exact_command(
    cli: GraphchatRunner, ship: Path
) -> None:
    run = cli("plan", "run", "ship", '{"wait": 0}')
    request_id = parked_id(run)
    assert "…" not in run.stderr
    assert re.search(
        rf"""answer it: graphchat (--home \S+ )?answer {request_id} '{{"channel": "stable", "count": 1}}'\n""",
        run.stderr,
    )
    assert "fields: channel (required): one of stable, beta — Release channel; count: integer" in run.stderr
    listed = cli("requests")
    assert listed.returncode == 0 and "…" not in listed.stdout
    assert f"{request_id}  form     ship E1: Which channel?" in listed.stdout
    assert "one of stable, beta" in listed.stdout
    # the example command of the hint is an answer the request takes
    command = re.search(r"answer it: graphchat (?:--home \S+ )?answer \S+ '(.*)'\n", run.stderr)
    assert command is not None
    fifo = FifoReader(ship / "called.fifo")
    try:
        answered = cli("answer", request_id, command.group(1))
        assert answered.returncode == 0, answered.stderr
        assert json.loads(answered.stdout)["channel"] == "stable"
    finally:
        fifo.close()


def test_requests_text_shows_an_approvals_tool_and_every_argument(
    cli: GraphchatRunner, tools: Path, model_server: Any, tmp_path: Path
) -> None:
    target = tmp_path / "notes.txt"
    arguments = {"path": str(target), "text": "first line\nsecond line"}
    model_server.push({"tool_calls": [{"name": "t__note", "arguments": arguments}]}, {"text": "Noted."})
    run = cli("ask", "Note it.", env=model_server.env())
    request_id = parked_id(run)
    assert "…" not in run.stderr and "tool: t__note" in run.stderr
    listed = cli("requests")
    assert listed.returncode == 0, listed.stderr
    out = listed.stdout
    assert f"{request_id}  approval" in out and "Allow t__note (write) with these arguments?" in out
    assert "    tool: t__note\n    arguments:\n" in out
    assert f'"path": "{target}"' in out and '"text": "first line\\nsecond line"' in out
    assert re.search(rf"answer it: graphchat (--home \S+ )?permit {request_id}\n", out)
    assert re.search(rf"or refuse it: graphchat (--home \S+ )?deny {request_id} --reason TEXT\n", out)
    assert not target.exists()


# --- the seeds' remaining rules (issue 19, build 8) ----------------------------------------------

FEEDBACK = """identifier: feedback
name: Feedback
description: Ask for a rating, with a hint; a decline goes on with the default.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: How was it?
      hint: "1 is poor, 5 is great ({{input.who}})"
      output_schema:
        type: object
        properties:
          rating: {type: integer}
        required: [rating]
      when_unanswered: default
      default: {rating: 3}
output:
  rating: "{{E0}}"
"""


@pytest.mark.process
def test_an_ask_steps_hint_is_shown_under_the_question(cli: GraphchatRunner, workspace: Path) -> None:
    import pexpect

    plan = FEEDBACK.replace("      when_unanswered: default\n      default: {rating: 3}\n", "")
    (workspace / "plans" / "feedback.yaml").write_text(plan)
    run = cli("plan", "run", "feedback", '{"who": "Ada"}')
    request_id = parked_id(run)
    assert "How was it?\n    1 is poor, 5 is great (Ada)\n" in run.stderr
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    assert request["id"] == request_id and request["hint"] == "1 is poor, 5 is great (Ada)"
    assert "How was it?\n    1 is poor, 5 is great (Ada)\n" in cli("requests").stdout
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "plan", "run", "feedback", '{"who": "Bo"}'],
        env=clean_env({"TERM": "dumb", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=60,
    )
    child.expect_exact("? How was it?")
    child.expect_exact("1 is poor, 5 is great (Bo)")  # on the terminal too, under the question
    child.sendline("4")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert '"rating": 4' in (child.before or "")


@pytest.mark.process
def test_a_declined_question_reaches_the_plan_as_declined_with_its_reason(
    cli: GraphchatRunner, workspace: Path
) -> None:
    import pexpect

    (workspace / "plans" / "feedback.yaml").write_text(FEEDBACK)
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "plan", "run", "feedback", '{"who": "Bo"}'],
        env=clean_env({"TERM": "dumb", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=60,
    )
    child.expect_exact("? How was it?")
    child.expect_exact("rating (integer")
    child.sendline("")  # a blank line on a required field: the person declines
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    out = (child.before or "").replace("\r\n", "\n")
    assert "not answered (declined); using the default" in out
    result = json.loads(out[out.index("{\n") :])["rating"]
    assert result == {"answer": {"rating": 3}, "answered": False, "declined": True, "reason": "declined"}
    # nobody to ask is not a decline
    run = cli("plan", "run", "feedback", '{"who": "Ada"}')
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["rating"] == {
        "answer": {"rating": 3},
        "answered": False,
        "reason": "unavailable",
    }


def test_at_most_twenty_options(cli: GraphchatRunner, workspace: Path, model_server: Any) -> None:
    many = [f"o{i}" for i in range(21)]
    plan = FEEDBACK.replace("rating: {type: integer}", f"rating: {{enum: {json.dumps(many)}}}")
    plan = plan.replace("default: {rating: 3}", "default: {rating: o0}")
    (workspace / "plans" / "feedback.yaml").write_text(plan)
    checked = cli("plan", "validate", "feedback")
    assert checked.returncode == 1, checked.stderr
    assert "property 'rating': at most 20 options, got 21" in checked.stderr
    model_server.push(
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which?", "options": many}}]},
        {"text": "I will ask with fewer."},
    )
    run = cli("ask", "Pick one.", env=model_server.env())
    assert run.returncode == 0, run.stderr  # not parked: the model is told to ask with fewer
    assert json.loads(cli("requests", "--json").stdout)["count"] == 0
    (result,) = tool_messages(model_server.requests[1])
    assert "ask_user takes at most 20 options, got 21" in result


def test_requests_of_one_run_and_cancelling_a_parked_plan(cli: GraphchatRunner, ship: Path) -> None:
    first = parked_id(cli("plan", "run", "ship", '{"wait": 0}'))
    second = parked_id(cli("plan", "run", "ship", '{"wait": 1}'))
    doc = json.loads(cli("requests", "--json").stdout)
    runs = {r["id"]: r["run"] for r in doc["requests"]}
    assert set(runs) == {first, second} and runs[first] != runs[second]
    only = json.loads(cli("requests", "--run", runs[first], "--json").stdout)
    assert [r["id"] for r in only["requests"]] == [first] and only["count"] == 1
    text = cli("requests", "--run", runs[second]).stdout
    assert second in text and first not in text
    unknown = cli("requests", "--run", "abcdef123456")
    assert unknown.returncode == 1 and "no run or thread 'abcdef123456'" in unknown.stderr

    cancelled = cli("cancel", runs[first])
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"cancelled the parked run {runs[first]} (plan 'ship')" in cancelled.stderr
    assert f"requests cancelled: {first}" in cancelled.stderr
    assert not (ship / "requests" / "runs" / f"{runs[first]}.json").exists()
    settled = {r["id"]: r for r in json.loads(cli("requests", "--all", "--json").stdout)["requests"]}
    assert settled[first]["state"] == "cancelled" and settled[second]["state"] == "open"
    late = cli("answer", first, '{"channel": "beta"}')
    assert late.returncode == 1 and "already cancelled" in late.stderr
    gone = cli("cancel", runs[first])
    assert gone.returncode == 1 and "no parked run" in gone.stderr
    # a request id names its run too
    assert cli("cancel", second).returncode == 0
    assert json.loads(cli("requests", "--json").stdout)["count"] == 0
    assert [c["tool"] for c in shop_calls(ship)] == ["list_items", "list_items"]


def test_cancelling_a_parked_ask_turn_is_recorded_in_its_thread_which_goes_on(
    cli: GraphchatRunner, tools: Path, model_server: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made.txt"
    model_server.push(
        {"tool_calls": [{"name": "t__touch", "arguments": {"path": str(target)}}]},
        {"text": "Something else, then."},
    )
    request_id = parked_id(cli("ask", "Make the file.", env=model_server.env()))
    (request,) = json.loads(cli("requests", "--json").stdout)["requests"]
    thread_id = request["source"]["thread"]
    assert [
        r["id"] for r in json.loads(cli("requests", "--run", thread_id, "--json").stdout)["requests"]
    ] == [request_id]
    cancelled = cli("cancel", thread_id)
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"ask turn of thread {thread_id}" in cancelled.stderr
    assert not list((tools / "requests" / "runs").glob("*.json"))
    shown = cli("threads", "show", thread_id, "--json")
    assert shown.returncode == 0, shown.stderr
    assert "cancelled (graphchat cancel): requests " + request_id in shown.stdout
    assert not target.exists()
    more = cli("ask", "--thread", thread_id, "Do something else.", env=model_server.env())
    assert more.returncode == 0 and more.stdout == "Something else, then.\n", more.stderr
    assert len(model_server.requests) == 2
