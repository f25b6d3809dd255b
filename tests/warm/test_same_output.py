"""A warm `ask` gives what a local `ask` gives: stdout byte for byte, the exit code, and stderr
with timings masked (issue 14, item 2)."""

from __future__ import annotations

import re

from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers
from tests.warm.conftest import Warm

TIMINGS = re.compile(r"\d+(\.\d+)?s\b|\"ms\":\s*[\d.]+")


def masked(text: str) -> str:
    return TIMINGS.sub("<t>", text)


def both(warm: Warm, server: ScriptedModelServer, replies: list[dict], *args: str, **kw: object):  # type: ignore[no-untyped-def]
    """The same question asked locally and then through the helper, the model replying alike."""
    server.push(*replies)
    local = warm.ask(*args, warm=False, **kw)
    server.push(*replies)
    warmed = warm.ask(*args, **kw)
    return local, warmed


def test_a_tool_round_and_the_answer_are_the_same_warm_and_local(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    write_servers(warm.workspace, {"t": stdio()})
    warm.start()
    calls = [{"name": "t__slow", "arguments": {"seconds": 0.2, "label": str(i)}} for i in range(3)]
    local, warmed = both(warm, model_server, [{"tool_calls": calls}, {"text": "done **bold**"}], "go")
    assert (local.returncode, local.stdout) == (0, "done **bold**"), local.stderr
    assert (warmed.returncode, warmed.stdout) == (local.returncode, local.stdout), warmed.stderr
    assert masked(warmed.stderr) == masked(local.stderr)
    status = warm.status()
    assert (status["turns_running"], status["turns_served"]) == (0, 1)
