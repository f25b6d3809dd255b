"""`graphchat threads …` run as the real command: stdout carries only the deliverable."""

from __future__ import annotations

import json
from pathlib import Path

from graphchat.threads import Thread, ThreadStore
from graphchat.threads import lines as ev

BIG_RESULT = "".join(f"row {i}: value\n" for i in range(2000))


def make_thread(workspace: Path, question: str, *, failed: bool = False) -> Thread:
    thread = ThreadStore(workspace / "threads").create()
    thread.append(ev.user(question))
    thread.append(
        ev.assistant("Let me look.", [{"id": "c1", "name": "db__query", "arguments": '{"sql": "select 1"}'}])
    )
    thread.append(ev.tool_result("c1", "db__query", BIG_RESULT, ms=1234))
    if failed:
        thread.append(ev.turn_failed("the model returned 500"))
    else:
        thread.append(ev.assistant("The answer is **42**."))
        thread.append(ev.turn_end({"calls": 2, "input_tokens": 120, "output_tokens": 30}, "openai/test"))
    return thread


def test_list_json_newest_first(cli, workspace: Path) -> None:
    older = make_thread(workspace, "first question\nwith details")
    newer = make_thread(workspace, "second question", failed=True)
    result = cli("threads", "list", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["count"] == 2
    assert [t["id"] for t in payload["threads"]] == [newer.id, older.id]
    assert payload["threads"][1] == {
        "id": older.id,
        "title": "first question",
        "message_count": 4,
        "updated_at": older.info().updated_at,
    }
    assert payload["threads"][0]["message_count"] == 3


def test_list_plain_rows_and_empty_workspace(cli, workspace: Path) -> None:
    empty = cli("threads", "list")
    assert empty.returncode == 0 and empty.stdout == ""
    assert json.loads(cli("threads", "list", "--json").stdout) == {"threads": [], "count": 0}
    thread = make_thread(workspace, "what is the answer?")
    result = cli("threads", "list")
    assert result.returncode == 0
    (row,) = result.stdout.splitlines()
    columns = row.split()
    assert columns[0] == thread.id
    assert columns[3] == "4"
    assert row.endswith("  what is the answer?")


def test_show_renders_messages_calls_and_a_shortened_result(cli, workspace: Path) -> None:
    thread = make_thread(workspace, "what is the answer?")
    result = cli("threads", "show", thread.id[:6], env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "what is the answer?" in out
    assert "The answer is 42." in out  # markdown rendered, not raw
    assert "db__query" in out and '{"sql": "select 1"}' in out
    assert "row 0: value" in out and "row 1999: value" not in out
    assert "more characters" in out
    assert "\x1b[" not in out
    assert result.stderr == ""


def test_show_json_prints_the_events(cli, workspace: Path) -> None:
    thread = make_thread(workspace, "q", failed=True)
    result = cli("threads", "show", thread.id, "--json")
    assert result.returncode == 0
    events = json.loads(result.stdout)
    assert [e["kind"] for e in events] == ["user", "assistant", "tool_result", "turn_failed"]
    assert events[2]["content"] == BIG_RESULT


def test_show_of_a_thread_with_a_torn_last_line_warns_once(cli, workspace: Path) -> None:
    thread = make_thread(workspace, "q")
    with open(thread.messages_path, "ab") as f:
        f.write(b'{"kind":"user","co')
    result = cli("threads", "show", thread.id, "--json")
    assert result.returncode == 0
    assert len(json.loads(result.stdout)) == 5
    assert result.stderr == f"warning: thread {thread.id}: dropped a torn last line\n"


def test_unknown_id_is_exit_1_listing_recent_ids(cli, workspace: Path) -> None:
    known = make_thread(workspace, "q")
    result = cli("threads", "show", "abcdef123456")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("error: unknown thread 'abcdef123456'; recent threads: " + known.id)


def test_a_path_is_never_a_thread_id(cli, workspace: Path) -> None:
    victim = workspace / "threads" / ".." / "graphchat.yaml"
    for command in (["show", "../graphchat.yaml"], ["rm", "../x"], ["export", "/etc/passwd"]):
        result = cli("threads", *command)
        assert result.returncode == 2
        assert "not a thread id" in result.stderr
    assert victim.exists()


def test_rm_removes_a_thread_by_prefix(cli, workspace: Path) -> None:
    keep = make_thread(workspace, "keep me")
    doomed = make_thread(workspace, "remove me")
    result = cli("threads", "rm", doomed.id[:7])
    assert result.returncode == 0
    assert result.stdout == ""
    assert doomed.id in result.stderr
    assert not doomed.path.exists()
    listed = json.loads(cli("threads", "list", "--json").stdout)
    assert [t["id"] for t in listed["threads"]] == [keep.id]


def test_export_markdown_keeps_whole_results_and_json_has_events(cli, workspace: Path) -> None:
    thread = make_thread(workspace, "what is the answer?")
    md = cli("threads", "export", thread.id)
    assert md.returncode == 0
    text = md.stdout
    assert text.startswith("# what is the answer?\n")
    assert "## You" in text and "## Assistant" in text and "The answer is **42**." in text
    assert '"sql": "select 1"' in text
    assert BIG_RESULT.strip() in text
    assert "in 120 · out 30 · openai/test" in text
    exported = json.loads(cli("threads", "export", thread.id, "--format", "json").stdout)
    assert exported["id"] == thread.id and exported["title"] == "what is the answer?"
    assert [e["kind"] for e in exported["events"]] == [
        "user",
        "assistant",
        "tool_result",
        "assistant",
        "turn_end",
    ]
