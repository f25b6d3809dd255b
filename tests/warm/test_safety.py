"""The warm helper's safety (issue 14, item 2): a socket only its owner can reach (a 0700
directory, a 0600 socket, the peer's uid checked), requests of another graphchat or
configuration refused, and a client that imports neither litellm nor the MCP SDK.

The tests share the module's helpers (tests/warm/conftest.py, `Helpers`): one for a workspace
without MCP servers (`warm`), one with the test tools server `t` (`tools_warm`); a test that
makes the socket directory unsafe puts it back as it was."""

from __future__ import annotations

import os
import re
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

import graphchat
from graphchat.warm import wire
from graphchat.warm.control import alive
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers
from tests.warm.conftest import Helpers, Warm
from tests.warm.test_lifecycle import info_of, masked, raw_status


@pytest.fixture
def warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace without MCP servers."""
    return helpers.warm("plain")


@pytest.fixture
def tools_warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace with the test tools server `t`."""
    return helpers.warm("tools", lambda warm: write_servers(warm.workspace, {"t": stdio()}))


def turns(info: dict[str, Any], folder: Path | None = None) -> int:
    """The turns the helper of `info` has served, asked at its socket (in `folder`, when given)."""
    path = Path(info["_socket"])
    return int(raw_status(path if folder is None else folder / path.name)["turns_served"])  # type: ignore[index]


def test_the_socket_is_the_owners_alone(warm: Warm) -> None:
    pid = warm.start()
    info = info_of(warm, pid)
    assert stat.S_IMODE(os.stat(warm.socket_dir).st_mode) == 0o700
    sock = os.stat(info["_socket"])
    assert stat.S_ISSOCK(sock.st_mode) and stat.S_IMODE(sock.st_mode) == 0o600
    assert sock.st_uid == os.getuid()
    assert stat.S_IMODE(os.stat(info["_info"]).st_mode) == 0o600


def test_peer_uid_is_this_users_on_a_socketpair() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert wire.peer_uid(left) == os.getuid()
        assert wire.peer_uid(right) == os.getuid()
        assert wire.same_user(left)


@pytest.mark.parametrize("mode", [0o755, 0o711])
def test_a_socket_directory_others_can_enter_is_never_used(
    warm: Warm, model_server: ScriptedModelServer, mode: int
) -> None:
    pid = warm.start()
    info = info_of(warm, pid)
    earlier = turns(info)  # the module's earlier tests'
    os.chmod(warm.socket_dir, mode)
    try:
        model_server.push({"text": "local"})
        asked = warm.ask("hi")
        model_server.push({"text": "local"})
        local = warm.ask_in_process("hi")
        assert (asked.returncode, asked.stdout) == (0, "local\n"), asked.stderr
        assert masked(asked.stderr) == masked(local.stderr)
        assert turns(info) == earlier

        for command in (("warm",), ("warm", "--status"), ("warm", "--stop")):
            done = warm.run(*command)
            assert done.returncode == 1, (command, done.stdout, done.stderr)
            lines = done.stderr.splitlines()
            assert len(lines) == 1, (command, done.stderr)
            assert lines[0].startswith("error: the warm helper's directory is not safe to use: "), lines
            assert oct(mode)[2:] in lines[0]
            assert done.stdout == ""
        assert alive(pid)
    finally:
        os.chmod(warm.socket_dir, 0o700)


def test_a_socket_directory_that_is_a_symlink_is_never_used(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    pid = warm.start()
    info = info_of(warm, pid)
    earlier = turns(info)
    real = warm.runtime / "real"
    os.rename(warm.socket_dir, real)
    os.symlink(real, warm.socket_dir)
    try:
        model_server.push({"text": "local"})
        asked = warm.ask("hi")
        assert (asked.returncode, asked.stdout) == (0, "local\n"), asked.stderr
        assert turns(info, real) == earlier
        done = warm.run("warm")
        assert done.returncode == 1 and done.stderr.startswith(
            "error: the warm helper's directory is not safe"
        )
    finally:
        os.unlink(warm.socket_dir)
        os.rename(real, warm.socket_dir)


@pytest.mark.skipif(os.getuid() != 0, reason="giving the directory to another user needs root")
def test_a_socket_directory_of_another_user_is_never_used(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    pid = warm.start()
    info = info_of(warm, pid)
    earlier = turns(info)
    os.chown(warm.socket_dir, 65534, -1)
    try:
        model_server.push({"text": "local"})
        asked = warm.ask("hi")
        assert (asked.returncode, asked.stdout) == (0, "local\n"), asked.stderr
        assert turns(info) == earlier
        done = warm.run("warm")
        assert done.returncode == 1, done.stderr
        assert done.stderr.splitlines() == [
            f"error: the warm helper's directory is not safe to use: {warm.socket_dir} belongs to another user"
        ]
    finally:
        os.chown(warm.socket_dir, os.getuid(), -1)


def _ask_directly(socket_path: str, **fields: Any) -> dict[str, Any]:
    request = {
        "op": "ask",
        "protocol": wire.PROTOCOL,
        "version": graphchat.__version__,
        "key": "",
        "env": {},
        "flags": {},
        "message": "hi",
        "thread": None,
        "cwd": os.getcwd(),
        "tty": {"out": False, "err": False},
        "human": False,
        "can_answer": False,
        "debug": False,
        **fields,
    }
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(socket_path)
        sock.sendall(wire.encode(request))
        with sock.makefile("rb") as stream:
            first = stream.readline()
            rest = stream.read()
    assert rest == b""  # one line and the helper hangs up
    return wire.decode(first)


def test_a_request_of_another_graphchat_or_configuration_is_refused(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    pid = warm.start()
    info = info_of(warm, pid)
    path = info["_socket"]
    key = info["key"]
    earlier = turns(info)
    cases = [
        {"key": "0" * 64},
        {"key": key, "version": "0.0.0-not-this-one"},
        {"key": key, "protocol": wire.PROTOCOL + 1},
        {"key": key, "protocol": None},
        {"key": key, "env": {"OPENAI_API_KEY": "sk-someone-else"}},  # the right key, another environment
    ]
    for fields in cases:
        reply = _ask_directly(path, **fields)
        assert reply.get("t") == "refused", (fields, reply)
    assert turns(info) == earlier
    assert model_server.requests == []  # no turn reached the model


def test_a_request_that_is_not_json_gets_no_answer_and_the_helper_carries_on(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    pid = warm.start()
    path = info_of(warm, pid)["_socket"]
    for junk in (b"not json\n", b"[1, 2]\n", b"\xff\xfe\n", b"{}\n", b'{"op": "launch"}\n'):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(30)
            sock.connect(path)
            sock.sendall(junk)
            with sock.makefile("rb") as stream:
                assert stream.read() == b"", junk
    model_server.push({"text": "fine"})
    asked = warm.ask("hi")
    assert (asked.returncode, asked.stdout) == (0, "fine\n"), asked.stderr
    assert warm.served() == 1


IMPORT_LINE = re.compile(r"^import time:\s+\d+\s+\|\s+\d+\s+\|( *)(\S+)\s*$")
HEAVY = ("litellm", "mcp", "httpx", "httpcore", "pydantic", "pydantic_core", "yaml", "openai", "anyio")


def imported_modules(stderr: str) -> list[str]:
    return [m.group(2) for line in stderr.splitlines() if (m := IMPORT_LINE.match(line))]


def test_the_warm_client_imports_neither_litellm_nor_the_mcp_sdk(
    tools_warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm = tools_warm
    warm.start()
    model_server.push({"tool_calls": [{"name": "t__whoami", "arguments": {}}]}, {"text": "done"})
    done = warm.run("ask", "hi", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    assert warm.served() == 1  # it did go through the helper
    modules = imported_modules(done.stderr)
    assert "graphchat.warm.client" in modules  # the log is read right
    heavy = sorted({m for m in modules if m.split(".")[0] in HEAVY})
    assert heavy == [], heavy


def test_the_import_log_of_a_local_ask_does_show_them(warm: Warm, model_server: ScriptedModelServer) -> None:
    """The control of the test above: the same reading finds litellm in a local ask."""
    model_server.push({"text": "done"})
    done = warm.ask("hi", warm=False, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    modules = {m.split(".")[0] for m in imported_modules(done.stderr)}
    assert {"litellm", "yaml"} <= modules


def test_python_x_importtime_shows_the_same(warm: Warm, model_server: ScriptedModelServer) -> None:
    import subprocess

    warm.start()
    model_server.push({"text": "done"})
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *warm.command("ask", "hi")[1:]],
        env=warm.env,
        cwd=str(warm.workspace),
        capture_output=True,
        text=True,
        timeout=90,
        input="",
    )
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    modules = imported_modules(done.stderr)
    assert modules and not [m for m in modules if m.split(".")[0] in HEAVY]
    assert warm.served() == 1
