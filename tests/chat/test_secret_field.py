"""Issue 19, build 8: a plan's `secret: true` field asked inline in a chat is typed masked, its
value reaches the step (and the plan's output, as its author wrote it), and the thread file
holds `[redacted]` instead of it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.chat.test_pty import Spawn, chat, leave, send_message, tool_messages  # noqa: F401
from tests.scripted_server import ScriptedModelServer

SECRET = "chat-Secret-4242"

PLAN = """identifier: login
name: Login
description: Ask for a token.
steps:
  - id: E0
    tool_name: ask
    input:
      prompt: Your token?
      output_schema:
        type: object
        required: [token]
        properties:
          token: {type: string, secret: true}
output:
  token: "{{E0.answer.token}}"
"""


def test_a_secret_field_in_a_chat_is_masked_and_kept_out_of_the_thread(
    chat: Spawn,  # noqa: F811
    model_server: ScriptedModelServer,
    workspace: Path,
) -> None:
    (workspace / "plans" / "login.yaml").write_text(PLAN)
    model_server.push(
        {"tool_calls": [{"name": "plan__login", "arguments": {}}]},
        {"text": "Logged in."},
    )
    child = chat()
    send_message(child, "log me in")
    child.expect_exact("? Your token?")
    child.expect_exact("token (string):")
    child.sendline(SECRET)
    child.expect_exact("Logged in.")
    out = leave(child)
    assert SECRET not in out  # masked as it was typed
    (result,) = tool_messages(model_server.requests[1])
    assert json.loads(result["content"]) == {"token": SECRET}  # the step had the value
    threads = [p.read_text() for p in (workspace / "threads").rglob("*.jsonl")]
    assert threads and all(SECRET not in text for text in threads)
    assert any("[redacted]" in text for text in threads)
