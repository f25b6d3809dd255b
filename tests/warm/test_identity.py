"""Which helper a command may use (graphchat.warm.identity): pure functions over files and env."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from graphchat.warm import identity as ident


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "catalog").mkdir(parents=True)
    (ws / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
    (ws / "catalog" / "servers.yaml").write_text('mcpServers:\n  s: {command: "${SERVER_BIN}", args: []}\n')
    return ws


def test_the_turn_environment_holds_referenced_credential_and_provider_variables_only(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    env = {
        "SERVER_BIN": "/usr/bin/x",  # referenced by servers.yaml
        "OPENAI_API_KEY": "sk-1",
        "GITHUB_TOKEN": "t",
        "GRAPHCHAT_MODEL": "openai/m",
        "PATH": "/bin",
        "TERM": "xterm",  # rendering: the client's own
        "GRAPHCHAT_EVENTS": "jsonl",  # rendering
        "GRAPHCHAT_WARM": "1",
        "LITELLM_LOG": "ERROR",  # graphchat sets it itself
        "PWD": "/somewhere",
    }
    got = ident.identify(ws, env).env
    assert got == {
        "GITHUB_TOKEN": "t",
        "GRAPHCHAT_MODEL": "openai/m",
        "OPENAI_API_KEY": "sk-1",
        "PATH": "/bin",
        "SERVER_BIN": "/usr/bin/x",
    }


def test_any_change_of_files_or_the_turn_environment_is_another_identity(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    env = {"SERVER_BIN": "/usr/bin/x", "OPENAI_API_KEY": "sk-1", "PATH": "/bin", "HOME": str(tmp_path)}
    first = ident.identify(ws, env)
    assert ident.identify(ws, {**env, "TERM": "dumb", "PWD": "/elsewhere"}).key == first.key
    assert ident.identify(ws, {**env, "OPENAI_API_KEY": "sk-2"}).key != first.key
    assert ident.identify(ws, {**env, "SERVER_BIN": "/usr/bin/y"}).key != first.key
    (ws / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 14\n")
    assert ident.identify(ws, env).key != first.key
    (ws / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
    assert ident.identify(ws, env).key == first.key
    (ws / "tools").mkdir()
    (ws / "tools" / "t.yaml").write_text("name: t\n")
    assert ident.identify(ws, env).key != first.key
    other = tmp_path / "other"
    other.mkdir()
    assert ident.identify(other, env).key != first.key


def test_graphchat_warm_0_turns_it_off() -> None:
    assert ident.disabled({"GRAPHCHAT_WARM": "0"})
    assert ident.disabled({"GRAPHCHAT_WARM": "off"})
    assert not ident.disabled({"GRAPHCHAT_WARM": "1"})
    assert not ident.disabled({})


def test_a_socket_directory_others_can_reach_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "graphchat"
    folder.mkdir(mode=0o700)
    ident.check_private(folder)
    os.chmod(folder, 0o755)
    with pytest.raises(ident.UnsafeDirectory, match="other users"):
        ident.check_private(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    os.chmod(folder, 0o700)
    with pytest.raises(ident.UnsafeDirectory, match="not a directory"):
        ident.check_private(link)


def test_the_runtime_directory_is_made_private(monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    # short enough for a socket path under it, wherever pytest puts its tmp_path (xdist's are long)
    runtime = Path(tempfile.mkdtemp(prefix="r", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    folder = ident.runtime_dir()
    assert folder == runtime / "graphchat"
    assert (folder.stat().st_mode & 0o777) == 0o700
