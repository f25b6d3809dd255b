""" "Did you mean" wherever a name is looked up (issue 24, item 5): commands, plan names, a bare
tool name in a plan (`whoami` -> `probe__whoami`), settings keys, roles, thread ids (models:
tests/cli/test_configuration_first.py) — difflib's close matches, nothing corrected.
`GRAPHCHAT_HOME` is held to the rule of `--home`; `--input` without `=` stays exit 1."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import GraphchatRunner
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import stdio, write_servers

CLOCKS = """identifier: clocks
name: Clocks
description: a plan
steps:
  - id: who
    tool_name: {tool}
    input: {{}}
output: {{who: "{{{{who}}}}"}}
"""


def test_a_misspelt_command_names_the_close_ones(cli: GraphchatRunner) -> None:
    for typed, meant in (("paln", "plan"), ("tool", "tools"), ("treads", "threads")):
        done = cli(typed, "list")
        assert done.returncode == 2 and f"did you mean {meant}?" in done.stderr, done.stderr
    sub = cli("plan", "lsit")
    assert sub.returncode == 2 and "did you mean list?" in sub.stderr


def test_plan_names_and_bare_tool_names(cli: GraphchatRunner, workspace: Path) -> None:
    write_servers(workspace, {"probe": stdio()})
    (workspace / "plans" / "clocks.yaml").write_text(CLOCKS.format(tool="probe__whoami"))
    assert cli("tools", "list").returncode == 0  # the server's tools are known from now on
    done = cli("plan", "run", "clock")
    assert done.returncode == 1 and "unknown plan 'clock' (did you mean clocks?" in done.stderr
    (workspace / "plans" / "clocks.yaml").write_text(CLOCKS.format(tool="whoami"))
    checked = cli("plan", "validate", "clocks")
    assert checked.returncode == 1 and "did you mean probe__whoami?" in checked.stderr, checked.stderr
    ran = cli("plan", "run", "clocks")
    assert ran.returncode == 1 and "did you mean probe__whoami?" in ran.stderr, ran.stderr
    called = cli("tools", "call", "whoami")
    assert called.returncode == 1 and "probe__whoami" in called.stderr
    assert (workspace / "plans" / "clocks.yaml").read_text() == CLOCKS.format(tool="whoami")  # not corrected


def test_settings_keys_and_roles(cli: GraphchatRunner, workspace: Path) -> None:
    for text, said in (
        ("setings:\n  max_agent_iterations: 3\n", "did you mean settings?"),
        ("model: openai/gpt-4o-mini\n", "did you mean models?"),
        ("models:\n  defualt: openai/gpt-4o-mini\n", "did you mean default?"),
        ("settings:\n  max_agent_iteration: 3\n", "did you mean max_agent_iterations?"),
    ):
        (workspace / "graphchat.yaml").write_text(text)
        done = cli("where")
        assert done.returncode == 2 and said in done.stderr, (text, done.stderr)


def test_thread_ids(cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path) -> None:
    model_server.push({"text": "hello"})
    assert cli("ask", "hi", env=model_server.env()).returncode == 0
    (thread,) = [p.name for p in (workspace / "threads").iterdir() if not p.name.startswith(".")]
    typo = thread[:-1] + ("0" if thread[-1] != "0" else "1")
    done = cli("threads", "show", typo)
    assert done.returncode == 1 and f"did you mean {thread}?" in done.stderr, done.stderr


def test_graphchat_home_is_held_to_the_rule_of_home(tmp_path: Path) -> None:
    from tests.inprocess import run_cli

    empty = tmp_path / "not-a-workspace"
    empty.mkdir()
    for how in (["--home", str(empty)], []):
        done = run_cli([*how, "where"], env={"GRAPHCHAT_HOME": str(empty)}, home=tmp_path, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert "not a graphchat workspace" in done.stderr and "graphchat init" in done.stderr


def test_an_input_without_equals_stays_exit_1(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "plans" / "clocks.yaml").write_text(CLOCKS.format(tool="probe__whoami"))
    done = cli("plan", "run", "clocks", "--input", "zones")
    assert done.returncode == 1 and "--input must be key=value" in done.stderr
