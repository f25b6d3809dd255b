"""The entry point: usage errors exit 2 with nothing on stdout; a bad config is one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import GraphchatRunner


@pytest.mark.parametrize("args", [(), ("plan",), ("tools",), ("threads",), ("ask",), ("plan", "run")])
def test_missing_command_is_a_usage_error(graphchat: GraphchatRunner, args: tuple[str, ...]) -> None:
    result = graphchat(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "usage:" in result.stderr


def test_bad_graphchat_yaml_is_one_line_naming_file_and_line(
    graphchat: GraphchatRunner, workspace: Path
) -> None:
    (workspace / "graphchat.yaml").write_text("models:\n  default: openai/x\n  boss: openai/y\n")
    result = graphchat("ask", "hi")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines == [f"error: {workspace / 'graphchat.yaml'}:3: models.boss: unknown role (roles: "
                     "default, chat, solver, judge, planner)"]  # fmt: skip
    assert "Traceback" not in result.stderr


def test_version_and_help_go_to_stdout(graphchat: GraphchatRunner) -> None:
    version = graphchat("--version")
    assert version.returncode == 0 and version.stdout.startswith("graphchat ")
    helped = graphchat("--help")
    assert helped.returncode == 0 and "ask" in helped.stdout and "plan" in helped.stdout
