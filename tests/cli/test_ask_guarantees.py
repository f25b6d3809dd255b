"""`graphchat ask` guarantees of issue 2 not covered elsewhere: secrets, long threads, cost, limits.

The real command runs as a subprocess against the scripted model server; stdout is checked to
hold exactly the deliverable in every test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pexpect
import pytest

from graphchat.threads import lines as ev
from graphchat.threads.store import ThreadStore
from tests.cli.test_ask import env_for, only_thread, sleep_call, thread_events
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer

API_KEY = "sk-live-0123456789abcdef0123456789abcdef"
SERVER_PASSWORD = "p4ssw0rd-from-the-environment-42"


def write_config(workspace: Path, text: str) -> None:
    (workspace / "graphchat.yaml").write_text(text)


def test_secrets_never_reach_the_thread_files(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    # A `${VAR}` of servers.yaml (any name) and the model's key reach the conversation through the
    # person, a tool's output and the model's reply; none of them may be written to the thread.
    (workspace / "catalog" / "servers.yaml").write_text(
        "mcpServers:\n  db:\n    command: graphchat-test-no-such-server\n"
        "    env:\n      DB_CONNECTION: 'postgres://app:${DB_PASS}@localhost/app'\n"
    )
    model_server.push(
        {"tool_calls": [sleep_call(0, SERVER_PASSWORD), sleep_call(0, API_KEY)]},
        {"text": f"Your key is {API_KEY} and the password {SERVER_PASSWORD}."},
    )
    env = {**env_for(model_server), "GRAPHCHAT_API_KEY": API_KEY, "DB_PASS": SERVER_PASSWORD}
    done = cli("ask", f"my key is {API_KEY}, remember it", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"Your key is {API_KEY} and the password {SERVER_PASSWORD}.\n"  # the person sees it
    # the model was called with the key (it is the real one) ...
    assert model_server.requests and all(r for r in model_server.requests)
    folder = workspace / "threads" / only_thread(workspace)
    files = {p.name: p.read_text() for p in folder.iterdir()}
    assert set(files) >= {"messages.jsonl", "meta.json"}
    for name, text in files.items():
        assert API_KEY not in text, name
        assert SERVER_PASSWORD not in text, name
    events = thread_events(workspace, folder.name)
    assert events[0]["content"] == "my key is [redacted], remember it"
    results = [json.loads(e["content"]) for e in events if e["kind"] == "tool_result"]
    assert [r["label"] for r in results] == ["[redacted]", "[redacted]"]  # still valid JSON
    listed = json.loads(cli("threads", "list", "--json").stdout)
    assert listed["threads"][0]["title"] == "my key is [redacted], remember it"


def test_a_long_history_is_trimmed_to_a_small_context_window_with_a_note(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    write_config(workspace, "models:\n  default: {model: openai/scripted, context_window: 3000}\n")
    thread = ThreadStore(workspace / "threads").create()
    for n in range(6):
        filler = " ".join(f"word{n}x{k}" for k in range(100))  # ~400 tokens a message
        thread.append(dict(ev.user(f"question {n}: {filler}")))
        thread.append(dict(ev.assistant(f"answer {n}: {filler}")))
        thread.append(dict(ev.turn_end({"calls": 1}, "openai/scripted")))
    thread.close()
    model_server.push({"text": "still here"})
    done = cli("ask", "and now?", "--thread", thread.id, env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "still here\n"
    assert "left out to fit the model's context window" in done.stderr  # the person is told too
    sent = model_server.requests[0]["messages"]
    assert sent[0]["role"] == "user" and "omitted to fit the model's context window" in sent[0]["content"]
    assert sent[-1] == {"role": "user", "content": "and now?"}
    texts = [m["content"] for m in sent]
    assert not any(t.startswith("question 0:") for t in texts)  # the oldest turn is left out
    assert any(t.startswith("answer 5:") for t in texts)  # the newest earlier turn is kept
    assert len(json.dumps(sent)) < 3000 * 4  # what is sent fits the window, roughly
    # the file keeps every turn
    kinds = [e["kind"] for e in thread_events(workspace, thread.id)]
    assert kinds.count("user") == 7 and kinds.count("assistant") == 7


def test_usage_and_cost_per_turn_and_long_tool_results_whole_on_disk(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    write_config(
        workspace,
        "models:\n  default:\n    model: openai/scripted\n"
        "    input_cost_per_token: 0.000002\n    output_cost_per_token: 0.00001\n"
        "settings:\n  max_tool_result_chars: 1000\n",
    )
    long_label = "L" * 5000
    model_server.push(
        {
            "tool_calls": [sleep_call(0, long_label)],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 10},
        },
        {"text": "done", "usage": {"prompt_tokens": 2000, "completion_tokens": 20}},
    )
    done = cli("ask", "go", "--json", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    envelope = json.loads(done.stdout)
    expected_cost = 3000 * 0.000002 + 30 * 0.00001
    assert envelope["usage"]["calls"] == 2
    assert (envelope["usage"]["input_tokens"], envelope["usage"]["output_tokens"]) == (3000, 30)
    assert abs(envelope["usage"]["cost_usd"] - expected_cost) < 1e-9
    events = thread_events(workspace, envelope["thread_id"])
    [turn_end] = [e for e in events if e["kind"] == "turn_end"]
    assert (
        abs(turn_end["usage"]["cost_usd"] - expected_cost) < 1e-9 and turn_end["model"] == "openai/scripted"
    )
    # the model got the result shortened, with a note; the thread keeps it whole
    [tool_message] = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(tool_message["content"]) < 1200 and "shortened for the model" in tool_message["content"]
    # and the person is told, on the activity lines (issue 11 point 14)
    assert "debug__sleep: result cut to 1,000 of 5," in done.stderr
    [result] = [e for e in events if e["kind"] == "tool_result"]
    assert json.loads(result["content"])["label"] == long_label


def test_max_agent_iterations_exceeded_is_one_clear_failure(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    write_config(workspace, "settings:\n  max_agent_iterations: 2\n")
    model_server.default = {"tool_calls": [sleep_call(0, "again")]}
    done = cli("ask", "loop forever", env=env_for(model_server))
    assert done.returncode == 1
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    [error] = [line for line in lines if line.startswith("error: ")]
    assert "2 rounds" in error and "Traceback" not in done.stderr
    assert "max_agent_iterations" in done.stderr  # what to change
    assert len(model_server.requests) == 2
    events = thread_events(workspace, only_thread(workspace))
    assert events[-1]["kind"] == "turn_failed" and "2 rounds" in events[-1]["error"]


def test_unknown_thread_id_lists_the_recent_ids(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    store = ThreadStore(workspace / "threads")
    known = []
    for n in range(2):
        thread = store.create()
        thread.append(dict(ev.user(f"thread {n}")))
        known.append(thread.id)
    done = cli("ask", "x", "--thread", "abcdef123456", env=env_for(model_server))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: unknown thread 'abcdef123456'")
    assert all(thread_id in done.stderr.splitlines()[0] for thread_id in known)
    assert model_server.requests == []  # nothing was sent


def test_a_broken_stream_on_a_pipe_leaves_stdout_empty(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push({"text": "the start of a long answer", "dropmid": True})
    done = cli("ask", "hi", env=env_for(model_server))
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert "broke off mid-reply" in done.stderr  # a partial answer is not the deliverable


@pytest.mark.process
def test_a_broken_stream_on_a_terminal_puts_the_error_on_its_own_line(
    model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push({"text": "the start of a long answer", "dropmid": True})
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "ask", "hi"],
        env=clean_env({**env_for(model_server), "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    from tests.cli.test_ask_on_a_terminal import screen as shown_on

    screen = shown_on(child.before).lstrip("\n")  # what stays once the spinner line is erased
    assert screen.startswith("the star\nerror: the connection to openai/scripted broke off mid-reply"), screen


def test_an_empty_message_is_a_usage_error_and_piped_input_alone_is_a_question(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    done = cli("ask", "  ", env=env_for(model_server))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr
    assert model_server.requests == []  # nothing was sent, no thread was made
    model_server.push({"text": "a haiku"})
    done = cli("ask", "", input="write a haiku\n", env=env_for(model_server))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "a haiku\n"
    assert model_server.requests[0]["messages"] == [{"role": "user", "content": "write a haiku"}]


@pytest.mark.process
def test_ask_user_is_answered_on_the_terminal_and_the_answer_stays_off_stdout(
    model_server: ScriptedModelServer, workspace: Path, tmp_path: Path
) -> None:
    model_server.push(
        {"tool_calls": [{"name": "ask_user", "arguments": {"question": "Which region?"}}]},
        {"text": "Deploying to eu-west."},
    )
    out = tmp_path / "answer.txt"
    # stdin and stderr are the terminal; stdout goes to a file, as in `graphchat ask … > out`
    command = f"exec {sys.executable} -m graphchat --home {workspace} ask deploy > {out}"
    child = pexpect.spawn(
        "/bin/sh",
        ["-c", command],
        env=clean_env({**env_for(model_server), "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace),
        encoding="utf-8",
        timeout=60,
    )
    child.expect_exact("Which region?")
    child.sendline("eu-west")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert out.read_text() == "Deploying to eu-west.\n"
    [tool_message] = [m for m in model_server.requests[1]["messages"] if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == {"answer": "eu-west", "answered": True}
