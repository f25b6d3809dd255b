"""Issue 10 point 8: one bad tool result (nested 300 deep, an integer ≥ 2**64, a
structuredContent the SDK drops) is that call's own business: the turn goes on, no sibling is
marked cancelled, big integers stay exact, and a dropped answer fails the call at once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import write_servers

HOSTILE = str(Path(__file__).resolve().parent / "raw_hostile_server.py")
BIG = str(2**64 + 1)


def hostile(workspace: Path, timeout_s: float = 60) -> None:
    write_servers(workspace, {"h": {"command": sys.executable, "args": [HOSTILE], "timeout_s": timeout_s}})


def tool_messages(request: dict) -> list[str]:
    return [str(m.get("content")) for m in request["messages"] if m.get("role") == "tool"]


def test_a_deep_or_huge_integer_result_does_not_fail_the_turn(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    hostile(workspace)
    model_server.push(
        {
            "tool_calls": [
                {"name": "h__deep", "arguments": {"depth": 300}},
                {"name": "h__bigint", "arguments": {}},
                {"name": "h__bigint", "arguments": {"structured": True}},
                {"name": "h__ok", "arguments": {}},
            ]
        },
        {"text": "All four answered."},
    )
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == "All four answered.\n"
    assert "cancelled" not in done.stderr and "internal error" not in done.stderr
    results = tool_messages(model_server.requests[-1])
    assert len(results) == 4
    assert '{\\"a\\": {\\"a\\"' in results[0] or '{"a": {"a"' in results[0]
    assert BIG in results[1] and BIG in results[2]  # exact, not 1.8446744073709552e+19
    assert "e+19" not in results[1] + results[2]
    assert "fine" in results[3]
    thread = json.loads(cli("threads", "list", "--json").stdout)["threads"][0]["id"]
    events = json.loads(cli("threads", "show", thread, "--json").stdout)
    stored = [e for e in events if e.get("kind") == "tool_result"]
    assert len(stored) == 4 and BIG in json.dumps(stored)


def test_tools_call_and_plan_run_keep_big_integers_exact(workspace: Path, cli: GraphchatRunner) -> None:
    hostile(workspace)
    called = cli("tools", "call", "h__bigint")
    assert called.returncode == 0, called.stderr
    assert BIG in called.stdout and "e+19" not in called.stdout
    deep = cli("tools", "call", "h__deep", '{"depth": 300}')
    assert deep.returncode == 0, deep.stderr
    assert "internal error" not in deep.stderr
    (workspace / "plans" / "big.yaml").write_text(
        "identifier: big\nname: Big\ndescription: A big integer.\nrequires_servers: [h]\n"
        "steps:\n  - id: E0\n    tool_name: h__bigint\n    input: {structured: true}\n"
        'output:\n  got: "{{E0}}"\n'
    )
    ran = cli("plan", "run", "big")
    assert ran.returncode == 0, ran.stderr
    assert BIG in ran.stdout


def test_an_answer_the_sdk_cannot_read_fails_the_call_at_once(workspace: Path, cli: GraphchatRunner) -> None:
    hostile(workspace, timeout_s=600)  # waiting it out would outlast this test's 60 s limit
    called = cli("tools", "call", "h__deep", '{"depth": 1000, "structured": true}')
    assert called.returncode == 1
    assert "could not be read" in called.stderr and "nested too deep" in called.stderr
    assert "did not answer within" not in called.stderr
