"""Every plan run is journaled (issue 19): a run killed with SIGKILL is listed by `graphchat
runs` as interrupted and `graphchat resume RUN_ID` finishes it, running nothing that had
finished — the top-level steps, the finished map items and the body steps of the item in
flight. Through the real command and real MCP servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner, spawn_in
from tests.runs.test_frames import counts, shop  # noqa: F401 - the fixture

LONG = """identifier: long
name: Long
description: Look up, then per item look up and wait, then look up again.
steps:
  - id: T1
    tool_name: shop__get_item
    input: {id: "first-0"}
  - id: M
    tool_name: map
    input:
      over: [a, b, c]
      concurrency: 1
      do:
        - id: G
          tool_name: shop__get_item
          input: {id: "item-{{index}}"}
        - id: W
          tool_name: tools__slow
          input: {seconds: 2, label: "{{item}}"}
  - id: T3
    tool_name: shop__get_item
    input: {id: "last-0"}
output:
  waited: "{{M.results}}"
"""


def wait_for(workspace: Path, item: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while counts(workspace)[item] == 0:
        assert time.monotonic() < deadline, f"{item} was never called"
        time.sleep(0.05)


@pytest.mark.process  # the run is a process it kills; what follows runs in process
def test_a_run_killed_mid_map_is_listed_and_resumed_without_rerunning_what_finished(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
) -> None:
    (shop / "plans" / "long.yaml").write_text(LONG)
    run = spawn_in(shop, "plan", "run", "long")
    try:
        wait_for(shop, "item-1")
        time.sleep(0.7)  # item 1's lookup has finished (and is journaled); its wait is in flight
        os.kill(run.pid, signal.SIGKILL)
    finally:
        run.communicate(timeout=30)
    listed = cli("runs", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)["runs"]
    assert entry["plan"] == "long" and entry["state"] == "interrupted"
    assert entry["last_step"] == "T1"
    # the record was written at the start only: T1's checkpoint is a journal line, not a rewrite
    folder = shop / "requests" / "runs"
    assert json.loads((folder / f"{entry['id']}.json").read_text())["position"]["done"] == 0
    lines = [json.loads(line) for line in (folder / f"{entry['id']}.journal").read_text().splitlines()]
    assert [line["done"] for line in lines if "done" in line] == [1]
    assert {"done": 1, "scope": {"T1": lines[0]["scope"]["T1"]}, "steps": 1} == lines[0]
    text = cli("runs")
    assert f"{entry['id']}  interrupted" in text.stdout
    kept = cli("runs", "prune", "--older-than", "0")  # an interrupted run is never pruned
    assert kept.returncode == 0 and kept.stdout == "" and "removed 0 ended runs" in kept.stderr

    resumed = cli("resume", entry["id"])
    assert resumed.returncode == 0, resumed.stderr
    waited = [r["result"] for r in json.loads(resumed.stdout)["waited"]]
    assert waited == ["a: slept 2.0s", "b: slept 2.0s", "c: slept 2.0s"]
    assert counts(shop) == {"first-0": 1, "item-0": 1, "item-1": 1, "item-2": 1, "last-0": 1}
    (ended,) = json.loads(cli("runs", "--json").stdout)["runs"]  # kept, as finished
    assert (ended["id"], ended["state"], ended["exit"], ended["last_step"]) == (
        entry["id"],
        "finished",
        0,
        "T3",
    )


def test_resuming_a_run_that_does_not_exist_or_is_of_another_version_is_one_line(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
) -> None:
    missing = cli("resume", "0123abcd")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    folder = shop / "requests" / "runs"
    folder.mkdir(parents=True)
    (folder / "00aa11bb22cc.json").write_text(json.dumps({"version": 99, "command": "plan run"}))
    old = cli("resume", "00aa11bb22cc")
    assert old.returncode == 1, old.stderr
    assert "format version 99" in old.stderr and "Traceback" not in old.stderr


KILLED = """identifier: killed
name: Killed
description: Side effects, a map, a question, and a last side effect.
steps:
  - id: T1
    tool_name: shop__get_item
    input: {id: "first-0"}
  - id: M
    tool_name: map
    input:
      over: [a, b, c, d]
      concurrency: 1
      do:
        - id: G
          tool_name: shop__get_item
          input: {id: "item-{{index}}"}
        - id: W
          tool_name: tools__slow
          input: {seconds: 0.3, label: "{{item}}"}
  - id: Q
    tool_name: ask
    input:
      prompt: Go on?
      output_schema:
        type: object
        properties: {go: {type: boolean}}
        required: [go]
  - id: T3
    tool_name: shop__get_item
    input: {id: "last-0"}
output:
  go: "{{Q.answer.go}}"
  last: "{{T3.id}}"
"""


@pytest.mark.process  # the run is a process it kills; what follows runs in process
def test_killed_at_random_moments_again_and_again_it_finishes_and_nothing_finished_ran_twice(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
) -> None:
    import random

    (shop / "plans" / "killed.yaml").write_text(KILLED)
    rng = random.Random(19)
    kills = 0
    command: tuple[str, ...] = ("plan", "run", "killed")
    finished = None
    for attempt in range(40):
        process = spawn_in(shop, *command)
        try:
            out, err = process.communicate(timeout=rng.uniform(0.5, 3.0) * (1 + attempt / 4))
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.communicate(timeout=30)
            kills += 1
        else:
            if process.returncode == 0:
                finished = out
                break
            assert process.returncode == 5, err  # parked on the question
        runs = json.loads(cli("runs", "--json").stdout)["runs"]
        if not runs:  # killed before its record was written: nothing had run
            assert command[0] == "plan" and not counts(shop), (command, counts(shop))
            continue
        (run,) = runs
        waiting = [r for r in json.loads(cli("requests", "--json").stdout)["requests"]]
        if waiting:
            command = ("answer", waiting[0]["id"], "yes")
        else:
            assert run["state"] in ("interrupted", "parked"), run
            command = ("resume", run["id"])
    assert finished is not None, "the run never finished"
    assert json.loads(finished) == {"go": True, "last": "last-0"}
    seen = counts(shop)
    assert set(seen) == {"first-0", "item-0", "item-1", "item-2", "item-3", "last-0"}
    # only a call in flight at a kill may repeat: one at a time here (concurrency 1)
    repeats = sum(n - 1 for n in seen.values())
    assert repeats <= kills, (seen, kills)
    assert [r["state"] for r in json.loads(cli("runs", "--json").stdout)["runs"]] == ["finished"]


BIG = """identifier: big
name: Big
description: A map over many native items.
input_schema:
  type: object
  required: [xs]
  properties: {xs: {type: array}}
steps:
  - id: M
    tool_name: map
    input:
      over: "{{input.xs}}"
      concurrency: 1
      do: {tool_name: builtin__reshape, input: {shape: {n: "{{item}}"}}}
output:
  count: "{{M.count}}"
"""


@pytest.mark.process  # the run is a process it kills; what follows runs in process
def test_the_journal_is_written_in_batches_as_the_run_goes_and_whole_at_sigterm(
    cli: GraphchatRunner,
    shop: Path,  # noqa: F811
) -> None:
    (shop / "plans" / "big.yaml").write_text(BIG)
    items = 100_000  # settings.max_map_items
    (shop / "xs.json").write_text(json.dumps({"xs": list(range(items))}))
    run = spawn_in(shop, "plan", "run", "big", f"@{shop / 'xs.json'}")
    try:
        deadline = time.monotonic() + 90
        journal = None
        while journal is None or journal.stat().st_size == 0:
            assert time.monotonic() < deadline and run.poll() is None, run.stderr and run.stderr.read()
            journal = next(shop.rglob("*.journal"), None)
            time.sleep(0.05)
        first = journal.stat().st_size
        time.sleep(0.5)
        assert run.poll() is None, "the run ended too soon to be interrupted"
        assert journal.stat().st_size > first  # written out as the run goes, not only at its end
        os.kill(run.pid, signal.SIGTERM)
    finally:
        run.communicate(timeout=60)
    lines = journal.read_bytes().splitlines()
    assert lines and all(json.loads(line)["k"] for line in lines)  # flushed whole: no cut line
    (entry,) = json.loads(cli("runs", "--json").stdout)["runs"]
    assert entry["state"] == "interrupted"
    resumed = cli("resume", entry["id"])
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"count": items}
