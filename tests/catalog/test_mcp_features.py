"""MCP beyond tools (issue 25): roots, prompts, resources, progress, logging and
tools/list_changed, against @modelcontextprotocol/server-everything (the reference server the
MCP project ships for clients; `.ci/run` installs the pinned version) and a small server of
our own whose tool list changes."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest

from graphchat.catalog.base import CallContext
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.catalog.test_mcp_thirdparty import EVERYTHING
from tests.chat.test_pty import Spawn, leave, send_message
from tests.chat.test_pty import chat as chat  # noqa: F401 - the pseudo-terminal fixture
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

GROWING = str(Path(__file__).resolve().parent.parent / "servers" / "growing_server.py")
YES = CallContext(assume_yes=True)
needs_everything = pytest.mark.skipif(
    not EVERYTHING.exists() or shutil.which("node") is None,
    reason="@modelcontextprotocol/server-everything is not installed (.ci/run installs it with npm)",
)


def everything(workspace: Path, **extra: object) -> None:
    write_servers(workspace, {"everything": {"command": str(EVERYTHING), "args": ["stdio"], **extra}})


@needs_everything
def test_roots_name_the_workspace_and_can_be_turned_off(workspace: Path, cli: GraphchatRunner) -> None:
    everything(workspace)
    done = cli("tools", "call", "everything__get-roots-list", "{}")
    assert done.returncode == 0, done.stderr
    text = json.loads(done.stdout)["text"]
    assert workspace.resolve().as_uri() in text and "workspace" in text

    (workspace / "graphchat.yaml").write_text("settings:\n  mcp_roots: [elsewhere]\n")
    done = cli("tools", "call", "everything__get-roots-list", "{}")
    assert (workspace / "elsewhere").resolve().as_uri() in done.stdout
    assert f"{workspace.resolve().as_uri()}\\n" not in done.stdout  # mcp_roots replaces the defaults

    everything(workspace, capabilities={"roots": False})
    listed = cli("tools", "list", "--json", "--refresh")
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert "everything__echo" in names and "everything__get-roots-list" not in names


@needs_everything
def test_prompts_and_resources_on_the_command_line(workspace: Path, cli: GraphchatRunner) -> None:
    everything(workspace)
    done = cli("mcp", "prompts", "--json")
    assert done.returncode == 0, done.stderr
    prompts = {p["name"]: p for p in json.loads(done.stdout)["prompts"]}
    assert {"simple-prompt", "args-prompt", "resource-prompt", "completable-prompt"} <= set(prompts)
    assert [a["name"] for a in prompts["args-prompt"]["arguments"]] == ["city", "state"]

    done = cli("mcp", "prompt", "everything", "simple-prompt")
    assert done.returncode == 0 and done.stdout.startswith("user: ")
    done = cli("mcp", "prompt", "everything", "args-prompt", "--arg", "city=Lima", "--json")
    body = json.loads(done.stdout)
    assert body["messages"][0]["role"] == "user" and "Lima" in body["messages"][0]["content"]

    done = cli("mcp", "resources", "--json")
    listed = json.loads(done.stdout)
    assert listed["count"] > 0 and listed["templates"]
    uri = next(r["uri"] for r in listed["resources"] if r["mime_type"] == "text/markdown")
    done = cli("mcp", "read", "everything", uri)
    assert done.returncode == 0 and done.stdout.startswith("#")
    done = cli("tools", "call", "builtin__read_resource", json.dumps({"server": "everything", "uri": uri}))
    assert done.returncode == 0 and json.loads(done.stdout)["contents"][0]["text"].startswith("#")

    done = cli("mcp", "prompt", "evrything", "simple-prompt")
    assert done.returncode == 1 and "did you mean everything" in done.stderr


@needs_everything
def test_a_deny_rule_on_the_server_covers_read_resource(workspace: Path, cli: GraphchatRunner) -> None:
    everything(workspace)
    (workspace / "graphchat.yaml").write_text("approvals:\n  deny: ['everything__*']\n")
    done = cli(
        "tools", "call", "builtin__read_resource", json.dumps({"server": "everything", "uri": "demo://x"})
    )
    assert done.returncode == 1 and "deny: 'everything__*'" in done.stderr


@needs_everything
def test_progress_notifications_are_events_of_the_call(workspace: Path, cli: GraphchatRunner) -> None:
    everything(workspace)
    done = cli(
        "tools",
        "call",
        "everything__trigger-long-running-operation",
        '{"duration": 2, "steps": 3}',
        env={"GRAPHCHAT_EVENTS": "jsonl"},
    )
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    progress = [e for e in events if e["event"] == "tool_progress"]
    assert [(e["progress"], e["total"]) for e in progress] == [(1, 3), (2, 3), (3, 3)]
    started = next(e for e in events if e["event"] == "tool_started")
    assert {e["call"] for e in progress} == {started["call"]}


async def test_a_server_that_changes_its_tool_list_is_seen_at_the_next_lookup(workspace: Path) -> None:
    write_servers(workspace, {"g": stdio(GROWING)})
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        assert await catalog.prepare() == {}
        assert catalog.get("g__grown") is None
        grew = await catalog.call("g__grow", {}, YES)
        assert not grew.is_error, grew.value
        for _ in range(50):
            if catalog.get("g__grown") is not None:
                break
            await asyncio.sleep(0.1)
        assert catalog.get("g__grown") is not None
        result = await catalog.call("g__grown", {}, YES)
        assert not result.is_error and "grown here" in json.dumps(result.value)
    finally:
        await catalog.aclose()


# --- sampling --------------------------------------------------------------------------------------

SAMPLE = {"name": "everything__trigger-sampling-request", "arguments": {"prompt": "a haiku", "maxTokens": 42}}


def _tool_texts(request: dict[str, object]) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == "tool"]  # type: ignore[index,union-attr]


@needs_everything
def test_sampling_is_served_by_the_model_and_counted_in_the_turn(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    model_server.push(
        {"tool_calls": [SAMPLE]},
        {"text": "autumn moon rises", "usage": {"prompt_tokens": 30, "completion_tokens": 7}},  # the sampling
        {"text": "the server's model said it"},
    )
    done = cli("ask", "sample", "--yes", "--json", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert len(model_server.requests) == 3
    sampling = model_server.requests[1]
    assert sampling["max_tokens"] == 42 and sampling["temperature"] == 0.7
    assert sampling["messages"][0] == {"role": "system", "content": "You are a helpful test server."}
    assert "a haiku" in sampling["messages"][1]["content"] and "tools" not in sampling
    [result] = _tool_texts(model_server.requests[2])
    assert "autumn moon rises" in result
    usage = json.loads(done.stdout)["usage"]
    assert usage["calls"] == 3 and usage["by_role"]["sampling"] == {
        "calls": 1,
        "input_tokens": 30,
        "output_tokens": 7,
    }

    # asked like a tool call: the server's name, the token cap, the prompt; "always" is kept
    (workspace / "graphchat.yaml").write_text("approvals:\n  allow: [everything__trigger-sampling-request]\n")
    answers = workspace / "answers.yaml"
    prompt = "Allow MCP server everything to use your model (sampling, at most 42 tokens) with this prompt?"
    answers.write_text(json.dumps({prompt: "always"}))
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "sampled again"}, {"text": "done"})
    done = cli("ask", "sample", "--answers", str(answers), env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "sampled again" in _tool_texts(model_server.requests[-1])[0]
    assert "sampling:everything" in (workspace / "graphchat.yaml").read_text()


@needs_everything
def test_sampling_is_asked_in_chat_with_the_server_the_cap_and_the_prompt(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    (workspace / "graphchat.yaml").write_text("approvals:\n  allow: [everything__trigger-sampling-request]\n")
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "sampled here"}, {"text": "Done sampling."})
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "Refused it."})
    child = chat()
    send_message(child, "sample")
    child.expect_exact("? Allow MCP server everything to use your model (sampling, at most 42 tokens)")
    child.expect_exact("a haiku")  # the prompt is shown
    child.expect_exact("answer>")
    child.sendline("once")
    child.expect_exact("Done sampling.")
    send_message(child, "again")
    child.expect_exact("answer>")
    child.sendline("refuse")
    child.expect_exact("Refused it.")
    leave(child)
    assert "sampled here" in _tool_texts(model_server.requests[2])[0]
    assert len(model_server.requests) == 5  # the refused one never reached the model
    assert "the user refused the sampling request" in _tool_texts(model_server.requests[4])[-1]


@needs_everything
def test_headless_sampling_is_refused_even_when_the_tool_is_allowed(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    # the tool itself is allowed (a wildcard too, and mode auto): none of them covers sampling
    (workspace / "graphchat.yaml").write_text(
        "approvals:\n  mode: auto\n  allow: [everything__trigger-sampling-request, '*']\n"
    )
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "no sample"})
    done = cli("ask", "sample", "--no-park", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert len(model_server.requests) == 2  # the model was never asked for the sample
    [result] = _tool_texts(model_server.requests[1])
    assert "graphchat refused the sampling request" in result and "sampling:everything" in result

    # the exact entry approves it; a deny rule wins over it
    (workspace / "graphchat.yaml").write_text(
        "approvals:\n  allow: [everything__trigger-sampling-request, 'sampling:everything']\n"
    )
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "sampled"}, {"text": "done"})
    done = cli("ask", "sample", "--no-park", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "sampled" in _tool_texts(model_server.requests[-1])[0]

    (workspace / "graphchat.yaml").write_text(
        "approvals:\n  allow: [everything__trigger-sampling-request, 'sampling:everything']\n"
        "  deny: ['sampling:*']\n"
    )
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "denied"})
    before = len(model_server.requests)
    done = cli("ask", "sample", "--yes", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert len(model_server.requests) == before + 2
    assert "deny: 'sampling:*'" in _tool_texts(model_server.requests[-1])[0]


@needs_everything
def test_sampling_is_declared_and_can_be_turned_off(workspace: Path, cli: GraphchatRunner) -> None:
    everything(workspace)
    listed = cli("tools", "list", "--json")
    assert "everything__trigger-sampling-request" in {t["name"] for t in json.loads(listed.stdout)["tools"]}
    everything(workspace, capabilities={"sampling": False})
    listed = cli("tools", "list", "--json")
    names = {t["name"] for t in json.loads(listed.stdout)["tools"]}
    assert "everything__echo" in names and "everything__trigger-sampling-request" not in names


# --- images ----------------------------------------------------------------------------------------


def _model(workspace: Path, model_server: ScriptedModelServer, **extra: object) -> None:
    mapping = {"model": "openai/scripted", "api_base": model_server.url, "api_key": "sk-test", **extra}
    (workspace / "graphchat.yaml").write_text(json.dumps({"models": {"default": mapping}}))


@needs_everything
def test_an_image_result_reaches_a_model_that_accepts_images_as_an_image_part(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    image_call = {"tool_calls": [{"name": "everything__get-tiny-image", "arguments": {}}]}
    _model(workspace, model_server, vision=True)
    model_server.push(image_call, {"text": "the MCP logo"})
    done = cli("ask", "show me the image")
    assert done.returncode == 0, done.stderr
    messages = model_server.requests[1]["messages"]
    tool, shown = messages[-2], messages[-1]
    assert tool["role"] == "tool" and "iVBORw0KGgo" not in tool["content"]  # described, not base64
    [entry] = json.loads(tool["content"])["content"]
    assert entry["type"] == "image" and entry["mime_type"] == "image/png" and entry["bytes"] > 1000
    assert shown["role"] == "user" and "everything__get-tiny-image" in shown["content"][0]["text"]
    [part] = shown["content"][1:]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith(
        "data:image/png;base64,iVBORw0KGgo"
    )

    # a model that does not accept images gets the description only; a later turn's replay too
    _model(workspace, model_server, vision=False)
    model_server.push(image_call, {"text": "an image of some bytes"}, {"text": "still"})
    done = cli("ask", "show me the image")
    assert done.returncode == 0, done.stderr
    last = model_server.requests[-1]["messages"][-1]
    assert last["role"] == "tool" and '"bytes"' in last["content"] and "iVBORw0KGgo" not in last["content"]
    done = cli("ask", "-c", "and again?")
    assert done.returncode == 0, done.stderr
    replayed = json.dumps(model_server.requests[-1]["messages"])
    assert "iVBORw0KGgo" not in replayed and "image_url" not in replayed and "bytes" in replayed


# --- attachments -----------------------------------------------------------------------------------

DOC = "demo://resource/static/document/architecture.md"


@needs_everything
def test_ask_attach_puts_resources_in_the_message(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    (workspace / "graphchat.yaml").write_text("settings:\n  max_tool_result_chars: 300\n")
    model_server.push({"text": "read them"})
    done = cli(
        "ask",
        "what are these?",
        "--attach",
        f"everything:{DOC}",
        "--attach",
        "everything:demo://resource/dynamic/blob/1",
        env=model_server.env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "read them\n"
    [request] = model_server.requests
    sent = request["messages"][-1]["content"]
    assert sent.startswith(
        "what are these?\n\nAttached resource everything:" + DOC + " (text/markdown; showing 300 of "
    )
    assert "# " in sent.split("characters):\n", 1)[1][:5]  # the document's text follows, inline
    # the dynamic blob's size moves with the clock the server puts in it (55 or 56 bytes)
    assert re.search(
        r"Attached resource everything:demo://resource/dynamic/blob/1: binary content \(text/plain, \d+ bytes; not shown\)$",
        sent,
    ), sent[-200:]

    done = cli("ask", "x", "--attach", "no-colon", env=model_server.env())
    assert done.returncode == 2 and "expected SERVER:URI" in done.stderr
    done = cli("ask", "x", "--attach", "nowhere:demo://x", env=model_server.env())
    assert done.returncode == 1 and "no MCP server 'nowhere'" in done.stderr
    assert len(model_server.requests) == 1  # nothing was sent without its attachment


@needs_everything
def test_chat_mentions_attach_resources_and_server_prompts_are_sent(
    workspace: Path, chat: Spawn, model_server: ScriptedModelServer
) -> None:
    everything(workspace)
    model_server.push({"text": "About the architecture."}, {"text": "Lima it is."})
    child = chat()
    send_message(child, f"what is @everything:{DOC} about? mail me@everything.example")
    child.expect_exact("About the architecture.")
    send_message(child, "/everything:args-prompt city=Lima")
    child.expect_exact("Lima it is.")
    leave(child)
    first = model_server.requests[0]["messages"][-1]["content"]
    assert first.startswith(f"what is @everything:{DOC} about? mail me@everything.example\n\n")
    assert f"Attached resource everything:{DOC} (text/markdown):\n#" in first
    assert first.count("Attached resource") == 1  # an @ inside a word is text
    second = model_server.requests[1]["messages"][-1]
    assert second["role"] == "user" and "Lima" in second["content"] and "Attached" not in second["content"]


@needs_everything
def test_a_servers_sampling_counts_against_the_turns_max_model_calls(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    """Issue 18 build 4: every paid request counts, a server's sampling included. With a budget
    of 2, the round that called the tool and the sampling spend it: the next round is not sent."""
    everything(workspace)
    (workspace / "graphchat.yaml").write_text("settings:\n  max_model_calls: 2\n")
    model_server.push({"tool_calls": [SAMPLE]}, {"text": "autumn moon rises"}, {"text": "never sent"})
    done = cli("ask", "sample", "--yes", env=model_server.env())
    assert done.returncode == 1, done.stderr
    assert "settings.max_model_calls" in done.stderr
    assert len(model_server.requests) == 2  # the round, the sampling; the third was refused unsent
