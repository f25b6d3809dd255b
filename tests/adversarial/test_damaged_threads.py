"""Point 11: a damaged thread (only meta.json; a meta.json with wrong-typed fields or not an
object) never breaks `threads list`, `threads show`, or `ask --thread`: it is repaired from
messages.jsonl (or shown empty) with a warning naming it, and the other threads are untouched."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphchat.threads import ThreadStore
from graphchat.threads import lines as ev
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer

DAMAGE: dict[str, Any] = {
    "updated_at_int": {"updated_at": 5},
    "count_string": {"message_count": "many"},
    "list": [1],
    "title_int": {"title": 7, "created_at": None},
    "size_negative": {"size": -3, "message_count": True},
    "size_beyond_file": {"size": 10**9},
}


def make_thread(workspace: Path, question: str) -> str:
    thread = ThreadStore(workspace / "threads").create()
    thread.append(ev.user(question))
    thread.append(ev.assistant(f"answer to {question}"))
    thread.append(ev.turn_end({"calls": 1, "input_tokens": 10, "output_tokens": 5}, "openai/test"))
    thread.close()
    return thread.id


def damage(workspace: Path, thread_id: str, how: str) -> None:
    folder = workspace / "threads" / thread_id
    if how == "only_meta":
        (folder / "messages.jsonl").unlink()
        return
    (folder / "meta.json").write_text(json.dumps(DAMAGE[how]))


def no_crash(stderr: str) -> None:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr


@pytest.mark.parametrize("how", ["only_meta", *DAMAGE])
def test_threads_list_and_show_survive_a_damaged_thread(
    cli: GraphchatRunner, workspace: Path, how: str
) -> None:
    good = make_thread(workspace, "good question")
    bad = make_thread(workspace, "damaged question")
    damage(workspace, bad, how)
    listed = cli("threads", "list", "--json")
    no_crash(listed.stderr)
    assert listed.returncode == 0, listed.stderr
    rows = {row["id"]: row for row in json.loads(listed.stdout)["threads"]}
    assert rows[good]["message_count"] == 2 and rows[good]["title"] == "good question"
    assert f"thread {bad}" in listed.stderr  # the warning names the damaged thread
    if bad in rows:  # repaired from messages.jsonl (or empty when it is gone)
        row = rows[bad]
        assert isinstance(row["updated_at"], str) and isinstance(row["title"], str)
        expected = 0 if how == "only_meta" else 2
        assert row["message_count"] == expected
    plain = cli("threads", "list")
    assert plain.returncode == 0 and good in plain.stdout, plain.stderr
    shown = cli("threads", "show", bad)
    no_crash(shown.stderr)
    assert shown.returncode == 0, shown.stderr
    if how != "only_meta":
        assert "damaged question" in shown.stdout


@pytest.mark.parametrize("how", ["only_meta", "updated_at_int", "count_string", "list"])  # the cases
@pytest.mark.parametrize("flag", ["latest", "id"])
def test_ask_continues_a_damaged_thread(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path, how: str, flag: str
) -> None:
    bad = make_thread(workspace, "damaged question")
    damage(workspace, bad, how)
    model_server.push({"text": "continued"})
    args = ["--thread"] if flag == "latest" else ["--thread", bad]
    done = cli("ask", "and then?", *args, env=model_server.env())
    no_crash(done.stderr)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "continued\n"
    sent = model_server.requests[0]["messages"]
    assert sent[-1] == {"role": "user", "content": "and then?"}
    if how != "only_meta":
        assert sent[0] == {"role": "user", "content": "damaged question"}
    # the thread's meta.json is sound again
    listed = cli("threads", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)["threads"]
    assert row["id"] == bad
    assert row["message_count"] == (2 if how == "only_meta" else 4)
    meta = json.loads((workspace / "threads" / bad / "meta.json").read_text())
    assert isinstance(meta["updated_at"], str) and isinstance(meta["message_count"], int)
