"""`kill -9` at every depth (issue 19): a run parked on a question at some depth is answered, and
the process that resumes it is killed with SIGKILL while it waits at a later step (a slow call
after the answer); `graphchat resume RUN_ID` then finishes it. Every counting call that had
finished ran exactly once; only the call in flight at the kill is made again. Through the real
command (the resuming process is a real subprocess), the scripted model and real MCP servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import GraphchatRunner, spawn_in
from tests.runs.test_frames import CATALOG_SERVER, counts, waiting
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import seed_cache, stdio, write_servers

pytestmark = pytest.mark.process  # the resuming process is killed with SIGKILL; the rest runs in process

SLOW = 3


@pytest.fixture
def shop(workspace: Path) -> Path:
    """The counting shop, and the tools server whose `slow` call leaves its server's pid in
    `called` when it reaches the server."""
    write_servers(
        workspace,
        {
            "shop": stdio(CATALOG_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(workspace / "calls.jsonl")}),
            "tools": stdio(env={"GRAPHCHAT_TEST_CALLED": str(workspace / "called")}),
        },
    )
    seed_cache(workspace)
    return workspace


def lookup(step: str, item: str) -> dict[str, Any]:
    return {"id": step, "tool_name": "shop__get_item", "input": {"id": item}}


def body() -> list[dict[str, Any]]:
    """Look up, ask, look up, wait (the kill comes here), look up."""
    schema = {"type": "object", "properties": {"go": {"type": "boolean"}}, "required": ["go"]}
    return [
        lookup("T1", "before-0"),
        {"id": "Q", "tool_name": "ask", "input": {"prompt": "Go on?", "output_schema": schema}},
        lookup("T2", "mid-0"),
        {"id": "W", "tool_name": "tools__slow", "input": {"seconds": SLOW, "label": "w"}},
        lookup("T3", "after-0"),
    ]


def plan(ident: str, steps: list[dict[str, Any]], output: dict[str, Any]) -> dict[str, Any]:
    return {
        "identifier": ident,
        "name": ident.title(),
        "description": f"The {ident} depth.",
        "steps": steps,
        "output": output,
    }


AGENT_STEP = {
    "id": "A",
    "tool_name": "agent",
    "input": {
        "prompt": "look up, ask, look up, wait, look up",
        "tools": ["shop__get_item", "tools__slow"],
        "output_schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    },
}


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


# depth -> (its plans, the command that starts it, the model's replies)
DEPTHS: dict[str, tuple[list[dict[str, Any]], list[str], list[dict[str, Any]]]] = {
    "map-body": (
        [
            plan(
                "top",
                [{"id": "M", "tool_name": "map", "input": {"over": ["a"], "do": body()}}],
                {"r": "{{M.results}}"},
            )
        ],
        ["plan", "run", "top"],
        [],
    ),
    "decide-branch": (
        [
            plan(
                "top",
                [
                    {
                        "id": "D",
                        "tool_name": "decide",
                        "input": {"if": {"value": 1, "op": "eq", "to": 1}, "then": body()},
                    }
                ],
                {"r": "{{D.result}}"},
            )
        ],
        ["plan", "run", "top"],
        [],
    ),
    "sub-plan": (
        [
            plan("inner", body(), {"last": "{{T3.id}}"}),
            plan("top", [{"id": "P", "tool_name": "plan__inner", "input": {}}], {"r": "{{P}}"}),
        ],
        ["plan", "run", "top"],
        [],
    ),
    "plan-from-ask": (
        [plan("inner", body(), {"last": "{{T3.id}}"})],
        ["ask", "Do it."],
        [call("plan__inner"), {"text": "Done."}],
    ),
    "agent-step": (
        [plan("top", [AGENT_STEP], {"r": "{{A.output}}"})],
        ["plan", "run", "top"],
        [
            call("shop__get_item", id="before-0"),
            call("ask_user", question="Go on?"),
            call("shop__get_item", id="mid-0"),
            call("tools__slow", seconds=SLOW, label="w"),
            call("shop__get_item", id="after-0"),
            {"json": {"ok": True}},
        ],
    ),
    "planner-plan": (
        [
            plan(
                "top",
                [{"id": "E0", "tool_name": "plan_and_execute", "input": {"query": "do it"}}],
                {"r": "{{E0}}"},
            )
        ],
        ["plan", "run", "top"],
        [{"json": plan("drafted", body(), {"last": "{{T3.id}}"})}],
    ),
}


def killed_once_there(process: subprocess.Popen[str], called: Path) -> None:
    """SIGKILL the process once its slow call has reached the server (the steps before it are
    journaled by then)."""
    try:
        deadline = time.monotonic() + 90
        while not called.exists():
            assert process.poll() is None, process.communicate()[1]
            assert time.monotonic() < deadline, "the slow step was never reached"
            time.sleep(0.05)
        time.sleep(0.3)
        assert process.poll() is None, "the resumed run ended before the kill"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.communicate(timeout=30)


@pytest.mark.parametrize("depth", list(DEPTHS))
def test_the_resuming_process_killed_at_a_later_step_resumes_and_nothing_finished_ran_twice(
    cli: GraphchatRunner,
    shop: Path,
    model_server: ScriptedModelServer,
    depth: str,
) -> None:
    plans, command, replies = DEPTHS[depth]
    for doc in plans:
        (shop / "plans" / f"{doc['identifier']}.yaml").write_text(yaml.safe_dump(doc))
    model_server.push(*replies)
    env = model_server.env()
    first = cli(*command, env=env)
    assert first.returncode == 5, first.stderr
    assert counts(shop) == {"before-0": 1}
    (request,) = waiting(cli)

    called = shop / "called"
    killed_once_there(spawn_in(shop, "answer", request["id"], "yes", env=env), called)
    assert counts(shop) == {"before-0": 1, "mid-0": 1}
    in_flight = called.read_text()
    called.unlink()

    (run,) = json.loads(cli("runs", "--json").stdout)["runs"]
    assert run["state"] == "interrupted", run
    resumed = cli("resume", run["id"], env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert counts(shop) == {"before-0": 1, "mid-0": 1, "after-0": 1}
    # the call in flight at the kill (and only it) was made again, by the resumed run's server
    assert called.exists() and called.read_text() != in_flight
    (ended,) = json.loads(cli("runs", "--json").stdout)["runs"]  # kept as finished (not resumable)
    assert (ended["id"], ended["state"]) == (run["id"], "finished"), ended
