"""The thread store: append-only JSONL that survives kills and concurrent writers, and its replay."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graphchat.errors import GraphchatError
from graphchat.threads import ThreadStore, fit_to_window, to_model_messages
from graphchat.threads import lines as ev
from graphchat.threads.repair import INTERRUPTED_CONTENT

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.fixture
def store(tmp_path: Path) -> ThreadStore:
    return ThreadStore(tmp_path / "threads")


def call(call_id: str, name: str = "srv__tool", arguments: str = "{}") -> ev.ToolCallRecord:
    return {"id": call_id, "name": name, "arguments": arguments}


def lines_of(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return data[:-1].split(b"\n")


# --- ids and lookup ----------------------------------------------------------------------------


def test_new_ids_are_12_hex_and_folders_hold_messages_and_meta(store: ThreadStore) -> None:
    thread = store.create()
    assert len(thread.id) == 12 and all(c in "0123456789abcdef" for c in thread.id)
    assert thread.path == store.root / thread.id
    assert (thread.path / "messages.jsonl").is_file() and (thread.path / "meta.json").is_file()


@pytest.mark.parametrize("bad", ["../x", "../../etc/passwd", "/tmp/abcdef", "abc", "abcdef/..", "zzzzzz", ""])
def test_id_validation_rejects_paths_and_non_ids(store: ThreadStore, bad: str) -> None:
    store.create()
    with pytest.raises(GraphchatError) as info:
        store.open(bad)
    assert info.value.exit_code == 2
    assert "not a thread id" in info.value.message


def test_unknown_id_is_exit_1_and_lists_recent_ids(store: ThreadStore) -> None:
    ids = [store.create().id for _ in range(7)]
    for i, thread_id in enumerate(ids):  # make the order of recency unambiguous
        store.open(thread_id).append(ev.user(f"question {i}"))
    with pytest.raises(GraphchatError) as info:
        store.open("abcdef0123")
    assert info.value.exit_code == 1
    message = info.value.message
    assert "unknown thread 'abcdef0123'" in message
    newest_five = list(reversed(ids))[:5]
    assert message.endswith(", ".join(newest_five))
    assert ids[0] not in message


def test_unique_prefix_of_six_opens_the_thread_and_ambiguous_prefix_is_an_error(store: ThreadStore) -> None:
    root = store.root
    root.mkdir(parents=True)
    for thread_id in ("aaaaaa111111", "aaaaaa222222", "bbbbbb333333"):
        (root / thread_id).mkdir()
    assert store.open("bbbbbb").id == "bbbbbb333333"
    assert store.open("AAAAAA1").id == "aaaaaa111111"
    with pytest.raises(GraphchatError, match="ambiguous"):
        store.open("aaaaaa")


def test_latest_list_order_and_remove(store: ThreadStore) -> None:
    assert store.latest() is None and store.list() == []
    first, second, third = store.create(), store.create(), store.create()
    first.append(ev.user("touched last"))
    assert store.latest().id == first.id
    assert [i.id for i in store.list()] == [first.id, third.id, second.id]
    assert store.remove(third.id[:8]) == third.id
    assert not third.path.exists()
    assert [i.id for i in store.list()] == [first.id, second.id]
    with pytest.raises(GraphchatError):
        store.open(third.id)


# --- appending and listing ---------------------------------------------------------------------


def test_append_writes_whole_lines_with_ts_and_never_rewrites(store: ThreadStore) -> None:
    thread = store.create()
    thread.append({"kind": "user", "content": "hi"})
    before = thread.messages_path.read_bytes()
    inode = thread.messages_path.stat().st_ino
    thread.append(ev.assistant("hello"))
    after = thread.messages_path.read_bytes()
    assert after.startswith(before) and after.endswith(b"\n")
    assert thread.messages_path.stat().st_ino == inode
    first = json.loads(lines_of(thread.messages_path)[0])
    assert first["kind"] == "user" and first["ts"].endswith("Z")
    with pytest.raises(ValueError):
        thread.append({"content": "no kind"})


def test_list_title_count_and_updated_at(store: ThreadStore) -> None:
    thread = store.create()
    long_first_line = "Summarise " + "x" * 100
    thread.append(ev.user(long_first_line + "\nsecond line"))
    thread.append(ev.assistant(None, [call("c1")]))
    thread.append(ev.tool_result("c1", "srv__tool", "ok"))
    thread.append(ev.assistant("done"))
    end = ev.turn_end({"input_tokens": 5}, "openai/x")
    thread.append(end)
    thread.append(ev.user("a later question"))
    (info,) = store.list()
    assert info.id == thread.id
    assert info.title == long_first_line[:60]
    assert info.message_count == 5
    assert info.updated_at >= end["ts"]
    assert info.to_json().keys() == {"id", "title", "message_count", "updated_at"}


def test_list_reads_meta_plus_tail_not_every_message(store: ThreadStore) -> None:
    thread = store.create()
    thread.append(ev.user("first"))
    thread.append(ev.assistant("answer " + "y" * 5000))
    thread.append(ev.turn_end({}, "m"))  # meta now covers everything so far
    covered = thread.messages_path.stat().st_size
    # Events after the last meta refresh (as left by a process killed mid-turn) come from the tail.
    thread.append(ev.user("second"))
    thread.append(ev.assistant(None, [call("c1")]))
    thread.append(ev.tool_result("c1", "srv__tool", "r"))
    # Overwrite the summarised part with same-length garbage: list must not need to read it.
    data = bytearray(thread.messages_path.read_bytes())
    data[:covered] = b"#" * (covered - 1) + b"\n"
    thread.messages_path.write_bytes(bytes(data))
    (info,) = store.list()
    assert info.message_count == 5
    assert info.title == "first"


def test_meta_event_sets_the_title(store: ThreadStore) -> None:
    thread = store.create()
    thread.append(ev.user("hello"))
    thread.append(ev.meta(title="Renamed thread"))
    assert store.list()[0].title == "Renamed thread"


# --- damage -----------------------------------------------------------------------------------


def test_torn_last_line_is_dropped_and_reported_once(
    store: ThreadStore, capsys: pytest.CaptureFixture
) -> None:
    thread = store.create()
    thread.append(ev.user("hello"))
    thread.append(ev.assistant("hi"))
    with open(thread.messages_path, "ab") as f:
        f.write(b'{"kind":"tool_result","ts":"2025')  # a write cut short by a kill
    events = thread.events()
    events_again = thread.events()
    assert [e["kind"] for e in events] == ["user", "assistant"] == [e["kind"] for e in events_again]
    err = capsys.readouterr().err
    assert err == f"warning: thread {thread.id}: dropped a torn last line\n"
    _, report = thread.load()
    assert report.dropped_torn_tail and not report.skipped_lines
    # The next append starts on a fresh line: it stays whole, the fragment is skipped as bad.
    thread.append(ev.user("after the crash"))
    events, report = thread.load()
    assert [e["kind"] for e in events] == ["user", "assistant", "user"]
    assert events[-1]["content"] == "after the crash"
    assert report.skipped_lines == [3] and not report.dropped_torn_tail


def test_a_complete_json_line_missing_its_newline_is_still_torn(store: ThreadStore) -> None:
    thread = store.create()
    thread.append(ev.user("hello"))
    with open(thread.messages_path, "ab") as f:
        f.write(b'{"kind":"assistant","ts":"x","content":"cut before newline"}')
    events, report = thread.load()
    assert len(events) == 1 and report.dropped_torn_tail


def test_undecodable_middle_lines_are_skipped_and_reported(store: ThreadStore, capsys) -> None:
    thread = store.create()
    thread.append(ev.user("one"))
    with open(thread.messages_path, "ab") as f:
        f.write(b'not json\n[1, 2]\n{"no_kind": true}\n\n')
    thread.append(ev.user("two"))
    events = thread.events()
    assert [e["content"] for e in events] == ["one", "two"]
    err = capsys.readouterr().err.splitlines()
    assert err == [f"warning: thread {thread.id}: skipped 3 undecodable line(s) (line 2, 3, 4)"]


def test_missing_messages_file_loads_empty(store: ThreadStore) -> None:
    thread = store.create()
    thread.messages_path.unlink()
    assert thread.events() == []
    assert store.list()[0].message_count == 0


CHILD_APPEND_FOREVER = """
import sys
from pathlib import Path
from graphchat.threads.store import Thread
thread = Thread(sys.argv[1], Path(sys.argv[2]))
kinds = ["user", "assistant", "tool_result"]
big = "x" * 300_000
i = 0
while True:
    thread.append({"kind": kinds[i % 3], "content": f"{i} " + big, "tool_calls": []})
    i += 1
    if i == 30:
        print("ready", flush=True)
"""


@pytest.mark.process
def test_sigkill_mid_append_loop_then_load_and_list_work(store: ThreadStore) -> None:
    thread = store.create()
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_APPEND_FOREVER, thread.id, str(thread.path)],
        stdout=subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert child.stdout.readline() == b"ready\n"  # 30 appends done; it is still appending
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
        child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    events, report = thread.load()  # never raises, whatever the kill left
    assert len(events) >= 30
    assert [int(e["content"].split(" ", 1)[0]) for e in events] == list(range(len(events)))
    (info,) = store.list()
    assert info.id == thread.id and info.message_count == len(events)
    assert info.title == f"0 {'x' * 58}"
    thread.append(ev.user("resumed"))
    after, _ = thread.load()
    assert after[:-1] == events and after[-1]["content"] == "resumed"
    assert store.list()[0].message_count == len(events) + 1


CHILD_APPEND_N = """
import sys
from pathlib import Path
from graphchat.threads.store import Thread
thread = Thread(sys.argv[1], Path(sys.argv[2]))
writer = sys.argv[3]
assert sys.stdin.readline() == "go\\n"
for i in range(2000):
    kind = "user" if i % 10 == 0 else "tool_result"
    thread.append({"kind": kind, "writer": writer, "seq": i, "content": writer * (1 + (i % 7) * 3000)})
"""


@pytest.mark.process
def test_two_processes_appending_concurrently_produce_only_whole_lines(store: ThreadStore) -> None:
    thread = store.create()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD_APPEND_N, thread.id, str(thread.path), writer],
            stdin=subprocess.PIPE,
            cwd=REPO,
        )
        for writer in ("a", "b")
    ]
    for child in children:  # both are loaded and waiting: release them together
        child.stdin.write(b"go\n")
        child.stdin.flush()
    for child in children:
        child.stdin.close()
        assert child.wait(timeout=120) == 0
    lines = lines_of(thread.messages_path)
    assert len(lines) == 4000
    seen: dict[str, list[int]] = {"a": [], "b": []}
    for line in lines:
        event = json.loads(line)  # every line is one whole event
        assert event["content"] == event["writer"] * (1 + (event["seq"] % 7) * 3000)
        seen[event["writer"]].append(event["seq"])
    assert seen == {"a": list(range(2000)), "b": list(range(2000))}
    assert store.list()[0].message_count == 4000


CHILD_APPEND_ONE = """
import sys
from pathlib import Path
from graphchat.threads.store import Thread
thread = Thread(sys.argv[1], Path(sys.argv[2]))
print("ready", flush=True)
thread.append({"kind": "user", "content": "from the child"})
print("appended", flush=True)
"""


@pytest.mark.process
def test_an_append_waits_for_the_lock_another_process_holds(store: ThreadStore) -> None:
    import fcntl
    import select

    thread = store.create()
    thread.append({"kind": "user", "content": "first"})
    holder = os.open(thread.messages_path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # as another graphchat process mid-append would
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_APPEND_ONE, thread.id, str(thread.path)],
        stdout=subprocess.PIPE,
        cwd=REPO,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "ready\n"
        # While the lock is held the child must not write (a second is plenty to see it would).
        ready, _, _ = select.select([child.stdout], [], [], 1.0)
        assert not ready, "the append did not wait for the lock"
        assert [json.loads(x)["content"] for x in lines_of(thread.messages_path)] == ["first"]
    finally:
        fcntl.flock(holder, fcntl.LOCK_UN)
        os.close(holder)
    assert child.stdout.readline() == "appended\n"
    assert child.wait(timeout=60) == 0
    assert [json.loads(x)["content"] for x in lines_of(thread.messages_path)] == ["first", "from the child"]


# --- replay for the model ----------------------------------------------------------------------


def test_orphaned_tool_calls_are_repaired_by_position_even_with_repeated_ids() -> None:
    events = [
        ev.user("turn one"),
        ev.assistant(None, [call("call_0", "a"), call("call_1", "b")]),
        ev.tool_result("call_0", "a", "A1"),
        ev.tool_result("call_1", "b", "B1"),
        ev.assistant("done one"),
        ev.turn_end({}, "m"),
        ev.user("turn two"),
        # Provider ids repeat across turns: only position can tell which call is unanswered.
        ev.assistant("checking", [call("call_0", "a"), call("call_1", "b"), call("call_2", "c")]),
        ev.tool_result("call_0", "a", "A2"),
        # killed here: call_1 and call_2 never got results
        ev.user("turn three"),
    ]
    messages = to_model_messages(events)
    roles = [m["role"] for m in messages]
    assert roles == [
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "tool",
        "tool",
        "user",
    ]
    second_call = messages[6]
    assert second_call["content"] == "checking"
    assert [c["id"] for c in second_call["tool_calls"]] == ["call_0", "call_1", "call_2"]
    assert second_call["tool_calls"][0] == {
        "id": "call_0",
        "type": "function",
        "function": {"name": "a", "arguments": "{}"},
    }
    assert messages[7] == {"role": "tool", "tool_call_id": "call_0", "content": "A2"}
    assert messages[8] == {"role": "tool", "tool_call_id": "call_1", "content": INTERRUPTED_CONTENT}
    assert messages[9] == {"role": "tool", "tool_call_id": "call_2", "content": INTERRUPTED_CONTENT}
    assert json.loads(INTERRUPTED_CONTENT) == {"error": "interrupted before it finished"}
    assert messages[10] == {"role": "user", "content": "turn three"}
    # Earlier, complete turn: untouched.
    assert messages[2:4] == [
        {"role": "tool", "tool_call_id": "call_0", "content": "A1"},
        {"role": "tool", "tool_call_id": "call_1", "content": "B1"},
    ]


def test_unfinished_trailing_turn_is_kept_with_repairs() -> None:
    events = [ev.user("q"), ev.assistant(None, [call("x1"), call("x2")])]
    messages = to_model_messages(events)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in messages[2:]] == ["x1", "x2"]
    assert messages[1]["content"] is None


def test_a_failed_turn_is_left_out_and_the_next_turn_is_sent() -> None:
    events = [
        ev.user("good question"),
        ev.assistant("good answer"),
        ev.turn_end({}, "m"),
        ev.user("question that failed"),
        ev.assistant(None, [call("c1")]),
        ev.tool_result("c1", "srv__tool", "partial"),
        ev.turn_failed("max_agent_iterations (15) reached"),
        ev.user("next question"),
        ev.assistant("next answer"),
        ev.turn_end({}, "m"),
    ]
    messages = to_model_messages(events)
    assert messages == [
        {"role": "user", "content": "good question"},
        {"role": "assistant", "content": "good answer"},
        {"role": "user", "content": "next question"},
        {"role": "assistant", "content": "next answer"},
    ]


def test_assistant_without_calls_has_no_tool_calls_key_and_stray_results_are_dropped() -> None:
    events = [
        ev.user("q"),
        ev.tool_result("zz", "t", "no call to answer"),
        ev.assistant("plain"),
        ev.tool_result("zz", "t", "still no call"),
        ev.assistant(""),  # empty reply: nothing to send
        ev.turn_end({}, "m"),
    ]
    assert to_model_messages(events) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "plain"},
    ]


def test_long_tool_result_is_shortened_for_the_model_but_whole_on_disk(store: ThreadStore) -> None:
    thread = store.create()
    whole = "".join(f"line {i}\n" for i in range(10_000))
    for event in (ev.user("q"), ev.assistant(None, [call("c1")]), ev.tool_result("c1", "srv__tool", whole)):
        thread.append(event)
    assert thread.events()[-1]["content"] == whole
    tool = to_model_messages(thread.events(), max_tool_result_chars=1000)[-1]
    assert tool["content"].startswith(whole[:1000])
    assert len(tool["content"]) < 1200
    cut = len(whole) - 1000
    assert f"{cut:,} of {len(whole):,} characters were cut" in tool["content"]
    # short results are left alone
    assert to_model_messages(thread.events(), max_tool_result_chars=len(whole))[-1]["content"] == whole


# --- fitting the window ------------------------------------------------------------------------


def count_chars(messages: list[dict]) -> int:
    return sum(len(str(m.get("content") or "")) + 10 for m in messages)


def a_turn(n: int) -> list[dict]:
    return [
        {"role": "user", "content": f"question {n} " + "q" * 100},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": f"c{n}a", "type": "function", "function": {"name": "t", "arguments": "{}"}},
                {"id": f"c{n}b", "type": "function", "function": {"name": "t", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": f"c{n}a", "content": "r" * 100},
        {"role": "tool", "tool_call_id": f"c{n}b", "content": "r" * 100},
        {"role": "assistant", "content": f"answer {n} " + "a" * 100},
    ]


def assert_pairs_intact(messages: list[dict]) -> None:
    for i, message in enumerate(messages):
        if message.get("tool_calls"):
            ids = [c["id"] for c in message["tool_calls"]]
            following = messages[i + 1 : i + 1 + len(ids)]
            assert [m.get("tool_call_id") for m in following] == ids
        if message["role"] == "tool":
            assert messages[i - 1]["role"] in ("tool", "assistant")


def test_fit_to_window_leaves_history_alone_when_it_fits() -> None:
    messages = [{"role": "system", "content": "sys"}] + a_turn(1) + a_turn(2)
    assert fit_to_window(messages, max_tokens=10_000, count_tokens=count_chars) == (messages, 0)


def test_fit_to_window_drops_oldest_whole_turns_and_notes_it() -> None:
    system = [{"role": "system", "content": "be brief"}]
    turns = [a_turn(n) for n in range(6)]
    messages = system + [m for t in turns for m in t]
    budget = count_chars(system + turns[4] + turns[5]) + 150  # room for two turns and the note
    fitted, n_omitted = fit_to_window(messages, max_tokens=budget, count_tokens=count_chars)
    assert n_omitted == 20
    assert fitted[0] == system[0]
    assert fitted[1] == {
        "role": "user",
        "content": "[Note: 20 earlier messages of this conversation were omitted to fit the model's context window.]",
    }
    assert fitted[2:] == turns[4] + turns[5]
    assert count_chars(fitted) <= budget
    # the fewest turns were dropped: keeping one more would not fit
    assert count_chars(system + [fitted[1]] + turns[3] + turns[4] + turns[5]) > budget
    assert_pairs_intact(fitted)


def test_fit_to_window_keeps_the_last_user_message_and_tool_pairs_within_a_long_last_turn() -> None:
    earlier = a_turn(0)
    last_user = {"role": "user", "content": "current question"}
    rounds = []
    for r in range(5):
        rounds += [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_0", "type": "function", "function": {"name": "t", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": f"round {r} " + "z" * 300},
        ]
    messages = earlier + [last_user] + rounds
    fitted, n_omitted = fit_to_window(messages, max_tokens=900, count_tokens=count_chars)
    assert count_chars(fitted) <= 900
    assert fitted[0]["content"].startswith(f"[Note: {n_omitted} earlier messages")
    assert fitted[1] == last_user
    assert fitted[-2:] == rounds[-2:]
    assert n_omitted == len(messages) - (len(fitted) - 1)
    assert n_omitted > len(earlier)  # it had to drop rounds of the last turn too
    assert_pairs_intact(fitted)
    # even an impossible budget keeps the last user message and the latest call with its result
    tiny, _ = fit_to_window(messages, max_tokens=10, count_tokens=count_chars)
    assert tiny[1:] == [last_user] + rounds[-2:]
