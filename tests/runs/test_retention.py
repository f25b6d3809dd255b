"""Ended runs are kept (issue 19, build 9): a finished or failed run stays listed by `graphchat
runs` until `graphchat runs prune` (or a later run, at most once a day) removes it after
`settings.keep_runs` days; `resume` of an ended run is one line. Through the real command (in
process), with native tools only."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from tests.adversarial.test_disks import ASK_PLAN
from tests.conftest import GraphchatRunner

COUNT = """identifier: count
name: Count
description: Reshape the count, then stop on a negative one.
input_schema:
  type: object
  required: [count]
  properties: {count: {type: integer}}
steps:
  - id: shaped
    tool_name: builtin__reshape
    input: {shape: {n: "{{input.count}}"}}
  - id: negative
    tool_name: exit
    input:
      when: {value: "{{input.count}}", op: lt, to: 0}
      status: error
      message: "count must not be negative, got {{input.count}}"
output:
  done: "{{shaped.n}}"
"""

DAY = 86400


def runs(cli: GraphchatRunner, *args: str) -> list[dict[str, Any]]:
    listed = cli("runs", "--json", *args)
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout)["runs"])


def run_count(cli: GraphchatRunner, count: int) -> str:
    """Run the count plan; the id of its run (the most recent one)."""
    done = cli("plan", "run", "count", json.dumps({"count": count}))
    assert done.returncode == (0 if count >= 0 else 4), done.stderr
    return str(runs(cli)[0]["id"])


def age(workspace: Path, run_id: str, days: float, *, key: str = "ended") -> None:
    """Make a run look as if it ended (or started) `days` ago."""
    path = workspace / "requests" / "runs" / f"{run_id}.json"
    data = json.loads(path.read_text())
    data[key] = time.time() - days * DAY
    path.write_text(json.dumps(data))


def test_finished_and_failed_runs_are_listed_most_recent_first(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    ok = run_count(cli, 3)
    bad = run_count(cli, -1)
    listed = runs(cli)
    assert [r["id"] for r in listed] == [bad, ok]  # most recent first
    failed, finished = listed
    assert finished["state"] == "finished" and finished["exit"] == 0 and finished["error"] is None
    assert finished["plan"] == "count" and finished["last_step"] == "negative"
    assert finished["started"] <= finished["ended"]
    assert failed["state"] == "failed" and failed["exit"] == 4
    assert failed["error"] == "count must not be negative, got -1"
    assert [r["id"] for r in runs(cli, "--state", "finished")] == [ok]
    assert runs(cli, "--state", "parked") == []

    text = cli("runs")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"{bad}  failed ") and "plan count" in lines[0]
    assert lines[0].endswith("exit 4: count must not be negative, got -1")
    assert lines[1].startswith(f"{ok}  finished ") and lines[1].endswith("exit 0")
    none = cli("runs", "--state", "interrupted")
    assert none.returncode == 0 and none.stdout == "" and "no interrupted runs" in none.stderr
    wrong = cli("runs", "--state", "done")
    assert wrong.returncode == 2 and "invalid choice: 'done'" in wrong.stderr


def test_the_text_list_shows_the_20_most_recent_and_says_how_many_more(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    ids = [run_count(cli, n) for n in range(22)]
    text = cli("runs")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert [line.split()[0] for line in lines[:20]] == ids[::-1][:20]
    assert lines[20:] == ["… 2 more, --all"]
    every = cli("runs", "--all").stdout.splitlines()
    assert [line.split()[0] for line in every] == ids[::-1]
    assert len(runs(cli)) == 22  # --json: all of them


def test_resume_of_an_ended_run_is_one_line(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    ok = run_count(cli, 1)
    bad = run_count(cli, -2)
    done = cli("resume", ok)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    ended = runs(cli, "--state", "finished")[0]["ended"]
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert line == f"error: run {ok} finished at {ended}; nothing to resume"
    failed = cli("resume", bad)
    assert failed.returncode == 1 and "Traceback" not in failed.stderr
    assert f"error: run {bad} failed at " in failed.stderr
    assert ": count must not be negative, got -2; nothing to resume" in failed.stderr
    cancelled = cli("cancel", ok)
    assert (
        cancelled.returncode == 1 and f"run {ok} has ended (finished); nothing to cancel" in cancelled.stderr
    )
    assert [r["state"] for r in runs(cli)] == ["failed", "finished"]  # nothing changed


def test_runs_prune_removes_only_ended_runs_older_than_the_limit(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    (workspace / "plans" / "ship.yaml").write_text(ASK_PLAN)
    old_ok, old_bad, new_ok = run_count(cli, 1), run_count(cli, -1), run_count(cli, 2)
    assert cli("plan", "run", "ship").returncode == 5
    parked = runs(cli, "--state", "parked")[0]["id"]
    interrupted = run_count(cli, 4)  # a run whose process died: its record says running, nobody holds it
    folder = workspace / "requests" / "runs"
    data = json.loads((folder / f"{interrupted}.json").read_text())
    data.update(state="running", ended=None, exit=None)
    (folder / f"{interrupted}.json").write_text(json.dumps(data))
    for run_id in (old_ok, old_bad):
        age(workspace, run_id, 3)
    for run_id in (parked, interrupted):
        age(workspace, run_id, 30, key="started")
    assert {r["id"]: r["state"] for r in runs(cli)} == {
        old_ok: "finished",
        old_bad: "failed",
        new_ok: "finished",
        parked: "parked",
        interrupted: "interrupted",
    }

    pruned = cli("runs", "prune", "--older-than", "1")
    assert pruned.returncode == 0, pruned.stderr
    removed = sorted(line.split()[1] for line in pruned.stdout.splitlines())
    assert removed == sorted([old_ok, old_bad])
    assert f"removed {old_bad}  failed   plan count  ended " in pruned.stdout
    assert "removed 2 ended runs (older than 1 days)" in pruned.stderr
    assert not list(folder.glob(f"{old_ok}.*")) and not list(folder.glob(f"{old_bad}.*"))  # record, journal
    assert sorted(r["id"] for r in runs(cli)) == sorted([new_ok, parked, interrupted])
    again = cli("runs", "prune", "--older-than", "0")  # every ended run; never a parked or interrupted one
    assert again.returncode == 0 and [line.split()[1] for line in again.stdout.splitlines()] == [new_ok]
    assert sorted(r["id"] for r in runs(cli)) == sorted([parked, interrupted])
    bad = cli("runs", "prune", "--older-than", "soon")
    assert (
        bad.returncode == 2
        and "--older-than: expected a number of days (0 or more), got 'soon'" in bad.stderr
    )


def test_runs_prune_keeps_settings_keep_runs_days_by_default(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    ten, three = run_count(cli, 1), run_count(cli, 2)
    age(workspace, ten, 10)
    age(workspace, three, 3)
    config = workspace / "graphchat.yaml"
    config.write_text("settings:\n  keep_runs: 5\n")
    pruned = cli("runs", "prune")
    assert pruned.returncode == 0, pruned.stderr
    assert [line.split()[1] for line in pruned.stdout.splitlines()] == [ten]
    assert "(older than 5 days)" in pruned.stderr
    assert [r["id"] for r in runs(cli)] == [three]

    config.write_text("settings:\n  keep_runs: a week\n")
    wrong = cli("runs", "prune")
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    (line,) = [line for line in wrong.stderr.splitlines() if line.startswith("error:")]
    assert (
        "settings.keep_runs: expected a positive integer, got 'a week'" in line and "graphchat.yaml" in line
    )


def test_a_run_that_ends_prunes_old_runs_at_most_once_a_day(workspace: Path, cli: GraphchatRunner) -> None:
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    first = run_count(cli, 1)  # it pruned (nothing) and stamped the day
    stamp = workspace / "requests" / "runs" / ".pruned"
    assert stamp.exists()
    age(workspace, first, 8)  # older than the default keep_runs (7 days)
    second = run_count(cli, 2)  # pruned less than a day ago: not again
    assert sorted(r["id"] for r in runs(cli)) == sorted([first, second])
    os.utime(stamp, (time.time() - 2 * DAY, time.time() - 2 * DAY))
    third = run_count(cli, 3)  # a day has passed: the first run goes
    assert sorted(r["id"] for r in runs(cli)) == sorted([second, third])
    assert time.time() - stamp.stat().st_mtime < 60


def test_a_plan_that_cannot_start_or_fails_at_a_step_is_a_failed_run_with_its_line(
    workspace: Path, cli: GraphchatRunner
) -> None:
    (workspace / "plans" / "unknown.yaml").write_text(
        "identifier: unknown\nname: Unknown\ndescription: An unknown tool.\n"
        "steps:\n  - id: R\n    tool_name: builtin__nope\n    input: {}\n"
    )
    (workspace / "plans" / "broken.yaml").write_text(
        "identifier: broken\nname: Broken\ndescription: A missing input.\n"
        "steps:\n  - id: R\n    tool_name: builtin__reshape\n"
        '    input: {shape: "{{input.missing.deep}}"}\n'
    )
    assert cli("plan", "run", "unknown").returncode == 1
    assert cli("plan", "run", "broken").returncode == 1
    broken, unknown = runs(cli)
    assert (broken["plan"], broken["state"], broken["exit"]) == ("broken", "failed", 1)
    assert broken["error"].startswith("plan failed at step R (builtin__reshape): ")
    assert (unknown["plan"], unknown["state"], unknown["exit"]) == ("unknown", "failed", 1)
    assert unknown["error"].startswith("plan 'unknown' cannot run here: ")  # one line
    assert "unknown builtin tool 'builtin__nope'" in unknown["error"] and "\n" not in unknown["error"]
    refused = cli("resume", unknown["id"])
    assert refused.returncode == 1
    (line,) = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert f"run {unknown['id']} failed at " in line and "unknown builtin tool 'builtin__nope'" in line


def test_a_record_of_the_same_version_written_before_step_lines_still_resumes(
    workspace: Path, cli: GraphchatRunner
) -> None:
    """Format version 1 as the earlier code wrote it: the position rewritten in the record after
    each top-level step, a journal of lines below the top only. It resumes after that position."""
    (workspace / "plans" / "count.yaml").write_text(COUNT)
    run_id = run_count(cli, 5)
    folder = workspace / "requests" / "runs"
    data = json.loads((folder / f"{run_id}.json").read_text())
    for key in ("ended", "exit", "done"):
        data.pop(key, None)
    data["state"] = "running"  # its process died after step `shaped`
    data["position"] = {"done": 1, "scope": {"shaped": {"n": 7}}, "steps_executed": 1, "finished": {}}
    (folder / f"{run_id}.json").write_text(json.dumps(data))
    (folder / f"{run_id}.journal").unlink()
    (entry,) = runs(cli)
    assert (entry["state"], entry["last_step"]) == ("interrupted", "shaped")
    resumed = cli("resume", run_id)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == {"done": 7}  # `shaped` did not run again (it would give 5)
    assert runs(cli)[0]["state"] == "finished"
