"""Issue 24 point 8 through the real command: `-m` for `--model`; `graphchat completion
bash|zsh|fish` (bash driven for real, values from the workspace, no heavy import); `graphchat
models [--provider P]`; `where` with the API base and each needed key."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphchat.threads import lines as ev
from graphchat.threads.store import ThreadStore
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer

BIN = Path(sys.executable).parent  # the virtualenv's bin: its `graphchat` is the real command

PLAN = """\
identifier: {name}
name: {name}
description: An example.
steps:
  - id: now
    tool_name: ask
    input:
      prompt: "when?"
      output_schema: {{type: object, properties: {{when: {{type: string}}}}}}
"""


def imported(stderr: str) -> set[str]:
    """The top-level modules a run imported (PYTHONPROFILEIMPORTTIME=1 writes them to stderr)."""
    return {
        line.rsplit("|", 1)[1].strip().split(".")[0]
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


# --- -m ------------------------------------------------------------------------------------------


def test_m_is_short_for_model(cli: GraphchatRunner, model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "picked"})
    done = cli("ask", "-m", "openai/picked-model", "which model?", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert model_server.requests[0]["model"] == "picked-model"
    for command in (["chat"], ["plan", "run"], ["plan", "go"], ["plan", "draft"]):
        shown = cli(*command, "--help")
        assert "-m M, --model M" in shown.stdout, command


# --- where ---------------------------------------------------------------------------------------


def test_where_shows_the_api_base_and_whether_each_needed_key_is_set(
    cli: GraphchatRunner, workspace: Path
) -> None:
    (workspace / "graphchat.yaml").write_text(
        "models:\n"
        "  default: openai/gpt-4o-mini\n"
        "  solver: {model: anthropic/claude-sonnet-4-5}\n"
        '  judge: {model: ollama_chat/qwen2.5, api_base: "http://127.0.0.1:11434"}\n'
    )
    env = {
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_API_BASE": "http://127.0.0.1:9/v1",
        "PYTHONPROFILEIMPORTTIME": "1",
    }
    done = cli("where", env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    model = lines.index("model      openai/gpt-4o-mini")
    assert (
        lines[model + 1].strip()
        == "api base: http://127.0.0.1:9/v1 (from OPENAI_API_BASE) · key: OPENAI_API_KEY set"
    )
    solver = lines.index("  solver   anthropic/claude-sonnet-4-5")
    assert "api base: the provider's default · key: ANTHROPIC_API_KEY not set" in lines[solver + 1]
    judge = lines.index("  judge    ollama_chat/qwen2.5")
    # an api_base given in the configuration is what ollama needs (litellm: OLLAMA_API_BASE)
    assert "api base: http://127.0.0.1:11434 · key: none needed" in lines[judge + 1]
    assert not {"litellm", "mcp"} & imported(done.stderr)  # answered without the heavy imports

    as_json = json.loads(cli("where", "--json", env={"GRAPHCHAT_API_KEY": "sk-configured"}).stdout)
    default, solver_access = as_json["access"]["default"], as_json["access"]["solver"]
    assert default["provider"] == "openai" and default["key_set"] and default["api_key_configured"]
    assert solver_access["keys_missing"] == ["ANTHROPIC_API_KEY"] and not solver_access["key_set"]
    assert as_json["access"]["judge"]["api_base"] == "http://127.0.0.1:11434"


# --- models --------------------------------------------------------------------------------------


def test_models_lists_a_providers_chat_models_marking_those_whose_key_is_set(
    cli: GraphchatRunner,
) -> None:
    with_key = cli(
        "models", "--provider", "openai", env={"OPENAI_API_KEY": "sk-test", "PYTHONPROFILEIMPORTTIME": "1"}
    )
    assert with_key.returncode == 0, with_key.stderr
    rows = with_key.stdout.splitlines()
    assert any(row.split()[:3] == ["✓", "openai/gpt-4o-mini", "openai"] for row in rows)
    assert all(row.startswith("✓ openai/") for row in rows)
    assert (
        f"{len(rows)} chat models; ✓ {len(rows)} whose provider's key is set here (openai)" in with_key.stderr
    )
    assert not {"litellm", "mcp"} & imported(with_key.stderr)

    without = cli("models", "--provider", "openai")
    assert [row[2:] for row in without.stdout.splitlines()] == [row[2:] for row in rows]
    assert all(row.startswith("  openai/") for row in without.stdout.splitlines())

    everything = cli("models", "--json", env={"ANTHROPIC_API_KEY": "sk-test"})
    models = {m["model"]: m for m in json.loads(everything.stdout)["models"]}
    assert models["anthropic/claude-haiku-4-5"]["key_set"] is True
    assert models["openai/gpt-4o-mini"]["key_set"] is False
    assert models["openai/gpt-4o-mini"]["keys_missing"] == ["OPENAI_API_KEY"]
    assert models["openai/gpt-4o-mini"]["max_input_tokens"] > 0
    assert len(models) > 500

    typo = cli("models", "--provider", "anthropc")
    assert typo.returncode == 2
    assert "did you mean: anthropic?" in typo.stderr


@pytest.mark.slow
def test_the_key_table_read_from_litellms_source_agrees_with_litellm(monkeypatch: pytest.MonkeyPatch) -> None:
    """`provider_needs` parses litellm's `validate_environment` rather than run it: every
    provider it read gives litellm's own answer, with none of the variables set and with all."""
    from graphchat.cli.models import key_status, provider_needs
    from graphchat.llm.runtime import litellm_module

    litellm = litellm_module()
    table = provider_needs()
    assert {"openai", "anthropic", "azure", "gemini", "bedrock", "ollama_chat", "groq"} <= set(table)
    every = {v for needs in table.values() for v in (*needs.variables, *needs.missing)}
    for variable in every:
        monkeypatch.delenv(variable, raising=False)
    checked = 0
    for provider in sorted(table):
        model = f"{provider}/some-model"
        try:
            _, resolved, _, _ = litellm.get_llm_provider(model=model)
        except Exception:
            continue
        if resolved != provider:
            continue
        for setting in (False, True):
            for variable in every:
                if setting:
                    monkeypatch.setenv(variable, "x")
                else:
                    monkeypatch.delenv(variable, raising=False)
            theirs = litellm.validate_environment(model=model)
            ours = key_status(provider)
            assert (ours.ok, list(ours.missing)) == (theirs["keys_in_environment"], theirs["missing_keys"]), (
                provider
            )
        checked += 1
    assert checked >= 30


# --- completion ----------------------------------------------------------------------------------

COMPLETE = r"""
set -e
eval "$(graphchat completion bash)"
comp() {  # what Tab offers after the words "$1"
  COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}
  read -ra COMP_WORDS <<< "$COMP_LINE"
  if [[ "$COMP_LINE" == *" " ]]; then COMP_WORDS+=(""); fi
  COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
  COMPREPLY=()
  _python_argcomplete graphchat "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
  echo "$1=> ${COMPREPLY[*]}"
}
"""


def bash_complete(lines: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> dict[str, list[str]]:
    script = COMPLETE + "\n".join(f"comp {json.dumps(line)}" for line in lines)
    environment = clean_env({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **(env or {})}, cwd)
    done = subprocess.run(
        ["bash", "-c", script], cwd=str(cwd), env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    offered = {}
    for row in done.stdout.splitlines():
        line, _, words = row.partition("=> ")
        offered[line] = words.split()
    assert set(offered) == set(lines), done.stdout
    return offered


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.process
def test_bash_completion_offers_commands_flags_and_the_workspaces_names(
    cli: GraphchatRunner, workspace: Path, tmp_path: Path
) -> None:
    for name in ("world_clock", "weather"):
        (workspace / "plans" / f"{name}.yaml").write_text(PLAN.format(name=name))
    thread = ThreadStore(workspace / "threads").create()
    thread.append(dict(ev.user("hello")))
    # Importing litellm or the MCP SDK while completing would leave a mark: neither may load.
    shims = tmp_path / "shims"
    for module in ("litellm", "mcp"):
        (shims / module).mkdir(parents=True)
        (shims / module / "__init__.py").write_text(
            f"open({str(tmp_path / module)!r}, 'w').close()\nraise ImportError('not while completing')\n"
        )
    elsewhere = tmp_path / "elsewhere"  # not in the workspace: `--home` names it
    elsewhere.mkdir()
    home = f"graphchat --home {workspace}"
    offered = bash_complete(
        [
            "graphchat pl",
            "graphchat plan r",
            f"{home} plan run ",
            f"{home} plan run w",
            f"{home} threads show ",
            f"{home} ask --thread ",
            f"{home} tools show ",
            f"{home} tools call plan__w",
            "graphchat completion ",
            "graphchat plan run --j",
        ],
        cwd=elsewhere,
        env={"PYTHONPATH": str(shims)},
    )
    assert offered["graphchat pl"] == ["plan"]
    assert offered["graphchat plan r"] == ["run"]
    assert offered[f"{home} plan run "] == ["weather", "world_clock"]
    assert offered[f"{home} plan run w"] == ["weather", "world_clock"]
    assert offered[f"{home} threads show "] == [thread.id]
    assert offered[f"{home} ask --thread "] == [thread.id]
    assert {"ask_user", "plan__weather", "plan__world_clock"} <= set(offered[f"{home} tools show "])
    assert offered[f"{home} tools call plan__w"] == ["plan__weather", "plan__world_clock"]
    assert offered["graphchat completion "] == ["bash", "zsh", "fish"]
    assert offered["graphchat plan run --j"] == ["--json"]
    assert not (tmp_path / "litellm").exists() and not (tmp_path / "mcp").exists()

    # the workspace found from the current folder, and model names from litellm's map (no shims)
    models = bash_complete(["graphchat plan show ", "graphchat ask -m openai/gpt-4o-mi"], cwd=workspace)
    assert models["graphchat plan show "] == ["weather", "world_clock"]
    assert "openai/gpt-4o-mini" in models["graphchat ask -m openai/gpt-4o-mi"]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_each_shells_script(cli: GraphchatRunner, shell: str) -> None:
    done = cli("completion", shell)
    assert done.returncode == 0, done.stderr
    assert "graphchat" in done.stdout and "_ARGCOMPLETE" in done.stdout
    if shutil.which(shell):  # the script is valid in its shell
        check = subprocess.run([shell, "-n"], input=done.stdout, capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stderr
    assert cli("completion", "tcsh").returncode == 2


@pytest.mark.skipif(shutil.which("fish") is None, reason="fish is not installed")
@pytest.mark.process
def test_fish_completes_plan_names(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "plans" / "world_clock.yaml").write_text(PLAN.format(name="world_clock"))
    script = cli("completion", "fish").stdout
    environment = clean_env({"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}, workspace)
    done = subprocess.run(
        ["fish", "--no-config", "-c", f"{script}\ncomplete -C 'graphchat --home {workspace} plan run w'"],
        cwd=str(workspace),
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert [line.split("\t")[0] for line in done.stdout.splitlines()] == ["world_clock"]
