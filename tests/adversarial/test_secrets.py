"""Point 7: one redactor for what graphchat writes or shows — the shape cache's examples, a
secret spelled with `\\u` escapes in tool-call arguments (thread and export), the chat history
file (mode 0600, scrubbed), and error lines echoing a key."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pexpect
import pytest

from tests.adversarial.support import hostile
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import write_servers

SECRET = "sk-live-4f9a2b7c1d8e6f30"


def escaped(text: str) -> str:
    """`text` with every character as a JSON \\u escape."""
    return "".join(f"\\u{ord(c):04x}" for c in text)


def test_shape_cache_examples_are_redacted(cli: GraphchatRunner, workspace: Path) -> None:
    server = hostile([{"name": "whoami", "result": {"user": "me", "token": SECRET}}])
    server["env"]["SERVICE_TOKEN"] = "${LEAKY_SERVICE_TOKEN}"  # a ${VAR} of servers.yaml is a secret
    write_servers(workspace, {"svc": server})
    done = cli("tools", "call", "svc__whoami", env={"LEAKY_SERVICE_TOKEN": SECRET})
    assert done.returncode == 0, done.stderr
    [shape] = (workspace / "catalog" / "shapes").glob("*.json")
    text = shape.read_text()
    assert SECRET not in text and "[redacted]" in text
    assert json.loads(text)["example"]["user"] == "me"


def test_a_secret_spelled_with_escapes_in_arguments_never_reaches_the_thread(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    arguments = '{"seconds": 0, "label": "' + escaped(SECRET) + '"}'
    model_server.push({"tool_calls": [{"name": "debug__sleep", "arguments": arguments}]}, {"text": "done"})
    env = {**model_server.env(), "GRAPHCHAT_TEST_TOOLS": "1", "LEAKY_API_KEY": SECRET}
    done = cli("ask", "sleep", env=env)
    assert done.returncode == 0, done.stderr
    [thread] = [p for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    stored = (thread / "messages.jsonl").read_text()
    assert escaped(SECRET) not in stored and SECRET not in stored
    assert "[redacted]" in stored
    for fmt in ("md", "json"):
        exported = cli("threads", "export", thread.name, "--format", fmt)
        assert exported.returncode == 0, exported.stderr
        assert SECRET not in exported.stdout and escaped(SECRET) not in exported.stdout


def test_an_error_line_echoing_the_key_is_redacted(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"error": 401, "message": f"Incorrect API key provided: {SECRET}"})
    env = {**model_server.env(), "GRAPHCHAT_API_KEY": SECRET}
    done = cli("ask", "hi", env=env)
    assert done.returncode == 2  # a rejected key is a configuration mistake (issue 11 point 4)
    assert "401" in done.stderr and "[redacted]" in done.stderr
    assert SECRET not in done.stderr and SECRET not in done.stdout


@pytest.mark.process
def test_chat_history_is_private_and_scrubbed(workspace: Path, model_server: ScriptedModelServer) -> None:
    history = workspace / ".graphchat_history"
    history.write_text("\n# 2026-01-01 00:00:00\n+an old line\n")
    history.chmod(0o644)
    model_server.push({"text": "Got it."})
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), "chat"],
        env=clean_env(
            {
                **model_server.env(),
                "TERM": "xterm-256color",
                "NO_COLOR": "1",
                "PROMPT_TOOLKIT_NO_CPR": "1",
                "LEAKY_API_KEY": SECRET,
            },
            workspace.parent,
        ),
        cwd=str(workspace),
        dimensions=(40, 120),
        encoding="utf-8",
        codec_errors="replace",
        timeout=40,
    )
    try:
        child.expect_exact("you>")
        child.sendline(f"my key is {SECRET}, keep it")
        child.expect_exact("Got it.")
        child.expect_exact("you>")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
    text = history.read_text()
    assert "an old line" in text and "my key is [redacted], keep it" in text
    assert SECRET not in text
