"""Point 10: YAML alias bombs (and recursive aliases) in every YAML file graphchat reads are
refused with one line naming the file; a broken plan never stops commands that do not run it.

Each command runs under a timeout: before the fix these hung (or ate gigabytes) walking 10^9
expanded nodes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.adversarial.support import CORPUS
from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer

YAML = CORPUS / "yaml"
LAUGHS = (YAML / "billion_laughs.yaml").read_text()
RECURSIVE = (YAML / "recursive_alias.yaml").read_text()
TIMEOUT = 60


def error_lines(stderr: str) -> list[str]:
    assert "Traceback" not in stderr, stderr
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.fixture
def bomb_plan(workspace: Path) -> Path:
    path = workspace / "plans" / "bomb.yaml"
    shutil.copy(YAML / "plan_billion_laughs.yaml", path)
    (workspace / "plans" / "fine.yaml").write_text(
        "identifier: fine\nname: Fine\ndescription: a plan that works\n"
        "steps:\n  - id: E0\n    tool_name: filter\n    input: {over: [1, 2], where: {value: '{{item}}', op: gt, to: 1}}\n"
        "output: {kept: '{{E0}}'}\n"
    )
    return path


def test_plan_list_and_tools_list_survive_a_bomb_plan(cli: GraphchatRunner, bomb_plan: Path) -> None:
    listed = cli("plan", "list", timeout=TIMEOUT)
    assert listed.returncode == 0, listed.stderr
    assert "fine" in listed.stdout and "bomb" not in listed.stdout
    assert str(bomb_plan) in listed.stderr and "alias" in listed.stderr
    tools = cli("tools", "list", timeout=TIMEOUT)
    assert tools.returncode == 0, tools.stderr
    assert "plan__fine" in tools.stdout and "plan__bomb" not in tools.stdout


def test_ask_survives_a_bomb_plan(
    cli: GraphchatRunner, model_server: ScriptedModelServer, bomb_plan: Path
) -> None:
    model_server.push({"text": "fine"})
    done = cli("ask", "hello", env=model_server.env(), timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "fine\n"
    offered = [t["function"]["name"] for t in model_server.requests[0].get("tools", [])]
    assert "plan__fine" in offered and "plan__bomb" not in offered


@pytest.mark.parametrize("command", [("plan", "run", "bomb"), ("plan", "validate")])
def test_running_or_validating_the_bomb_plan_is_one_error_naming_it(
    cli: GraphchatRunner, bomb_plan: Path, command: tuple[str, ...]
) -> None:
    done = cli(*command, timeout=TIMEOUT)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    assert str(bomb_plan) in done.stderr and "alias" in done.stderr


@pytest.mark.parametrize("bomb", [LAUGHS, RECURSIVE], ids=["laughs", "recursive"])
@pytest.mark.parametrize("target", ["graphchat.yaml", "catalog/servers.yaml"])
def test_a_bomb_in_a_config_file_is_a_config_error_naming_it(
    cli: GraphchatRunner, workspace: Path, target: str, bomb: str
) -> None:
    path = workspace / target
    path.write_text(bomb + ("mcpServers: {}\n" if "servers" in target else "settings: {}\n"))
    done = cli("tools", "list", timeout=TIMEOUT)
    assert done.returncode == 2, done.stderr
    [line] = error_lines(done.stderr)
    assert line.startswith(f"error: {path}") and "alias" in line


def test_a_bomb_answers_file_is_a_config_error(cli: GraphchatRunner, workspace: Path, tmp_path: Path) -> None:
    answers = tmp_path / "answers.yaml"
    answers.write_text(LAUGHS + "E0: {ok: true}\n")
    (workspace / "plans" / "q.yaml").write_text(
        "identifier: q\nname: Q\ndescription: asks\nsteps:\n"
        "  - id: E0\n    tool_name: ask\n    input:\n      prompt: Sure?\n"
        "      output_schema: {type: object, properties: {ok: {type: boolean}}}\n"
    )
    done = cli("plan", "run", "q", "--answers", str(answers), timeout=TIMEOUT)
    assert done.returncode == 2, done.stderr
    [line] = error_lines(done.stderr)
    assert str(answers) in line and "alias" in line


def test_an_input_yaml_file_bomb_is_refused(cli: GraphchatRunner, tmp_path: Path, bomb_plan: Path) -> None:
    data = tmp_path / "input.yaml"
    data.write_text(LAUGHS)
    done = cli("plan", "run", "fine", f"@{data}", timeout=TIMEOUT)
    assert done.returncode == 3, done.stderr  # the plan's input is invalid
    [line] = error_lines(done.stderr)
    assert str(data) in line and "alias" in line


def test_anchors_within_the_budget_still_work(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "plans" / "anchors.yaml").write_text(
        "identifier: anchors\nname: Anchors\ndescription: reuses a mapping\n"
        "steps:\n"
        "  - id: E0\n    tool_name: filter\n    input: &f {over: [1, 2, 3], where: {value: '{{item}}', op: gt, to: 1}}\n"
        "  - id: E1\n    tool_name: filter\n    input: *f\n"
        "output: {a: '{{E0}}', b: '{{E1}}'}\n"
    )
    done = cli("plan", "run", "anchors", timeout=TIMEOUT)
    assert done.returncode == 0, done.stderr
