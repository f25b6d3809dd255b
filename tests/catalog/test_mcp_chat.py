"""MCP in a running chat (issue 25, second part): the progress of a long tool call on the
spinner line, a server's logging in its log file (never on the terminal), Tab completion of a
server's prompts and their argument values (the server's completion API), resource
subscriptions, whose turn a server's question belongs to, and a sampling request refused or
counted under the server's name — against
@modelcontextprotocol/server-everything and the repository's own test servers."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

from graphchat.catalog.base import CallContext
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.catalog.test_mcp_features import SAMPLE, _tool_texts, everything, needs_everything
from tests.catalog.test_mcp_pool import RecordingAsker
from tests.catalog.test_mcp_thirdparty import EVERYTHING
from tests.chat.test_pty import Spawn, leave, send_message
from tests.chat.test_pty import chat as chat  # noqa: F401 - the pseudo-terminal fixture
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import reached, stdio, write_servers

LONG = {"name": "everything__trigger-long-running-operation", "arguments": {"duration": 2, "steps": 3}}


@needs_everything
def test_the_progress_of_a_long_tool_call_is_on_its_spinner_line(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    model_server.push({"tool_calls": [LONG]}, {"text": "The operation finished."})
    child = chat()
    send_message(child, "run the long operation")
    child.expect_exact("everything__trigger-long-running-operation 1/3 ·")
    child.expect_exact("everything__trigger-long-running-operation 2/3 ·")
    child.expect_exact("The operation finished.")
    leave(child)
    assert "Long running operation completed" in model_server.requests[1]["messages"][-1]["content"]


@needs_everything
def test_a_servers_simulated_logging_lands_in_its_log_not_on_the_terminal(
    workspace: Path, cli: GraphchatRunner
) -> None:
    everything(workspace)
    done = cli("tools", "call", "everything__toggle-simulated-logging", "{}", "--yes")
    assert done.returncode == 0, done.stderr
    assert "Started simulated, random-leveled logging" in done.stdout
    log = (workspace / "catalog" / "logs" / "everything.log").read_text()
    # one of the server's eight random levels, as `[level] Level-message` (`Alert level-message`)
    levels = "|".join(LEVELS)
    assert re.search(rf"^\[({levels})\] \w+.level.message$", log, re.MULTILINE | re.IGNORECASE), log
    assert not re.search(r"level.message", done.stdout + done.stderr, re.IGNORECASE)


LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@needs_everything
def test_tab_completes_a_servers_prompt_its_arguments_and_their_values(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    """`/everything:compl` → the prompt's name; `dep` → `department=`; `Eng` → the value the
    server's completion API offers; `name=A` → a value that depends on the department given."""
    everything(workspace)
    model_server.push({"text": "Alice is promoted."})
    child = chat()
    child.expect_exact("you>")
    child.send("/everyth\t")
    child.expect_exact("ing:")  # only what Tab added is drawn
    child.send("compl\t")
    child.expect_exact("able-prompt")
    child.send(" dep\t")
    child.expect_exact("artment=")
    child.send("Eng\t")
    child.expect_exact("ineering")
    child.send(" name=A\t")
    child.expect_exact("lice")
    child.send("\r")
    child.expect_exact("Alice is promoted.")
    leave(child)
    sent = model_server.requests[0]["messages"][-1]
    assert sent["content"] == "Please promote Alice to the head of the Engineering team."


DOC = "demo://resource/static/document/architecture.md"
UPDATES = {"name": "everything__toggle-subscriber-updates", "arguments": {}}


@needs_everything
def test_a_subscribed_resources_change_is_a_line_and_the_next_message_rereads_it(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    write_servers(workspace, {"everything": {"command": str(EVERYTHING), "args": ["stdio"]}, "t": stdio()})
    (workspace / "graphchat.yaml").write_text(
        "approvals:\n  allow: [everything__toggle-subscriber-updates]\n"
    )
    model_server.push(
        {"tool_calls": [UPDATES]}, {"text": "Updates are on."}, {"text": "It is the architecture."}
    )
    child = chat()
    send_message(child, "/subscribe nothing-here")
    child.expect_exact("/subscribe: expected SERVER:URI")
    send_message(child, "/subscribe t:demo://x")  # a server without subscriptions says so
    child.expect_exact("/subscribe t:demo://x: MCP server 't': ")
    send_message(child, "/unsubscribe everything:demo://never")
    child.expect_exact("/unsubscribe: not subscribed to everything:demo://never")
    send_message(child, f"/subscribe evrything:{DOC}")
    child.expect_exact("no MCP server 'evrything' is configured (did you mean everything?)")
    send_message(child, f"/subscribe everything:{DOC}")
    child.expect_exact(f"subscribed to everything:{DOC}")
    send_message(child, "turn the updates on")  # the server sends the first update at once
    child.expect_exact(f"↻ everything:{DOC} changed")
    child.expect_exact("Updates are on.")
    send_message(child, "what changed?")
    child.expect_exact(f"↻ re-reading everything:{DOC}")
    child.expect_exact("It is the architecture.")
    send_message(child, "/subscribe")
    child.expect_exact(f"subscribed: everything:{DOC}")
    send_message(child, f"/unsubscribe everything:{DOC}")
    child.expect_exact(f"unsubscribed from everything:{DOC}")
    leave(child)
    assert len(model_server.requests) == 3
    first = model_server.requests[0]["messages"][-1]["content"]
    assert first == "turn the updates on"  # nothing had changed yet
    sent = model_server.requests[2]["messages"][-1]["content"]
    assert sent.startswith(f"what changed?\n\nAttached resource everything:{DOC} (text/markdown):\n#")
    log = (workspace / "catalog" / "logs" / "everything.log").read_text()
    assert f"Received Subscribe Resource request for URI: {DOC}" in log
    assert f"Received Unsubscribe Resource request: {DOC}" in log


async def test_a_servers_question_names_its_tool_and_is_refused_when_two_turns_share_the_server(
    workspace: Path,
) -> None:
    """A push elicitation does not say which call it serves: with only one turn's calls in flight
    it is that turn's (the question names the server and the tool); with another turn's call in
    flight on the same server (the warm helper serves several), nobody is asked and the server
    gets an error."""
    called = workspace / "called"
    os.mkfifo(called)
    write_servers(workspace, {"t": stdio(env={"GRAPHCHAT_TEST_CALLED": str(called)})})
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    mine, theirs = RecordingAsker({"ok": True}), RecordingAsker({"ok": False})
    try:
        assert await catalog.prepare() == {}
        # one turn: its own slow call in flight beside the question does not make it ambiguous
        slow = asyncio.ensure_future(catalog.call("t__slow", {"seconds": 1}, CallContext(asker=mine)))
        await reached(called)
        pushed = await catalog.call("t__confirm_push", {"name": "main"}, CallContext(asker=mine))
        await slow
        # two turns: another turn's call is in flight on the server
        slow = asyncio.ensure_future(catalog.call("t__slow", {"seconds": 3}, CallContext(asker=theirs)))
        await reached(called)
        refused = await catalog.call("t__confirm_push", {"name": "dev"}, CallContext(asker=mine))
        await slow
    finally:
        await catalog.aclose()
    assert pushed.value == {"result": "pushed=True main"}
    assert [q.prompt for q in mine.questions] == ["[t · confirm_push or slow] Push main?"]
    assert theirs.questions == []
    assert refused.is_error or "not pushed" in str(refused.value), refused.value
    assert "cannot tell which conversation this question belongs to" in str(refused.value)


@needs_everything
def test_sampling_nobody_can_approve_is_refused_naming_the_server_and_allowed_counts_by_server(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    (workspace / "graphchat.yaml").write_text("approvals:\n  allow: [everything__trigger-sampling-request]\n")
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "not sampled"})
    done = cli("ask", "sample", "--no-park", "--json", env=model_server.env())
    assert done.returncode == 0, done.stderr
    [result] = _tool_texts(model_server.requests[1])
    assert "graphchat refused the sampling request of MCP server 'everything'" in result
    assert "--yes" in result and "'sampling:everything' to approvals.allow in graphchat.yaml" in result
    assert "by_server" not in json.loads(done.stdout)["usage"]

    model_server.push(
        {"tool_calls": [SAMPLE]},
        {"text": "autumn moon rises", "usage": {"prompt_tokens": 30, "completion_tokens": 7}},
        {"text": "sampled"},
    )
    done = cli("ask", "sample", "--yes", "--json", env=model_server.env())
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["usage"]
    assert usage["by_server"] == {"everything": {"calls": 1, "input_tokens": 30, "output_tokens": 7}}


@needs_everything
def test_a_plan_runs_sampling_counts_under_its_step_and_by_server(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    (workspace / "plans" / "haiku.yaml").write_text(
        "identifier: haiku\nname: Haiku\ndescription: a server samples\nsteps:\n"
        "  - id: S0\n    tool_name: everything__trigger-sampling-request\n"
        "    input: {prompt: a haiku, maxTokens: 42}\n"
        "solver:\n  query_to_answer: What came back?\n  data: {said: '{{S0}}'}\n"
    )
    model_server.push(
        {"text": "autumn moon rises", "usage": {"prompt_tokens": 30, "completion_tokens": 7}},
        {"text": "A haiku came back."},
    )
    done = cli("plan", "run", "haiku", "--yes", "--json", env=model_server.env())
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["usage"]
    assert {s["path"]: s["calls"] for s in usage["by_step"]} == {"S0": 1, "solver": 1}
    assert usage["by_server"] == [
        {
            "server": "everything",
            "calls": 1,
            "input_tokens": 30,
            "output_tokens": 7,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
        }
    ]
