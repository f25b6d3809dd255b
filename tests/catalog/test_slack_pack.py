"""The `slack` pack (graphchat.catalog.packs.slack) through the real command against a fake Slack
Web API on loopback (tests/fake_slack.py): graph's `{channel, ts, permalink}`, a refused post
failing, the token sent and never written, and the post asked about (destructive)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import GraphchatRunner
from tests.fake_slack import FakeSlack
from tests.scripted_server import ScriptedModelServer

TOKEN = "xoxb-fakeSlackTokenForTests-0123456789"

NOTIFY = """identifier: notify
name: Notify
description: Post a release note to Slack, then reply in its thread.
input_schema:
  type: object
  required: [channel, version]
  properties:
    channel: {type: string}
    version: {type: string}
steps:
  - id: E0
    tool_name: builtin__slack_post_message
    input: {channel: "{{input.channel}}", text: "Released *{{input.version}}* \\"quoted\\" {braces}"}
  - id: E1
    tool_name: builtin__slack_post_message
    input: {channel: "{{E0.channel}}", text: "notes follow", thread_ts: "{{E0.ts}}"}
output:
  first: "{{E0}}"
  reply: "{{E1}}"
"""


@pytest.fixture
def fake_slack() -> Any:
    fake = FakeSlack(TOKEN).start()
    yield fake
    fake.stop()


@pytest.fixture
def slack_ws(workspace: Path) -> Path:
    (workspace / "graphchat.yaml").write_text("tools:\n  packs: [slack]\n")
    (workspace / "plans" / "notify.yaml").write_text(NOTIFY)
    return workspace


def slack_env(fake: FakeSlack, **extra: str) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": TOKEN, "SLACK_API_URL": fake.url, **extra}


def call(graphchat: GraphchatRunner, arguments: dict[str, Any], env: dict[str, str], *flags: str) -> Any:
    return graphchat("tools", "call", *flags, "builtin__slack_post_message", json.dumps(arguments), env=env)


def assert_token_nowhere(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), f"the token is in {path}"


def test_the_pack_is_listed_with_graphs_contract_and_is_destructive(
    graphchat: GraphchatRunner, slack_ws: Path
) -> None:
    done = graphchat("tools", "show", "builtin__slack_post_message", "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["readOnly"] is False
    assert shown["inputSchema"]["required"] == ["channel", "text"]
    assert set(shown["outputSchema"]["properties"]) == {"channel", "ts", "permalink"}
    listed = json.loads(graphchat("tools", "list", "--json").stdout)
    [tool] = [t for t in listed["tools"] if t["name"] == "builtin__slack_post_message"]
    assert tool["source"] == "builtin"  # graph's source name
    (slack_ws / "graphchat.yaml").write_text("tools:\n  packs: []\n")
    assert "slack_post_message" not in graphchat("tools", "list").stdout  # off unless listed


def test_a_post_and_a_threaded_reply_against_the_fake_api(
    graphchat: GraphchatRunner, slack_ws: Path, fake_slack: FakeSlack
) -> None:
    env = slack_env(fake_slack)
    run = graphchat(
        "plan", "run", "notify", "--input", "channel=#general", "--input", "version=v1.2", "--yes", env=env
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    first, reply = out["first"], out["reply"]
    assert first["channel"] == "C0123ABCD" and first["ts"]  # the resolved channel ID
    assert first["permalink"] == f"https://slack.test/archives/C0123ABCD/p{first['ts'].replace('.', '')}"
    assert reply["channel"] == "C0123ABCD" and reply["ts"] != first["ts"]
    # the payload is JSON built from the values: quotes and braces arrive as they were
    assert fake_slack.messages[0]["text"] == 'Released *v1.2* "quoted" {braces}'
    assert "thread_ts" not in fake_slack.messages[0]  # graph: an empty thread_ts is left out
    assert fake_slack.messages[1]["thread_ts"] == first["ts"]
    posts = [r for r in fake_slack.requests if r["method"] == "POST"]
    assert [r["path"] for r in posts] == ["/api/chat.postMessage"] * 2
    assert all(r["headers"]["Authorization"] == f"Bearer {TOKEN}" for r in fake_slack.requests)
    assert posts[0]["headers"]["Content-Type"] == "application/json; charset=utf-8"
    assert TOKEN not in run.stdout + run.stderr
    assert_token_nowhere(slack_ws)


def test_a_refused_post_fails_and_a_missing_permalink_is_null(
    graphchat: GraphchatRunner, slack_ws: Path, fake_slack: FakeSlack
) -> None:
    env = slack_env(fake_slack)
    refused = call(graphchat, {"channel": "#nowhere", "text": "hi"}, env, "--yes")
    assert refused.returncode != 0
    assert "chat.postMessage failed: channel_not_found" in refused.stdout + refused.stderr
    bad_token = call(
        graphchat,
        {"channel": "#general", "text": "hi"},
        slack_env(fake_slack, SLACK_BOT_TOKEN="xoxb-wrong"),
        "--yes",
    )
    assert "chat.postMessage failed: invalid_auth" in bad_token.stdout + bad_token.stderr
    fake_slack.permalinks = False
    posted = call(graphchat, {"channel": "C0456EFGH", "text": "hi"}, env, "--yes")
    assert posted.returncode == 0, posted.stderr
    assert json.loads(posted.stdout) == {
        "channel": "C0456EFGH",
        "ts": fake_slack.messages[-1]["ts"],
        "permalink": None,
    }


def test_without_a_token_it_says_what_to_set_and_sends_nothing(
    graphchat: GraphchatRunner, slack_ws: Path, fake_slack: FakeSlack
) -> None:
    done = call(graphchat, {"channel": "#general", "text": "hi"}, {"SLACK_API_URL": fake_slack.url}, "--yes")
    assert done.returncode != 0
    assert "SLACK_BOT_TOKEN is not set (needs a token with chat:write)" in done.stdout + done.stderr
    assert fake_slack.requests == []


def test_a_post_is_asked_about_and_refused_when_nobody_can_answer(
    graphchat: GraphchatRunner, slack_ws: Path, fake_slack: FakeSlack, model_server: ScriptedModelServer
) -> None:
    env = slack_env(fake_slack)
    unapproved = graphchat(
        "plan", "run", "notify", "--input", "channel=#general", "--input", "version=1", "--no-park", env=env
    )
    assert unapproved.returncode != 0
    assert fake_slack.requests == []  # never posted without an approval
    # the model asks for a post in a turn; without --yes nobody approves it: refused, not sent
    model_server.push(
        {
            "tool_calls": [
                {"name": "builtin__slack_post_message", "arguments": {"channel": "#general", "text": "hi"}}
            ]
        },
        {"text": "could not post"},
    )
    asked = graphchat("ask", f"post hi (token {TOKEN})", "--no-park", env={**env, **model_server.env()})
    assert asked.returncode == 0, asked.stderr
    assert fake_slack.requests == []
    tool_reply = model_server.requests[1]["messages"][-1]
    assert tool_reply["role"] == "tool" and "not run" in tool_reply["content"]
    assert_token_nowhere(slack_ws)  # the thread keeps the question, redacted
