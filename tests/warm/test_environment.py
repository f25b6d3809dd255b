"""The warm helper runs each turn in the asking process's environment (issue 18, break 3).

A helper started under one `GITHUB_API_URL` / `GITHUB_REPOSITORY` serves a client whose values
are others: the github pack calls the client's API, for the client's repository, and the token
reaches no other host; an exec tool sees the client's value of a variable. A request whose
environment differs from the helper's in a variable the helper itself depends on (its MCP
servers, model, credentials) is refused, naming the variables: the client asks itself (and
says why with `-v`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import graphchat
from graphchat.warm import wire
from tests.fake_github import FakeGithub
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers
from tests.warm.conftest import Warm
from tests.warm.test_lifecycle import info_of, tool_results
from tests.warm.test_safety import _ask_directly

TOKEN = "ghp_warmEnvironmentToken0123456789abcd"


@pytest.fixture
def two_apis() -> Iterator[tuple[FakeGithub, FakeGithub]]:
    first = FakeGithub(repo="alpha/x").start()
    second = FakeGithub(repo="beta/y").start()
    try:
        yield first, second
    finally:
        first.stop()
        second.stop()


def _pull(number: int, title: str) -> dict[str, object]:
    return {
        "number": number,
        "title": title,
        "body": "",
        "state": "open",
        "merged": False,
        "head": {"ref": "feature", "sha": "a" * 40},
        "base": {"ref": "main", "sha": "b" * 40},
        "html_url": f"https://example.invalid/pull/{number}",
        "user": {"login": "ada"},
    }


def _github_env(fake: FakeGithub) -> dict[str, str]:
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": fake.repo}


def _served(warm: Warm, env: dict[str, str]) -> int:
    """The turns the helper of `env`'s identity has served."""
    done = warm.run("warm", "--status", "--json", env=env)
    return int(json.loads(done.stdout)["turns_served"])


def _authorized(fake: FakeGithub) -> list[str]:
    return [str(r["path"]) for r in fake.requests if TOKEN in json.dumps(r.get("headers") or {})]


def test_the_github_pack_calls_the_clients_api_for_the_clients_repository(
    warm: Warm, model_server: ScriptedModelServer, two_apis: tuple[FakeGithub, FakeGithub]
) -> None:
    first, second = two_apis
    first.pulls[7] = _pull(7, "pull request of alpha/x")
    second.pulls[7] = _pull(7, "pull request of beta/y")
    (warm.workspace / "graphchat.yaml").write_text("tools:\n  packs: [github]\n")
    warm.start(env=_github_env(first))

    model_server.push(
        {"tool_calls": [{"name": "builtin__gh_pr_meta", "arguments": {"pr": 7}}]}, {"text": "B"}
    )
    asked = warm.ask("the PR?", env=_github_env(second))
    assert (asked.returncode, asked.stdout) == (0, "B\n"), asked.stderr
    assert _served(warm, _github_env(first)) == 1  # the helper ran it
    [result] = tool_results(model_server)
    assert "pull request of beta/y" in result, result
    assert first.requests == []  # the helper's API never heard of this turn, nor got the token
    assert _authorized(second) == ["/api/v3/repos/beta/y/pulls/7"]

    # the next client, with the helper's own values, is not served the previous client's repository
    model_server.push(
        {"tool_calls": [{"name": "builtin__gh_pr_meta", "arguments": {"pr": 7}}]}, {"text": "A"}
    )
    asked = warm.ask("the PR?", env=_github_env(first))
    assert (asked.returncode, asked.stdout) == (0, "A\n"), asked.stderr
    assert _served(warm, _github_env(first)) == 2
    [result] = tool_results(model_server)
    assert "pull request of alpha/x" in result, result
    assert _authorized(first) == ["/api/v3/repos/alpha/x/pulls/7"]
    assert len(second.requests) == 1


EXEC_TOOL = (
    "name: greeting\ndescription: the GREETING variable\nkind: exec\n"
    f"command: {sys.executable}\n"
    "args: ['-c', 'import os; print(os.environ.get(\"GREETING\", \"unset\"))']\n"
    "output: text\nread_only: true\ninput_schema: {type: object, properties: {}}\n"
)


def test_an_exec_tool_sees_the_clients_value_of_a_variable(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    (warm.workspace / "tools").mkdir()
    (warm.workspace / "tools" / "greeting.yaml").write_text(EXEC_TOOL)
    warm.start(env={"GREETING": "from-the-helper"})
    for value in ("from-the-first-client", None, "from-the-second-client"):
        model_server.push({"tool_calls": [{"name": "user__greeting", "arguments": {}}]}, {"text": "ok"})
        asked = warm.ask("greet", env={"GREETING": value} if value else None)
        assert (asked.returncode, asked.stdout) == (0, "ok\n"), asked.stderr
        [result] = tool_results(model_server)
        assert (value or "unset") in result, (value, result)
        assert "from-the-helper" not in result
    assert warm.status()["turns_served"] == 3


def test_a_request_whose_mcp_server_variable_differs_is_refused_naming_it(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    """The client's identity is trusted for nothing: the helper checks the variables its MCP
    servers were started with against the request's own environment."""
    write_servers(warm.workspace, {"t": stdio(env={"SERVER_SETTING": "${SERVER_SETTING}"})})
    pid = warm.start(env={"SERVER_SETTING": "one"})
    info = info_of(warm, pid)
    env = {**warm.env, "SERVER_SETTING": "two"}
    reply = _ask_directly(info["_socket"], key=info["key"], env=env)
    assert reply.get("t") == "refused", reply
    assert "SERVER_SETTING" in str(reply.get("why")), reply
    assert "two" not in str(reply.get("why"))  # names, never values

    # the same environment as the helper's but for the shell's own variables: accepted, run
    same = {**warm.env, "SERVER_SETTING": "one", "PWD": "/elsewhere", "SHLVL": "7", "_": "/bin/x"}
    model_server.push({"text": "fine"})
    messages = _turn_directly(info["_socket"], key=info["key"], env=same)
    assert messages[0].get("t") == "accepted", messages
    assert messages[-1] == {"t": "exit", "code": 0}, messages
    assert _served(warm, {"SERVER_SETTING": "one"}) == 1


def _turn_directly(socket_path: str, **fields: Any) -> list[dict[str, Any]]:
    """A request sent as the client sends it; every message of the turn, up to the exit."""
    request = {
        "op": "ask",
        "protocol": wire.PROTOCOL,
        "version": graphchat.__version__,
        "flags": {
            "json": False,
            "yes": False,
            "model": None,
            "answers": None,
            "no_stream": False,
            "park": False,
            "home": None,
            "wait": False,
        },
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
        sock.settimeout(60)
        sock.connect(socket_path)
        sock.sendall(wire.encode(request))
        with sock.makefile("rb") as stream:
            return [wire.decode(line) for line in stream]


def _repo_with_note(folder: Path, note: str) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)

    folder.mkdir(exist_ok=True)
    git("init", "-q")
    (folder / "NOTE.md").write_text(note)
    git("add", "NOTE.md")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "note")


def test_git_runs_in_the_clients_environment(
    warm: Warm, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    """git reads its own variables (GIT_DIR here) from the client's environment, not the helper's."""
    (warm.workspace / "graphchat.yaml").write_text("tools:\n  packs: [git]\n")
    _repo_with_note(warm.workspace, "the helper's repository\n")
    other = tmp_path / "other"
    _repo_with_note(other, "the client's repository\n")
    warm.start()
    for env, expected in (({"GIT_DIR": str(other / ".git")}, "the client's"), ({}, "the helper's")):
        call = {"name": "builtin__git_file", "arguments": {"path": "NOTE.md", "ref": "HEAD"}}
        model_server.push({"tool_calls": [call]}, {"text": "read"})
        asked = warm.ask("the note?", env=env)
        assert (asked.returncode, asked.stdout) == (0, "read\n"), asked.stderr
        [result] = tool_results(model_server)
        assert expected in result, (env, result)
    assert warm.status()["turns_served"] == 2
