"""Issue 10 point 14: resource limits. A flooding server's logs stay capped and its repeated
complaints are counted; the thread keeps a big result cut with a note; piped stdin has a limit;
the model is offered a capped number of tools; `threads show` of a 10 MB message shows a cut;
concurrent plan runs merge their shape-cache updates (none lost). Times are bench figures
(bench/limits_bench.py), never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import write_servers

HOSTILE = str(Path(__file__).resolve().parent / "raw_hostile_server.py")
MB = 1_000_000


def hostile(workspace: Path, **env: str) -> None:
    body: dict = {"command": sys.executable, "args": [HOSTILE]}
    if env:
        body["env"] = env
    write_servers(workspace, {"h": body})


def test_a_flooding_server_leaves_capped_logs(workspace: Path, cli: GraphchatRunner) -> None:
    hostile(workspace)
    done = cli("tools", "call", "h__flood", '{"lines": 20000}', timeout=120)  # ~2.3 MB each way
    assert done.returncode == 0, done.stderr
    assert "flooded" in done.stdout
    logs = workspace / "catalog" / "logs"
    sizes = {p.name: p.stat().st_size for p in logs.iterdir()}
    assert all(size <= MB + 65536 for size in sizes.values()), sizes  # capped, rotated
    assert "h.log.1" in sizes  # the server's stderr was rotated, not grown without end
    client = (logs / "client.log").read_text()
    assert sizes["client.log"] < 50_000, sizes  # 20,000 parse errors: a few lines and a count
    assert "Failed to parse JSONRPC message" in client
    assert "more like it" in client


def test_the_thread_keeps_a_big_result_cut_with_a_note(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    hostile(workspace)
    (workspace / "graphchat.yaml").write_text("settings:\n  max_thread_result_chars: 100000\n")
    model_server.push(
        {"tool_calls": [{"name": "h__huge", "arguments": {"mb": 0.5}}]},
        {"text": "Big."},
    )
    done = cli("ask", "go", env=model_server.env())
    assert done.returncode == 0, done.stderr
    messages = next((workspace / "threads").iterdir()) / "messages.jsonl"
    assert messages.stat().st_size < 200_000  # not the whole half megabyte
    results = [json.loads(line) for line in messages.read_text().splitlines() if '"tool_result"' in line]
    content = results[0]["content"]
    assert content.startswith('{"text":"xxx')
    assert "kept the first 100,000 of 524,2" in content  # the note says what was cut


def test_piped_stdin_over_the_limit_is_a_clear_error(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "a summary"})
    done = cli("ask", "summarize this", input="y\n" * 2_000_001, env=model_server.env())
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("error: piped input is too long"), done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert not any((workspace / "threads").iterdir())  # nothing written
    assert model_server.requests == []


def test_the_tools_offered_to_the_model_are_capped(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    hostile(workspace, HOSTILE_TOOLS="400")
    assert cli("tools", "list").returncode == 0  # reads the 400 tools into the cache
    model_server.push({"text": "ok"})
    done = cli("ask", "what does the bigint tool say?", env=model_server.env())
    assert done.returncode == 0, done.stderr
    names = [t["function"]["name"] for t in model_server.requests[-1]["tools"]]
    assert len(names) == 128
    assert "ask_user" in names and "h__bigint" in names  # the relevant one is kept
    assert "tools were not offered to the model" in done.stderr
    assert "settings.max_tools_offered" in done.stderr


def test_threads_show_of_a_10_mb_message_shows_a_cut(workspace: Path, cli: GraphchatRunner) -> None:
    from graphchat.threads import lines as ev
    from graphchat.threads.store import ThreadStore

    thread = ThreadStore(workspace / "threads").create()
    thread.append(dict(ev.user("word " * 2_000_000)))
    thread.append(dict(ev.assistant("**answer** " * 1_000_000)))
    shown = cli("threads", "show", thread.id, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert len(shown.stdout) < 400_000
    assert shown.stdout.count("more characters") == 2, shown.stdout[-2000:]
    exported = cli("threads", "export", thread.id, "--format", "md", timeout=120)
    assert exported.stdout.count("word ") >= 2_000_000  # export keeps it whole (the title has some)


MAP_PLAN = """identifier: many
name: Many
description: A map over many native items.
input_schema:
  type: object
  properties:
    xs: {type: array}
steps:
  - id: E1
    tool_name: map
    input:
      over: "{{input.xs}}"
      do: {tool_name: debug__sleep, input: {seconds: 0, label: "item {{item}}"}}
output:
  count: "{{E1.count}}"
"""


@pytest.mark.process
def test_concurrent_plan_runs_lose_no_shape_update(workspace: Path) -> None:
    (workspace / "plans" / "many.yaml").write_text(MAP_PLAN)
    command = [sys.executable, "-m", "graphchat", "--home", str(workspace), "plan", "run", "many"]
    env = clean_env({"GRAPHCHAT_TEST_TOOLS": "1"}, workspace.parent)
    runs = [
        subprocess.Popen([*command, json.dumps({"xs": list(range(400))})], env=env, cwd=str(workspace), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]  # fmt: skip
    for run in runs:
        out, err = run.communicate(timeout=180)
        assert run.returncode == 0, err
        assert json.loads(out)["count"] == 400
    shape = json.loads((workspace / "catalog" / "shapes" / "debug__sleep.json").read_text())
    assert shape["seen_count"] == 1200
