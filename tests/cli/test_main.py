"""The entry point: usage errors exit 2 with nothing on stdout; a bad config is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner


@pytest.mark.parametrize("args", [(), ("plan",), ("tools",), ("threads",), ("ask",), ("plan", "run")])
def test_missing_command_is_a_usage_error(cli: GraphchatRunner, args: tuple[str, ...]) -> None:
    result = cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "usage:" in result.stderr


def test_bad_graphchat_yaml_is_one_line_naming_file_and_line(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "graphchat.yaml").write_text("models:\n  default: openai/x\n  boss: openai/y\n")
    result = cli("ask", "hi")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: {workspace / 'graphchat.yaml'}:3: models.boss: unknown role (roles: "
                     "default, chat, solver, judge, planner, sampling, repair; named models go under "
                     "models.named)"]  # fmt: skip
    assert "Traceback" not in result.stderr


def test_version_and_help_go_to_stdout(cli: GraphchatRunner) -> None:
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("graphchat ")
    helped = cli("--help")
    assert helped.returncode == 0 and "ask" in helped.stdout and "plan" in helped.stdout


def test_global_options_work_after_the_sub_command(tmp_path: Path) -> None:
    """`graphchat where --home DIR` and `graphchat tools list -v` (issue 11 point 10)."""
    import subprocess

    from tests.inprocess import run_cli

    one, two = tmp_path / "one", tmp_path / "two"
    for ws in (one, two):
        (ws / "plans").mkdir(parents=True)
        (ws / "graphchat.yaml").write_text("settings: {}\n")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(args, home=tmp_path, cwd=one)

    after = run("where", "--home", str(two))
    assert after.returncode == 0, after.stderr
    assert f"workspace  {two.resolve()}" in after.stdout
    before = run("--home", str(two), "where")
    assert before.stdout == after.stdout
    # -v after the sub-command is accepted (it turns tracebacks on for that command)
    listed = run("plan", "list", "-v", "--home", str(two))
    assert listed.returncode == 0, listed.stderr
    assert "unrecognized arguments" not in listed.stderr
