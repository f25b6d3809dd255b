"""Issue 18 point 6: a disk that says no. A read-only or full workspace gets one line naming
the path and the errno's words, exit 1, and nothing half-written: no temp file, no half-built
thread, no torn line (was: "internal error: OSError" and a 0-byte temp file). MCP servers start
with their stderr to a null sink when their log cannot be opened (was: no server at all).

Every case goes through the real `graphchat` command (`ask` with the scripted model server,
`plan run`, `tools call`) in a private mount namespace (see `disks.py`); what a case does
before or after, on the real disk, runs in process (`cli`)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.adversarial.disks import run_on
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import seed_cache, stdio, write_servers

ASK_PLAN = """identifier: ship
name: Ship
description: Ask which channel.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: Which channel?
      output_schema:
        type: object
        properties:
          channel: {enum: [stable, beta]}
        required: [channel]
output:
  channel: "{{E0.answer.channel}}"
"""

# each case runs `graphchat` as a process of its own, in a private mount namespace (disks.py)
pytestmark = pytest.mark.process


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


def one_line(stderr: str, pattern: str) -> str:
    lines = error_lines(stderr)
    assert len(lines) == 1, stderr
    assert re.fullmatch(pattern, lines[0]), stderr
    assert "internal error" not in stderr and "Traceback" not in stderr and "OSError" not in stderr
    return lines[0]


def test_ask_in_a_read_only_workspace_says_so_in_one_line(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "hello there"})
    done = run_on("ro", workspace, workspace, "ask", "hi", env=model_server.env())
    assert done.returncode == 1, done.stderr
    one_line(done.stderr, r"error: read-only file system: threads/[0-9a-f]+")
    assert done.stdout == ""
    assert done.files() == {"graphchat.yaml": len((workspace / "graphchat.yaml").read_bytes())}


def test_ask_on_a_full_disk_names_the_thread_and_leaves_no_half_built_thread(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "hello there"})
    done = run_on("full", workspace / "threads", workspace, "ask", "hi", env=model_server.env())
    assert done.returncode == 1, done.stderr
    one_line(done.stderr, r"error: no space left on device: threads/[0-9a-f]+")
    assert done.files() == {}  # no staging folder, no 0-byte meta or messages file
    assert not [p for p in done.after.iterdir() if not p.name.startswith(".filler")]


def test_a_disk_that_fills_mid_turn_leaves_only_whole_lines(
    workspace: Path, model_server: ScriptedModelServer
) -> None:
    # Room for the thread and the question, not for a 300 KB answer (streamed in 4 KB chunks:
    # in the default 8-character ones, litellm's parsing of 37,500 chunks took a minute of CPU).
    model_server.push({"text": "long answer " * 25_000, "piece": 4096})
    done = run_on("small", workspace / "threads", workspace, "ask", "hi", env=model_server.env(), size="64k")
    assert done.returncode == 1, done.stderr
    one_line(done.stderr, r"error: no space left on device: threads/[0-9a-f]+/messages\.jsonl")
    files = done.files()
    assert not [name for name in files if name.endswith(".tmp") or "/.new-" in name or name.startswith(".")]
    (messages,) = [done.after / name for name in files if name.endswith("messages.jsonl")]
    raw = messages.read_bytes()
    assert raw.endswith(b"\n")
    kinds = [json.loads(line)["kind"] for line in raw.splitlines()]  # every line whole
    assert "user" in kinds and "assistant" not in kinds


def test_a_plan_that_parks_on_a_full_disk_names_the_request_and_leaves_no_temp_file(
    workspace: Path,
) -> None:
    (workspace / "plans" / "ship.yaml").write_text(ASK_PLAN)
    (workspace / "requests").mkdir()
    done = run_on("full", workspace / "requests", workspace, "plan", "run", "ship")
    assert done.returncode == 1, done.stderr
    one_line(done.stderr, r"error: no space left on device: requests/[0-9a-f]+\.json")
    assert done.files() == {}  # no `.<id>.<pid>.new` temp file (was: one of 0 bytes)


def test_a_read_only_workspace_still_starts_its_mcp_servers_with_a_warning(workspace: Path) -> None:
    write_servers(workspace, {"t": stdio()})
    seed_cache(workspace)
    done = run_on("ro", workspace, workspace, "tools", "call", "t__slow", '{"seconds": 0, "label": "ro"}')
    assert done.returncode == 0, done.stderr
    assert "ro: slept 0" in done.stdout
    warning = [line for line in done.stderr.splitlines() if "its stderr goes nowhere" in line]
    assert len(warning) == 1, done.stderr
    assert "MCP server 't'" in warning[0] and "read-only file system: catalog/logs/t.log" in warning[0]
    assert "internal error" not in done.stderr


def test_a_plan_in_a_read_only_workspace_uses_a_server_it_never_saw(workspace: Path) -> None:
    """No tool list cached and none can be: the run still knows the tools of the server it
    started (was: 'unknown tool'), and each failed cache says so in the one wording."""
    write_servers(workspace, {"t": stdio()})
    (workspace / "plans" / "echo.yaml").write_text(
        "identifier: echo\nname: Echo\ndescription: Echo through t.\nsteps:\n"
        "  - id: E0\n    tool_name: t__slow\n    input: {seconds: 0, label: seen}\n"
        'output:\n  said: "{{E0.result}}"\n'
    )
    done = run_on("ro", workspace, workspace, "plan", "run", "echo")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"said": "seen: slept 0.0s"}
    assert re.search(
        r"could not cache the tools of MCP server 't': read-only file system: catalog/cache/t-[0-9a-f]+\.json",
        done.stderr,
    )
    assert "read-only file system: catalog/shapes/t__slow.json" in done.stderr
    assert "Errno" not in done.stderr and "internal error" not in done.stderr


def test_a_run_that_cannot_park_leaves_no_open_request_behind(workspace: Path, cli: GraphchatRunner) -> None:
    """The request is written, the run record is not (its folder is full): the request goes
    too (was: an open request that no run waits on, listed by `graphchat requests`)."""
    (workspace / "plans" / "ship.yaml").write_text(ASK_PLAN)
    (workspace / "requests" / "runs").mkdir(parents=True)
    done = run_on("full", workspace / "requests" / "runs", workspace, "plan", "run", "ship")
    assert done.returncode == 1, done.stderr
    one_line(done.stderr, r"error: no space left on device: requests/runs/[0-9a-f]+\.json")
    assert done.files() == {}
    assert not list((workspace / "requests").glob("*.json"))
    listed = cli("requests")
    assert listed.returncode == 0 and "no requests wait" in listed.stderr + listed.stdout


def test_answering_on_a_full_disk_leaves_the_request_open_and_unclaimed(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """The claim cannot be written: one line naming it, and no empty claim is left (was: a
    0-byte `.claim` that made every later answer 'already answered', and no path said)."""
    (workspace / "plans" / "ship.yaml").write_text(ASK_PLAN)
    parked = cli("plan", "run", "ship")
    assert parked.returncode == 5, parked.stderr
    match = re.search(r"request ([0-9a-f]{6,}): ", parked.stderr)
    assert match, parked.stderr
    request_id = match.group(1)
    done = run_on("full", workspace / "requests", workspace, "answer", request_id, "beta")
    assert done.returncode == 1, done.stderr
    one_line(
        done.stderr,
        rf"error: no space left on device: requests/{request_id}\.claim \(request {request_id} stays open\)",
    )
    files = done.files()
    assert f"{request_id}.claim" not in files and f"{request_id}.json" in files
    assert json.loads((done.after / f"{request_id}.json").read_text())["state"] == "open"


def test_a_claim_written_but_an_answer_that_cannot_be_saved_leaves_the_request_open(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Issue 19, build 7: room for the claim, none for the answered request: one line saying
    the request stays open, the claim given up, and a later answer (with room) settles it."""
    (workspace / "plans" / "ship.yaml").write_text(ASK_PLAN)
    parked = cli("plan", "run", "ship")
    assert parked.returncode == 5, parked.stderr
    match = re.search(r"request ([0-9a-f]{6,}): ", parked.stderr)
    assert match, parked.stderr
    request_id = match.group(1)
    held = [p for p in (workspace / "requests").rglob("*") if p.is_file()]
    pages = sum(-(-p.stat().st_size // 4096) for p in held)
    # exactly one page free: the claim takes it, the answered request's temp file finds none
    done = run_on(
        "small", workspace / "requests", workspace, "answer", request_id, "beta", size=f"{(pages + 1) * 4}k"
    )
    assert done.returncode == 1, done.stderr
    one_line(
        done.stderr,
        rf"error: no space left on device: requests/{request_id}\.json \(request {request_id} stays open\)",
    )
    files = done.files()
    assert f"{request_id}.claim" not in files
    assert json.loads((done.after / f"{request_id}.json").read_text())["state"] == "open"
    again = cli("answer", request_id, "beta")  # this test's real disk has room
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {"channel": "beta"}
