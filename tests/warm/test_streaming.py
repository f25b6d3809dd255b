"""`ask` streams (issue 24, item 1): with a model that stops mid-answer, a terminal shows the
first part — the growing tail, before any markdown block is finished — before the pause ends;
on a pipe each round's text is held until its round ends and then written at once (what a
round said before its tool calls is readable on stderr while the next round still waits),
and stdout ends with one newline. The same cold (GRAPHCHAT_WARM=0) and through a warm helper."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pexpect
import pytest

from tests.cli.test_ask_on_a_terminal import screen
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers
from tests.warm.conftest import Warm

PAUSE_S = 4.0
FIRST = "The first part of the answer"  # no line break: a markdown block still growing
ANSWER = FIRST + ", and the rest of it."


def _served(warm: Warm) -> int:
    done = warm.run("warm", "--status", "--json")
    import json

    return int(json.loads(done.stdout)["turns_served"]) if done.returncode == 0 else 0


@pytest.mark.parametrize("where", ["cold", "warm"])
def test_a_terminal_shows_the_first_part_before_the_pause_ends(
    warm: Warm, model_server: ScriptedModelServer, where: str
) -> None:
    if where == "warm":
        warm.start()
    model_server.push({"text": ANSWER, "pause": [len(FIRST), PAUSE_S]})
    env = {**warm.env, "TERM": "xterm-256color", "NO_COLOR": "1"}
    if where == "cold":
        env["GRAPHCHAT_WARM"] = "0"
    child = pexpect.spawn(
        sys.executable,
        warm.command("ask", "go on")[1:],
        env=env,
        cwd=str(warm.workspace),
        dimensions=(30, 100),
        encoding="utf-8",
        timeout=90,
    )
    try:
        child.expect("first part of the answer")
        seen = time.monotonic()
        before = child.before + child.after
        child.expect(pexpect.EOF)
        ended = time.monotonic()
        rest = child.before
    finally:
        child.close()
    assert child.exitstatus == 0, before + rest
    assert ended - seen > PAUSE_S / 2, (ended - seen, before)  # shown while the model paused
    assert "and the rest" not in before
    lines = [line for line in screen(before + rest).splitlines() if line.strip()]
    assert lines[0] == ANSWER, lines  # the tail's region went; the answer stays once
    assert sum(ANSWER in line for line in lines) == 1, lines
    if where == "warm":
        assert _served(warm) == 1


@pytest.mark.parametrize("where", ["cold", "warm"])
def test_a_pipe_gets_each_round_at_its_end_and_one_final_newline(
    warm: Warm, model_server: ScriptedModelServer, where: str
) -> None:
    write_servers(warm.workspace, {"t": stdio()})
    if where == "warm":
        warm.start()
    model_server.push(
        {
            "text": "Checking the clock first.",
            "tool_calls": [{"name": "t__slow", "arguments": {"seconds": 0.1, "label": "a"}}],
        },
        {"text": ANSWER, "pause": [len(FIRST), PAUSE_S]},
    )
    env = {**warm.env, **({"GRAPHCHAT_WARM": "0"} if where == "cold" else {})}
    started = time.monotonic()
    process = subprocess.Popen(
        warm.command("ask", "--yes", "go on"),
        env=env,
        cwd=str(warm.workspace),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    arrivals: dict[str, list[tuple[float, bytes]]] = {"out": [], "err": []}

    def read(name: str, stream: object) -> None:
        for line in iter(stream.readline, b""):  # type: ignore[attr-defined]
            arrivals[name].append((time.monotonic(), line))

    readers = [
        threading.Thread(target=read, args=("out", process.stdout)),
        threading.Thread(target=read, args=("err", process.stderr)),
    ]
    for reader in readers:
        reader.start()
    code = process.wait(timeout=90)
    ended = time.monotonic()
    for reader in readers:
        reader.join()
    err = b"".join(line for _, line in arrivals["err"]).decode()
    out = b"".join(line for _, line in arrivals["out"]).decode()
    assert code == 0, err
    assert out == ANSWER + "\n"  # the answer alone, written at once, ending its line
    first_out = arrivals["out"][0][0]
    assert ended - first_out < PAUSE_S / 2  # held until the round ended
    narration = next(at for at, line in arrivals["err"] if b"Checking the clock first." in line)
    assert ended - narration > PAUSE_S / 2, (ended - narration, started)  # readable during the pause
    assert "the first part" not in err
    if where == "warm":
        assert _served(warm) == 1
