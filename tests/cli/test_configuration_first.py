"""Configuration before anything (issue 24, item 3): a missing key is exit 2 before litellm is
imported — in under a third of `import litellm`'s time, measured in the same run — naming the
variable, with nothing sent and no thread written; a solver plan runs no step; a key the
provider rejects on a turn's first request leaves no thread. The provider → key table is
checked against litellm's own `validate_environment`.

The start-up budget needs a process of its own (`graphchat` fixture); the other two run the real
entry point in process (`cli` fixture)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from graphchat.llm.keys import KEY_VARIABLES, known_providers
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer

LITELLM_PROBE = """
import json, os, sys, time
for names in {variables}:
    for name in names:
        os.environ.pop(name, None)
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
started = time.perf_counter()
import litellm
seconds = time.perf_counter() - started
litellm.suppress_debug_info = True
found = {{}}
for provider, names in {table}.items():
    empty = litellm.validate_environment(model=provider + "/some-model")
    os.environ[names[0]] = "sk-x"
    found[provider] = [empty["missing_keys"], litellm.validate_environment(model=provider + "/some-model")["keys_in_environment"]]
    del os.environ[names[0]]
providers = sorted(str(getattr(p, "value", p)) for p in litellm.provider_list)
print(json.dumps({{"seconds": seconds, "found": found, "providers": providers}}))
"""


def litellm_probe(tmp_path: Path) -> dict[str, object]:
    """`import litellm`'s time, and what litellm says each provider of the table needs."""
    table = {p: list(v) for p, v in KEY_VARIABLES.items()}
    code = LITELLM_PROBE.format(variables=list(table.values()), table=table)
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env=clean_env(None, tmp_path),
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def threads(workspace: Path) -> list[str]:
    folder = workspace / "threads"
    return [p.name for p in folder.iterdir() if not p.name.startswith(".")] if folder.exists() else []


def test_a_missing_key_is_exit_2_in_under_a_third_of_the_litellm_import(
    graphchat: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path, tmp_path: Path
) -> None:
    probe = litellm_probe(tmp_path)
    env = {"GRAPHCHAT_MODEL": "openai/gpt-4o-mini", "GRAPHCHAT_API_BASE": model_server.url}
    started = time.perf_counter()
    done = graphchat("ask", "hi", env=env)
    took = time.perf_counter() - started
    assert done.returncode == 2, done.stderr
    assert "OPENAI_API_KEY" in done.stderr and done.stdout == ""
    assert took < float(probe["seconds"]) / 3, (took, probe["seconds"])  # type: ignore[arg-type]
    assert model_server.requests == []  # nothing sent
    assert threads(workspace) == []  # no thread written
    # the table is litellm's: with none of its variables the same ones are missing; one is enough
    found = probe["found"]
    assert isinstance(found, dict)
    for provider, variables in KEY_VARIABLES.items():
        missing, with_first = found[provider]
        assert set(missing) == set(variables), (provider, missing)
        assert with_first is True, provider
    assert sorted(known_providers()) == probe["providers"]  # read from its source, not imported
    for model, close in (("opnai/gpt-4o", "openai/gpt-4o"), ("gpt-4o-mni", "gpt-4o-mini")):
        started = time.perf_counter()
        wrong = graphchat("ask", "--model", model, "hi")
        took = time.perf_counter() - started
        assert wrong.returncode == 2 and f"unknown model '{model}'" in wrong.stderr, wrong.stderr
        assert f"did you mean: {close}" in wrong.stderr
        assert took < float(probe["seconds"]) / 3, (took, probe["seconds"])  # type: ignore[arg-type]


def test_a_solver_plan_runs_no_step_without_a_key(cli: GraphchatRunner, workspace: Path) -> None:
    (workspace / "plans" / "brief.yaml").write_text(
        "identifier: brief\nname: Brief\ndescription: sleeps, then a report\n"
        "steps:\n  - id: nap\n    tool_name: debug__sleep\n    input: {seconds: 0}\n"
        "solver:\n  query_to_answer: say it\n  data: '{{nap}}'\n"
    )
    env = {"GRAPHCHAT_MODEL": "anthropic/claude-sonnet-4-5", "GRAPHCHAT_TEST_TOOLS": "1"}
    done = cli("plan", "run", "brief", env=env)
    assert done.returncode == 2, done.stderr
    assert "ANTHROPIC_API_KEY" in done.stderr
    assert "debug__sleep" not in done.stderr and "step" not in done.stderr, done.stderr


def test_a_key_rejected_on_the_first_request_leaves_no_thread(
    cli: GraphchatRunner, model_server: ScriptedModelServer, workspace: Path
) -> None:
    model_server.push({"error": 401})
    done = cli("ask", "hi", env={**model_server.env(), "GRAPHCHAT_API_KEY": "sk-wrong"})
    assert done.returncode == 2, done.stderr
    assert len(model_server.requests) == 1
    assert threads(workspace) == []
    again = cli("ask", "-c", "hi again", env={**model_server.env()})
    assert "starting a new one" in again.stderr  # nothing to continue
