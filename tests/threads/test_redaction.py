"""Secrets never reach thread files: which values count as secrets, and how a line is scrubbed."""

from __future__ import annotations

import json
from pathlib import Path

from graphchat.threads import lines as ev
from graphchat.threads.redact import environment_secrets
from graphchat.threads.store import ThreadStore


def test_credential_names_and_servers_yaml_variables_are_secrets(tmp_path: Path) -> None:
    (tmp_path / "catalog").mkdir()
    (tmp_path / "catalog" / "servers.yaml").write_text(
        "mcpServers:\n  s:\n    command: x\n    args: ['${PLAIN_NAME}', '${GRAPHCHAT_WORKSPACE}', '${ROOT:-/}']\n"
    )
    environ = {
        "GRAPHCHAT_API_KEY": "gk-0123456789",
        "OPENAI_API_KEY": "sk-0123456789",
        "GITHUB_TOKEN": "ghp_0123456789",
        "PLAIN_NAME": "value-only-servers-yaml-knows",
        "GRAPHCHAT_WORKSPACE": "workspace-folder-name",  # graphchat's own variable: not a secret
        "ROOT": str(tmp_path),  # an existing path: not a secret
        "EDITOR": "vim-but-longer",  # not a credential, not referenced
        "SHORT_TOKEN": "abc",  # too short to be a key (and to redact safely)
    }
    found = environment_secrets(tmp_path, environ)
    assert found == {"gk-0123456789", "sk-0123456789", "ghp_0123456789", "value-only-servers-yaml-knows"}


def test_redacting_keeps_each_line_valid_json(tmp_path: Path) -> None:
    odd = 'pa"ss\\word-with-quote'  # a secret with characters JSON escapes
    store = ThreadStore(tmp_path / "threads", secrets=["sk-0123456789", "sk-0123456789-longer", odd])
    thread = store.create()
    thread.append(dict(ev.user(f"keys sk-0123456789-longer and sk-0123456789 and {odd}")))
    thread.append(dict(ev.tool_result("c1", "t", json.dumps({"token": odd}))))
    text = thread.messages_path.read_text()
    assert "sk-0123456789" not in text and "word-with-quote" not in text
    user, result = (json.loads(line) for line in text.splitlines())
    assert user["content"] == "keys [redacted] and [redacted] and [redacted]"
    assert json.loads(result["content"]) == {"token": "[redacted]"}
    assert store.list()[0].title == "keys [redacted] and [redacted] and [redacted]"


def test_a_secret_answer_held_is_scrubbed_from_thread_lines_and_event_text(tmp_path: Path) -> None:
    """Issue 19: an `ask` field marked `secret: true` — once answered, its value is written
    nowhere (a plan's result carried into a chat's thread, an event line)."""
    from graphchat.threads.redact import hold_answered, scrub_answered

    value = 'pt-answer-"zq9'  # unique to this test: the held set lasts for the process
    store = ThreadStore(tmp_path / "threads", secrets=[])
    hold_answered([value, "abc"])  # "abc": too short to look for in text
    thread = store.create()
    thread.append(dict(ev.tool_result("c1", "plan__login", json.dumps({"token": value, "n": "abc"}))))
    text = thread.messages_path.read_text()
    assert "zq9" not in text and "[redacted]" in text
    assert json.loads(json.loads(text.splitlines()[0])["content"]) == {"token": "[redacted]", "n": "abc"}
    assert scrub_answered(f"→ t__get {{'id': '{value}'}}") == "→ t__get {'id': '[redacted]'}"
