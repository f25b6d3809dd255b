"""run_cli, the in-process tier: the real entry point, with the process's state given back."""

from __future__ import annotations

import logging
import os
import signal
import sys
from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.inprocess import run_cli
from tests.scripted_server import ScriptedModelServer


def test_a_run_gives_back_the_environment_cwd_streams_and_signal_handlers(tmp_path: Path) -> None:
    import graphchat.cli.main  # noqa: F401 - what importing it sets (LITELLM_LOCAL_MODEL_COST_MAP) stays

    before = (dict(os.environ), os.getcwd(), sys.argv, sys.stdin, sys.stdout, sys.stderr)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    root_handlers = list(logging.getLogger().handlers)
    done = run_cli(["--home", str(tmp_path / "nowhere"), "where"], env={"GRAPHCHAT_X": "1"}, cwd=tmp_path)
    assert done.returncode == 2 and "not a graphchat workspace" in done.stderr
    assert (dict(os.environ), os.getcwd(), sys.argv, sys.stdin, sys.stdout, sys.stderr) == before
    assert {s: signal.getsignal(s) for s in handlers} == handlers
    assert logging.getLogger().handlers == root_handlers


def test_argparse_exits_become_exit_codes(cli: GraphchatRunner) -> None:
    helped = cli("--help")
    assert helped.returncode == 0 and "usage: graphchat" in helped.stdout
    wrong = cli("plna")
    assert wrong.returncode == 2 and "did you mean" in wrong.stderr and wrong.stdout == ""


def test_stdin_is_the_given_text_or_bytes_never_a_terminal(
    cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    model_server.push({"text": "one"}, {"text": "two"})
    for given in ("a question\n", b"a question\n"):  # `ask ""` with piped text: the text is the question
        done = cli("ask", "", input=given, env=model_server.env())
        assert done.returncode == 0, done.stderr
    assert [r["messages"][-1]["content"] for r in model_server.requests] == ["a question"] * 2
    binary = cli("ask", "x", input=b"\x00\xff", env=model_server.env())
    assert binary.returncode == 2 and "binary" in binary.stderr


def test_a_warn_once_warns_again_in_the_next_run(cli: GraphchatRunner, workspace: Path) -> None:
    """Process-wide state is reset around each run, as a new process would have it."""
    (workspace / "threads" / "0123456789ab").mkdir()
    (workspace / "threads" / "0123456789ab" / "meta.json").write_text('{"title": 5}')
    first, second = cli("threads", "list"), cli("threads", "list")
    assert first.stderr == second.stderr


def test_log_levels_set_by_a_run_are_given_back(tmp_path: Path) -> None:
    """-vv and GRAPHCHAT_LOG set the root's and their targets' levels: the next run starts
    without them (it would otherwise log at DEBUG where it should not)."""
    root, target = logging.getLogger(), logging.getLogger("graphchat.catalog.mcp")
    before = (root.level, target.level)
    home = ["--home", str(tmp_path / "nowhere"), "-vv", "where"]
    run_cli(home, env={"GRAPHCHAT_LOG": "warning,graphchat.catalog.mcp=debug"}, cwd=tmp_path)
    assert (root.level, target.level) == before
