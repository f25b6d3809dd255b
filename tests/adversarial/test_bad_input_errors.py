"""Point 15: bad bytes and bad paths are errors naming what is wrong, with the right exit code:
non-UTF-8 graphchat.yaml / servers.yaml / --answers (exit 2, the file named), binary piped stdin
to `ask` (exit 2, nothing written), a server whose `cwd` is missing (said so, not "command not
found")."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner
from tests.inprocess import run_cli
from tests.scripted_server import ScriptedModelServer

LATIN1 = "# caf\xe9 au lait\n".encode("latin-1")


def the_error(stderr: str) -> str:
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("error:")]
    return line


@pytest.mark.parametrize("target", ["graphchat.yaml", "catalog/servers.yaml"])
def test_a_non_utf8_config_file_is_a_config_error_naming_it(
    cli: GraphchatRunner, workspace: Path, target: str
) -> None:
    path = workspace / target
    body = b"mcpServers: {}\n" if "servers" in target else b"settings: {}\n"
    path.write_bytes(body + LATIN1)
    done = cli("tools", "list")
    assert done.returncode == 2, done.stderr
    line = the_error(done.stderr)
    assert line.startswith(f"error: {path}:2:") and "UTF-8" in line


def test_a_non_utf8_answers_file_is_a_config_error_naming_it(
    cli: GraphchatRunner, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "plans" / "q.yaml").write_text(
        "identifier: q\nname: Q\ndescription: asks\nsteps:\n"
        "  - id: E0\n    tool_name: ask\n    input:\n      prompt: Drink?\n"
        "      output_schema: {type: object, properties: {drink: {type: string}}}\n"
    )
    answers = tmp_path / "answers.yaml"
    answers.write_bytes(b"E0: {drink: caf\xe9}\n")
    done = cli("plan", "run", "q", "--answers", str(answers))
    assert done.returncode == 2, done.stderr
    line = the_error(done.stderr)
    assert str(answers) in line and "UTF-8" in line


def test_a_non_utf8_plan_is_skipped_by_plan_list(cli: GraphchatRunner, workspace: Path) -> None:
    path = workspace / "plans" / "latin.yaml"
    path.write_bytes(b"identifier: latin\n" + LATIN1)
    done = cli("plan", "list")
    assert done.returncode == 0, done.stderr
    assert str(path) in done.stderr and "UTF-8" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("data", [b"\x7fELF\x02\x01\x01\x00\x00\xff\xfe", b"text then a NUL\x00 byte"])
def test_binary_piped_stdin_to_ask_is_refused_and_nothing_is_written(
    workspace: Path, model_server: ScriptedModelServer, data: bytes
) -> None:
    done = run_cli(
        ["--home", str(workspace), "ask", "what is this?"],
        env=model_server.env(),
        input=data,
        home=workspace.parent,
        cwd=workspace,
    )
    stderr = done.stderr
    assert done.returncode == 2, stderr
    assert "stdin" in the_error(stderr) and "binary" in stderr
    assert model_server.requests == []
    assert [p for p in (workspace / "threads").iterdir() if not p.name.startswith(".")] == []
    assert done.stdout == ""


def test_utf8_piped_stdin_still_reaches_the_model(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "a diff"})
    done = cli("ask", "review this", input="caf\u00e9\r\nline two\n", env=model_server.env())
    assert done.returncode == 0, done.stderr
    content = model_server.requests[0]["messages"][-1]["content"]
    assert content.startswith("review this\n\n") and content.endswith("caf\u00e9\nline two")


def test_a_missing_server_cwd_is_reported_as_such(cli: GraphchatRunner, workspace: Path) -> None:
    from tests.servers.support import stdio, write_servers

    write_servers(workspace, {"t": stdio(cwd="no/such/folder")})
    done = cli("tools", "call", "t__echo", "--input", "text=hi")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"cwd {workspace / 'no' / 'such' / 'folder'} does not exist" in done.stderr
    assert "command not found" not in done.stderr
