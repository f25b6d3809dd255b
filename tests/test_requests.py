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

from tests.conftest import GraphchatRunner, clean_env
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


def spawn(workspace: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), *args],
        env=clean_env(None, workspace.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(workspace),
    )


def test_a_headless_plan_parks_and_answering_resumes_it_without_rerunning_a_step(
    graphchat: GraphchatRunner, ship: Path
) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        run = graphchat("plan", "run", "ship", '{"wait": 0}')
        request_id = parked_id(run)
        assert run.stdout == ""
        assert "Which channel?" in run.stderr and f" answer {request_id} " in run.stderr
        listed = graphchat("requests", "--json")
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

        answered = graphchat("answer", request_id, '{"channel": "beta"}')
        assert answered.returncode == 0, answered.stderr
        out = json.loads(answered.stdout)
        assert {k: out[k] for k in EXPECTED} == EXPECTED
        assert out["slept"]["result"].startswith("beta: slept 0")
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]  # once in total
        assert len(fifo.lines) == 1
        assert not list((ship / "requests" / "runs").glob("*.json"))  # the run ended
        assert json.loads(graphchat("requests", "--json").stdout) == {"requests": [], "count": 0}
        done = json.loads(graphchat("requests", "--all", "--json").stdout)["requests"]
        assert done[0]["state"] == "answered" and done[0]["answer"] == {"channel": "beta"}
        again = graphchat("answer", request_id, '{"channel": "stable"}')
        assert again.returncode == 1 and "already answered" in again.stderr
    finally:
        fifo.close()


def test_json_parked_object_and_no_park(graphchat: GraphchatRunner, ship: Path) -> None:
    run = graphchat("plan", "run", "ship", '{"wait": 0}', "--json")
    assert run.returncode == 5, run.stderr
    doc = json.loads(run.stdout)
    assert doc["parked"] is True and len(doc["requests"]) == 1
    assert re.fullmatch(rf"graphchat (--home \S+ )?answer {doc['requests'][0]['id']} …", doc["resume"])
    run = graphchat("plan", "run", "ship", '{"wait": 0}', "--no-park")
    assert run.returncode == 1
    assert "the question was not answered (unavailable)" in run.stderr


def test_an_invalid_answer_is_refused_naming_the_field_and_the_request_stays_open(
    graphchat: GraphchatRunner, ship: Path
) -> None:
    request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
    bad = graphchat("answer", request_id, '{"channel": "beta", "count": "many"}')
    assert bad.returncode == 1, bad.stderr
    assert "field 'count'" in bad.stderr and "integer" in bad.stderr and "stays open" in bad.stderr
    bad = graphchat("answer", request_id, '{"channel": "weekly"}')
    assert bad.returncode == 1 and "field 'channel'" in bad.stderr
    wrong = graphchat("permit", request_id)
    assert wrong.returncode == 2 and f"graphchat answer {request_id}" in wrong.stderr
    (request,) = json.loads(graphchat("requests", "--json").stdout)["requests"]
    assert request["state"] == "open"
    assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]


def test_a_changed_plan_refuses_to_resume_naming_the_change(graphchat: GraphchatRunner, ship: Path) -> None:
    request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
    plan = ship / "plans" / "ship.yaml"
    plan.write_text(SHIP.replace("count: 2}", "count: 3}"))
    run = graphchat("answer", request_id, '{"channel": "beta"}')
    assert run.returncode == 1
    assert "changed since the run parked" in run.stderr and "step E0 changed" in run.stderr
    (request,) = json.loads(graphchat("requests", "--json").stdout)["requests"]
    assert request["state"] == "open"  # the answer was refused, not used up
    plan.write_text(SHIP)
    fifo = FifoReader(ship / "called.fifo")
    try:
        run = graphchat("answer", request_id, '{"channel": "beta"}')
        assert run.returncode == 0, run.stderr
        assert json.loads(run.stdout)["channel"] == "beta"
    finally:
        fifo.close()


def test_two_answers_at_once_resume_the_run_exactly_once(graphchat: GraphchatRunner, ship: Path) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
        first = spawn(ship, "answer", request_id, '{"channel": "beta"}')
        second = spawn(ship, "answer", request_id, '{"channel": "stable"}')
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


def test_a_resumed_run_killed_midway_resumes_again_without_running_a_finished_step_twice(
    graphchat: GraphchatRunner, ship: Path
) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 3}'))
        resuming = spawn(ship, "answer", request_id, '{"channel": "beta"}')
        assert fifo.event.wait(60), "the slow tool never started"
        resuming.send_signal(signal.SIGKILL)
        resuming.communicate(timeout=30)
        server_pid = int(fifo.lines[0])
        try:
            os.kill(server_pid, signal.SIGKILL)  # the killed run's orphaned server
        except ProcessLookupError:
            pass
        (request,) = json.loads(graphchat("requests", "--all", "--json").stdout)["requests"]
        assert request["state"] == "answered"
        run = graphchat("resume", request_id)
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert {k: out[k] for k in EXPECTED} == EXPECTED
        assert out["slept"]["result"].startswith("beta: slept 3")
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]  # never twice
        assert len(fifo.lines) == 2  # the killed call, then the resumed one
        gone = graphchat("resume", request_id)
        assert gone.returncode == 1 and "not parked" in gone.stderr
    finally:
        fifo.close()


def test_declining_a_plan_question_takes_the_unanswered_path(graphchat: GraphchatRunner, ship: Path) -> None:
    request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
    run = graphchat("decline", request_id, "--reason", "not now")
    assert run.returncode == 1
    assert "the question was not answered (declined)" in run.stderr
    assert not list((ship / "requests" / "runs").glob("*.json"))


def test_prune_removes_finished_requests(graphchat: GraphchatRunner, ship: Path) -> None:
    request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
    assert graphchat("decline", request_id, "--no-resume").returncode == 0
    path = ship / "requests" / f"{request_id}.json"
    data = json.loads(path.read_text())
    data["settled_at"] = time.time() - 3 * 86400
    path.write_text(json.dumps(data))
    assert graphchat("requests", "prune", "--older-than", "5").returncode == 0
    assert path.exists()
    pruned = graphchat("requests", "prune", "--older-than", "2")
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
    graphchat: GraphchatRunner, tools: Path, model_server: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made.txt"
    model_server.push(
        {"tool_calls": [{"name": "t__touch", "arguments": {"path": str(target)}}]},
        {"text": "I made the file."},
    )
    run = graphchat("ask", "Make the file.", env=model_server.env())
    request_id = parked_id(run)
    assert run.stdout == "" and not target.exists()
    assert len(model_server.requests) == 1
    (request,) = json.loads(graphchat("requests", "--json").stdout)["requests"]
    assert request["kind"] == "approval" and request["mode"] == "approval"
    assert request["source"]["tool"] == "t__touch" and request["source"]["arguments"] == {"path": str(target)}
    thread_id = request["source"]["thread"]
    shown = graphchat("threads", "show", thread_id)
    assert f"waiting for a person: request {request_id}" in shown.stdout, shown.stderr
    busy = graphchat("ask", "Anything else?", "--thread", thread_id, env=model_server.env())
    assert busy.returncode == 1 and f"waits on request {request_id}" in busy.stderr
    wrong = graphchat("answer", request_id, "yes", env=model_server.env())
    assert wrong.returncode == 2 and f"graphchat permit {request_id}" in wrong.stderr

    permitted = graphchat("permit", request_id, "--always", env=model_server.env())
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
    more = graphchat("ask", "Anything else?", "--thread", thread_id, env=model_server.env())
    assert more.returncode == 0 and more.stdout == "Nothing else.\n", more.stderr


def test_deny_gives_the_model_a_refusal(
    graphchat: GraphchatRunner, tools: Path, model_server: Any, tmp_path: Path
) -> None:
    target = tmp_path / "made.txt"
    model_server.push(
        {"tool_calls": [{"name": "t__touch", "arguments": {"path": str(target)}}]},
        {"text": "I was not allowed to."},
    )
    request_id = parked_id(graphchat("ask", "Make the file.", env=model_server.env()))
    denied = graphchat("deny", request_id, "--reason", "not today", env=model_server.env())
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout == "I was not allowed to.\n"
    assert not target.exists()
    (refusal,) = tool_messages(model_server.requests[1])
    assert "t__touch was not run: the user refused it (not today)" in refusal


def test_ask_user_with_options_parks_and_takes_a_free_answer_as_typed(
    graphchat: GraphchatRunner, workspace: Path, model_server: Any
) -> None:
    model_server.push(
        {
            "tool_calls": [
                {"name": "ask_user", "arguments": {"question": "Which color?", "options": ["red", "blue"]}}
            ]
        },
        {"text": "Teal it is."},
    )
    run = graphchat("ask", "Paint it.", env=model_server.env())
    request_id = parked_id(run)
    assert "1. red" in run.stderr and "2. blue" in run.stderr
    (request,) = json.loads(graphchat("requests", "--json").stdout)["requests"]
    assert request["mode"] == "options" and request["options"] == ["red", "blue"]
    answered = graphchat("answer", request_id, '["teal", 2]', env=model_server.env())
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout == "Teal it is.\n"
    (result,) = tool_messages(model_server.requests[1])
    assert json.loads(result) == {"answer": '["teal", 2]', "answered": True}


def test_jsonl_events_carry_the_request_and_stderr_stays_json(graphchat: GraphchatRunner, ship: Path) -> None:
    run = graphchat("plan", "run", "ship", '{"wait": 0}', env={"GRAPHCHAT_EVENTS": "jsonl"})
    assert run.returncode == 5, run.stderr
    events = [json.loads(line) for line in run.stderr.splitlines()]
    (opened,) = [e for e in events if e["event"] == "request_opened"]
    assert opened["question"] == "Which channel?" and opened["state"] == "open"


# --- chat shows what waits and answers it inline -----------------------------------------------

from tests.chat.test_pty import Spawn, leave, send_message  # noqa: E402
from tests.chat.test_pty import chat as chat  # noqa: E402,F401 - the pseudo-terminal fixture


def test_chat_shows_waiting_requests_and_answers_one_inline(
    graphchat: GraphchatRunner, ship: Path, chat: Spawn
) -> None:
    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
        child = chat()
        child.expect_exact("1 request waits: /requests")
        send_message(child, "/requests")
        child.expect_exact(f"{request_id}  form: Which channel?")
        send_message(child, f'/requests {request_id} {{"channel": "beta"}}')
        child.expect_exact(f"request {request_id} answered")
        out = leave(child)
        assert '"channel": "beta"' in out  # what the resumed run printed, as a block
        assert [c["tool"] for c in shop_calls(ship)] == ["list_items"]
        assert json.loads(graphchat("requests", "--json").stdout)["count"] == 0
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
    graphchat: GraphchatRunner, ship: Path, tmp_path: Path
) -> None:
    (ship / "plans" / "pick.yaml").write_text(PICK)
    answers = tmp_path / "answers.yaml"
    answers.write_text("'Keep a?': {keep: true}\n'Keep c?': {keep: false}\n")
    run = graphchat("plan", "run", "pick", "--answers", str(answers))
    request_id = parked_id(run)
    (request,) = json.loads(graphchat("requests", "--json").stdout)["requests"]
    assert request["question"] == "Keep b?" and request["source"]["step"] == "E0/do/Q[1]"
    assert sorted(c["args"]["id"] for c in shop_calls(ship)) == ["boo-0", "boo-1", "boo-2"]
    answered = graphchat("answer", request_id, "yes")  # a one-field form takes a bare value
    assert answered.returncode == 0, answered.stderr
    kept = [r["answer"]["keep"] for r in json.loads(answered.stdout)["kept"]]
    assert kept == [True, True, False]
    # the finished items a and c were kept; only b, which had not finished, ran again
    assert sorted(c["args"]["id"] for c in shop_calls(ship)) == ["boo-0", "boo-1", "boo-1", "boo-2"]


def test_two_waiting_items_resume_when_the_last_is_answered(
    graphchat: GraphchatRunner, ship: Path, tmp_path: Path
) -> None:
    (ship / "plans" / "pick.yaml").write_text(PICK)
    answers = tmp_path / "answers.yaml"
    answers.write_text("'Keep a?': {keep: true}\n")
    run = graphchat("plan", "run", "pick", "--answers", str(answers))
    assert run.returncode == 5, run.stderr
    waiting = json.loads(graphchat("requests", "--json").stdout)["requests"]
    assert sorted(r["question"] for r in waiting) == ["Keep b?", "Keep c?"]
    by_question = {r["question"]: r["id"] for r in waiting}
    first = graphchat("answer", by_question["Keep c?"], '{"keep": false}')
    assert first.returncode == 0 and first.stdout == ""
    assert f"1 more still wait: {by_question['Keep b?']}" in first.stderr
    last = graphchat("answer", by_question["Keep b?"], "no")
    assert last.returncode == 0, last.stderr
    assert [r["answer"]["keep"] for r in json.loads(last.stdout)["kept"]] == [True, False, False]


def test_an_expired_question_resumes_down_the_unanswered_path(graphchat: GraphchatRunner, ship: Path) -> None:
    plan = SHIP.replace("      prompt: Which channel?", "      prompt: Which channel?\n      timeout: 0.001")
    plan = plan.replace(
        "        required: [channel]", "        required: [channel]\n      when_unanswered: fail"
    )
    (ship / "plans" / "ship.yaml").write_text(plan)
    request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
    (request,) = json.loads(graphchat("requests", "--all", "--json").stdout)["requests"]
    assert request["id"] == request_id and request["state"] == "expired"
    late = graphchat("answer", request_id, '{"channel": "beta"}')
    assert late.returncode == 1 and "already expired" in late.stderr
    run = graphchat("resume", request_id)
    assert run.returncode == 1
    assert "the question was not answered (expired)" in run.stderr


def test_answer_without_a_value_asks_on_the_terminal(graphchat: GraphchatRunner, ship: Path) -> None:
    import pexpect

    fifo = FifoReader(ship / "called.fifo")
    try:
        request_id = parked_id(graphchat("plan", "run", "ship", '{"wait": 0}'))
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
