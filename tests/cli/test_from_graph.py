"""A graph project opens in graphchat (issue 26): `init --from-graph`, named models, fallbacks,
the user configuration layer.

The graph project is a copy of graph's own repository's `.graph/` (tests/fixtures/graph:
config.toml, plans/, tools/ — MIT, copied from tylerdavis/graph). Every command is the real
entry point run in process (the `cli` fixture, `tests.inprocess.run_cli`); models are the
scripted server on loopback, reached through litellm's real HTTP path. The spent line on a
terminal needs the pty, so that test starts `graphchat` as a process.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import clean_env
from tests.inprocess import run_cli
from tests.scripted_server import ScriptedModelServer

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.test",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.test",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def graph_project(root: Path, config: str | None = None) -> Path:
    """A folder holding graph's `.graph/` as graph's repository has it (config.toml, plans, tools)."""
    project = root / "proj"
    (project / ".graph").mkdir(parents=True)
    shutil.copytree(FIXTURES / "plans", project / ".graph" / "plans")
    shutil.copytree(FIXTURES / "tools", project / ".graph" / "tools")
    text = (FIXTURES / "config.toml").read_text() if config is None else config
    (project / ".graph" / "config.toml").write_text(text)
    return project


def tree_digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def gc(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real command, run in process; HOME and XDG_CONFIG_HOME are the test's (no user layer
    leaks in)."""
    base = {"HOME": str(cwd.parent / "home"), "XDG_CONFIG_HOME": str(cwd.parent / "config"), **(env or {})}
    return run_cli(args, env=base, home=cwd, cwd=cwd, timeout=timeout)


# --- init --from-graph ---------------------------------------------------------------------------


def test_init_from_graph_carries_the_configuration_and_graphs_plans_validate_in_place(tmp_path: Path) -> None:
    project = graph_project(tmp_path)
    before = tree_digest(project / ".graph")
    done = gc("init", "--from-graph", cwd=project)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(project.resolve())
    said = done.stderr
    for line in (
        "carried: models.default: anthropic/claude-sonnet-5",
        "carried: models.judge: anthropic/claude-haiku-4-5",
        "carried: models.repair: anthropic/claude-haiku-4-5",
        "carried: models.named.scout: anthropic/claude-haiku-4-5",
        "carried: models.named.reviewer: anthropic/claude-sonnet-5",
        "carried: pricing.claude-sonnet-5",
        "carried: prompts.chat",
        "carried: tools.packs: github",
        "carried: plans.paths: plans, .graph/plans",
        "carried: tools.paths: .graph/tools",
    ):
        assert line in said, said
    assert "not carried: prompts.workbench" in said and ".graph/config.toml:67" in said
    config = (project / "graphchat.yaml").read_text()
    assert "# .graph/config.toml:27" in config  # [models.named.scout] is on line 27 of graph's file
    assert "Repository context scout" in config  # the description travels
    assert (project / "catalog" / "servers.yaml").is_file()
    # graph's plans open where they are: all of them validate, the named-model ones included
    done = gc("plan", "validate", cwd=project)
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout + done.stderr
    valid = sorted(line.split("'")[1] for line in said.splitlines() if line.rstrip().endswith("is valid"))
    assert valid == sorted(p.stem for p in FIXTURES.glob("plans/*.yaml"))
    assert {"graph_review_core", "graph_review_9000"} <= set(valid)
    # and graph's tools are the catalog's user tools, read from .graph/tools
    listed = json.loads(gc("tools", "list", "--json", cwd=project).stdout)
    names = {tool["name"] for tool in listed["tools"]}
    assert {"user__repo_diff", "user__repo_grep"} <= names
    assert tree_digest(project / ".graph") == before  # graph's files: never changed


def test_init_from_graph_twice_is_a_no_op_and_a_changed_file_needs_force(tmp_path: Path) -> None:
    project = graph_project(tmp_path)
    assert gc("init", "--from-graph", str(project), cwd=tmp_path).returncode == 0
    written = (project / "graphchat.yaml").read_text()
    again = gc("init", "--from-graph", str(project), cwd=tmp_path)
    assert again.returncode == 0 and "nothing to write" in again.stderr
    (project / "graphchat.yaml").write_text(written + "# my edit\n")
    refused = gc("init", "--from-graph", str(project), cwd=tmp_path)
    assert refused.returncode == 1
    assert refused.stderr.count("\n") <= 2 and "graphchat.yaml exists and differs" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert (project / "graphchat.yaml").read_text().endswith("# my edit\n")
    forced = gc("init", "--from-graph", "--force", str(project), cwd=tmp_path)
    assert forced.returncode == 0 and (project / "graphchat.yaml").read_text() == written


def test_init_from_graph_without_a_graph_project_is_one_line_exit_2(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    done = gc("init", "--from-graph", cwd=tmp_path / "empty")
    assert done.returncode == 2
    assert "no graph project here (no .graph/config.toml)" in done.stderr
    assert "Traceback" not in done.stderr


def test_init_from_graph_reads_graphs_global_layer_and_lists_what_it_cannot_carry(tmp_path: Path) -> None:
    project = graph_project(
        tmp_path,
        config='[providers.local]\ntype = "openai_compat"\nbase_url = "http://127.0.0.1:9/v1"\n\n'
        '[models.chat]\nprovider = "local"\nmodel = "llama3"\n'
        'fallbacks = [{ provider = "anthropic", model = "claude-haiku-4-5" }]\n\n'
        '[storage]\nbackend = "memory"\n\n[mcp.linear]\nurl = "https://mcp.linear.test/mcp"\n'
        'headers = { Authorization = "Bearer ${LINEAR_TOKEN}" }\n',
    )
    global_config = tmp_path / "home" / ".config" / "graph" / "config.toml"
    global_config.parent.mkdir(parents=True)
    global_config.write_text(
        '[providers.anthropic]\ntype = "anthropic"\napi_key = "${ANTHROPIC_API_KEY}"\n\n'
        "[settings]\nmax_agent_iterations = 9\nhistory_limit = 50\n"
    )
    done = gc("init", "--from-graph", cwd=project)
    assert done.returncode == 0, done.stderr
    assert f"read {global_config}, .graph/config.toml" in done.stderr
    assert "carried: settings.max_agent_iterations" in done.stderr
    assert "not carried: settings.history_limit: no graphchat equivalent" in done.stderr
    assert "not carried: [storage]: not carried, set GRAPHCHAT_STORAGE instead" in done.stderr
    config = (project / "graphchat.yaml").read_text()
    assert f"# {global_config}:6" in config  # max_agent_iterations, from the global layer
    shown = json.loads(gc("config", "show", "--json", cwd=project).stdout)
    chat = shown["config"]["models"]["chat"]
    assert chat["model"] == "openai/llama3" and chat["api_base"] == "http://127.0.0.1:9/v1"
    assert chat["fallbacks"] == [{"model": "anthropic/claude-haiku-4-5"}]
    servers = (project / "catalog" / "servers.yaml").read_text()
    assert '"type": "http"' in servers and "${LINEAR_TOKEN}" in servers


# --- named models --------------------------------------------------------------------------------


def minimal(schema: dict[str, Any]) -> Any:
    """The smallest value of a JSON schema (as the scripted model's answer)."""
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        return {k: minimal(props.get(k, {})) for k in schema.get("required", [])}
    if kind == "array":
        return [minimal(schema.get("items") or {}) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "boolean":
        return True
    if kind in ("integer", "number"):
        return schema.get("minimum", 0)
    if kind == "null":
        return None
    return "x"


def schema_answer(body: dict[str, Any]) -> dict[str, Any]:
    """Answer with the smallest value of the schema the request asks for (response_format, or an
    agent step's system prompt)."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema")
    if schema is None:
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        schema = json.loads(system.split("matching this schema:\n", 1)[1].split("\n\n", 1)[0])
    return {"json": minimal(schema)}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def test_graphs_review_plan_runs_with_its_named_models_routed(tmp_path: Path) -> None:
    server = ScriptedModelServer().start()
    try:
        server.default = schema_answer
        # graph's own configuration, its provider pointed at the scripted server
        text = (FIXTURES / "config.toml").read_text()
        text = text.replace('type = "anthropic"', f'type = "openai_compat"\nbase_url = "{server.url}"')
        project = graph_project(tmp_path, config=text)
        (project / "src").mkdir()
        (project / "src" / "lib.rs").write_text("pub fn run() {}\n")
        (project / "CLAUDE.md").write_text("# Invariants\n")  # the review reads the repo's rules
        git(project, "init", "-q", "-b", "main")
        git(project, "add", "src", "CLAUDE.md")
        git(project, "commit", "-q", "-m", "first")
        git(project, "tag", "v1")
        (project / "src" / "lib.rs").write_text("pub fn run() -> i32 { 4 }\n")
        git(project, "commit", "-qam", "run returns 4")
        assert gc("init", "--from-graph", cwd=project).returncode == 0
        # graph's provider reads `${ANTHROPIC_API_KEY}`: carried as written, expanded at each call
        env = {"ANTHROPIC_API_KEY": "sk-test"}
        args = ("plan", "run", "graph_review_core", "--input", "base=v1", "--input", "head=HEAD", "--json")
        done = gc(*args, cwd=project, env=env, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        report = json.loads(done.stdout)
        models = [request["model"] for request in server.requests]
        # E3 groups the change (builtin__infer: default), the scout agent runs per group (named
        # model `scout` = claude-haiku-4-5), the review is the named model `reviewer`
        assert "claude-haiku-4-5" in models and "claude-sonnet-5" in models, models

        def said(request: dict[str, Any]) -> str:
            return json.dumps(request["messages"])

        scouts = [r["model"] for r in server.requests if "matching this schema" in said(r)]
        reviews = [r["model"] for r in server.requests if "PASS 2 (HIGHEST PRIORITY)" in said(r)]
        assert scouts and set(scouts) == {"claude-haiku-4-5"}  # the agent step's `model: scout`
        assert reviews == ["claude-sonnet-5"]  # the review's `model: reviewer`
        by_step = {row["path"]: row for row in report["usage"]["by_step"]}
        scout_steps = [path for path in by_step if path.startswith("E4f")]
        assert scout_steps, by_step
        by_model = {row["model"]: row for row in report["usage"]["by_model"]}
        assert {"openai/claude-haiku-4-5", "openai/claude-sonnet-5"} <= set(by_model)
    finally:
        server.stop()


def test_an_unknown_model_name_in_a_step_is_one_line_naming_the_step_and_the_names(
    tmp_path: Path, workspace: Path, cli
) -> None:
    (workspace / "graphchat.yaml").write_text("models:\n  named:\n    scout: openai/scout\n")
    (workspace / "plans" / "p.yaml").write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n"
        "    input: {instruction: hi, model: scuot}\n"
    )
    done = cli("plan", "validate", "p")
    assert done.returncode == 1
    assert (
        "step E0: model: unknown model 'scuot' (did you mean scout? named models: scout;"
        in done.stdout + done.stderr
    )
    run = cli("plan", "run", "p")
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "unknown model 'scuot'" in run.stderr


def test_a_named_model_may_not_take_a_roles_name(workspace: Path, cli) -> None:
    (workspace / "graphchat.yaml").write_text("models:\n  named:\n    judge: openai/x\n")
    done = cli("tools", "list")
    assert done.returncode == 2
    assert (
        "graphchat.yaml:3" in done.stderr
        and "models.named.judge: a named model may not take a role's name" in done.stderr
    )


# --- fallbacks -----------------------------------------------------------------------------------


def fallback_config(first: ScriptedModelServer, second: ScriptedModelServer) -> str:
    return (
        "models:\n  default:\n    model: openai/primary\n"
        f"    api_base: {first.url}\n    api_key: sk-a\n"
        f"    fallbacks:\n      - {{model: openai/backup, api_base: {second.url}, api_key: sk-b}}\n"
    )


def test_a_fallback_answers_when_the_first_provider_fails_and_the_usage_shows_both(
    workspace: Path, cli
) -> None:
    first, second = ScriptedModelServer().start(), ScriptedModelServer().start()
    try:
        first.script = [{"error": 500}] * 4  # the first try and its three retries
        second.script = [{"text": "from the backup", "usage": {"prompt_tokens": 7, "completion_tokens": 3}}]
        (workspace / "graphchat.yaml").write_text(fallback_config(first, second))
        (workspace / "plans" / "p.yaml").write_text(
            "identifier: p\nname: P\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n    input: {instruction: hi}\n"
            "output:\n  said: '{{E0.text}}'\n"
        )
        done = cli("plan", "run", "p", "--json")
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert report["output"] == {"said": "from the backup"}
        assert len(first.requests) == 4 and len(second.requests) == 1
        assert first.requests[0]["model"] == "primary" and second.requests[0]["model"] == "backup"
        assert "openai/primary failed, trying openai/backup" in done.stderr
        # the usage shows both: the failed attempt (no tokens) and the model that answered
        usage = report["usage"]
        assert usage["calls"] == 2 and usage["failed"] == 1
        rows = {row["model"]: row for row in usage["by_model"]}
        assert rows["openai/backup"]["calls"] == 1 and rows["openai/backup"]["input_tokens"] == 7
        assert "failed" not in rows["openai/backup"]
        assert rows["openai/primary"]["calls"] == 1 and rows["openai/primary"]["failed"] == 1
        assert rows["openai/primary"]["input_tokens"] == rows["openai/primary"]["output_tokens"] == 0
        assert rows["openai/primary"]["provider"] == "openai"
    finally:
        first.stop()
        second.stop()


def test_ask_json_usage_shows_the_failed_model_and_the_one_that_answered(workspace: Path, cli) -> None:
    first, second = ScriptedModelServer().start(), ScriptedModelServer().start()
    try:
        first.default = {"error": 500}
        second.script = [{"text": "from the backup", "usage": {"prompt_tokens": 9, "completion_tokens": 4}}]
        (workspace / "graphchat.yaml").write_text(fallback_config(first, second))
        done = cli("ask", "--json", "hello")
        assert done.returncode == 0, done.stderr
        body = json.loads(done.stdout)
        assert body["content"] == "from the backup"
        usage = body["usage"]
        assert [usage[k] for k in ("calls", "failed", "input_tokens", "output_tokens")] == [2, 1, 9, 4]
        assert "by_role" not in usage  # both calls were the chat role's (the backup stands in for it)
        assert usage["by_model"] == [
            {
                "provider": "openai",
                "model": "openai/backup",
                "calls": 1,
                "input_tokens": 9,
                "output_tokens": 4,
            },
            {
                "provider": "openai",
                "model": "openai/primary",
                "calls": 1,
                "input_tokens": 0,
                "output_tokens": 0,
                "failed": 1,
            },
        ]
    finally:
        first.stop()
        second.stop()


@pytest.mark.process  # the pty: pexpect starts `graphchat` itself
def test_the_printed_spent_line_names_both_models(workspace: Path) -> None:
    """On a terminal, the dim line after the answer says which model failed and which answered."""
    import pexpect

    first, second = ScriptedModelServer().start(), ScriptedModelServer().start()
    try:
        first.default = {"error": 500}
        second.script = [{"text": "from the backup", "usage": {"prompt_tokens": 9, "completion_tokens": 4}}]
        (workspace / "graphchat.yaml").write_text(fallback_config(first, second))
        child = pexpect.spawn(
            sys.executable,
            ["-m", "graphchat", "--home", str(workspace), "ask", "hello"],
            env=clean_env({"TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
            cwd=str(workspace),
            dimensions=(40, 200),
            encoding="utf-8",
            timeout=60,
        )
        child.expect(pexpect.EOF)
        child.close()
        printed = child.before.replace("\r", "")
        assert child.exitstatus == 0, printed
        assert "from the backup" in printed
        line = next(line for line in printed.splitlines() if line.startswith("calls 2"))
        assert "by model: openai/backup 1 call, openai/primary 1 call (1 failed)" in line, line
    finally:
        first.stop()
        second.stop()


def test_when_every_fallback_fails_the_error_names_each_attempt(workspace: Path, cli) -> None:
    first, second = ScriptedModelServer().start(), ScriptedModelServer().start()
    try:
        first.default = {"error": 500}
        second.default = {"error": 429, "retry_after": 0}
        (workspace / "graphchat.yaml").write_text(fallback_config(first, second))
        done = cli("ask", "hello")
        assert done.returncode == 1
        assert "Traceback" not in done.stderr
        line = next(line for line in done.stderr.splitlines() if "every model failed" in line)
        assert "openai/primary: model call to openai/primary failed (500)" in line
        assert "openai/backup: rate limited by the provider of openai/backup (429)" in line
        # a failed run prints no envelope; its events meter both failed attempts
        failed = cli("ask", "hello", env={"GRAPHCHAT_EVENTS": "jsonl"})
        assert failed.returncode == 1
        events = [json.loads(x) for x in failed.stderr.splitlines() if x.startswith("{")]
        calls = [(e["model"], e.get("failed")) for e in events if e["event"] == "llm_call"]
        assert calls == [("openai/primary", True), ("openai/backup", True)], calls
    finally:
        first.stop()
        second.stop()


def test_a_bad_request_does_not_fail_over(workspace: Path, cli) -> None:
    first, second = ScriptedModelServer().start(), ScriptedModelServer().start()
    try:
        first.default = {"error": 401, "message": "bad key"}
        (workspace / "graphchat.yaml").write_text(fallback_config(first, second))
        done = cli("ask", "hello")
        assert done.returncode == 2 and "rejected the API key for openai/primary" in done.stderr
        assert second.requests == []
    finally:
        first.stop()
        second.stop()


# --- ${VAR} in api_key and api_base -----------------------------------------------------------


def test_api_key_and_api_base_variables_are_expanded_at_the_call_and_never_written(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    secret = "sk-from-the-environment-4242"
    (workspace / "graphchat.yaml").write_text(
        "models:\n  default:\n    model: openai/gateway\n    api_base: ${GW_BASE}\n    api_key: ${GW_KEY}\n"
    )
    env = {"GW_KEY": secret, "GW_BASE": model_server.url, "GRAPHCHAT_EVENTS": "jsonl"}
    model_server.script = [{"text": "hello back"}]
    done = cli("ask", "--json", "hello", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["content"] == "hello back"
    assert model_server.authorizations[-1] == f"Bearer {secret}"  # the provider got the value
    assert secret not in done.stdout + done.stderr  # nor the events
    written = [p for p in workspace.rglob("*") if p.is_file()]
    assert all(secret.encode() not in p.read_bytes() for p in written), written
    assert "${GW_KEY}" in (workspace / "graphchat.yaml").read_text()
    shown = cli("config", "show", "--json", env=env)
    models = json.loads(shown.stdout)["config"]["models"]
    assert models["default"]["api_key"] == "${GW_KEY}" and models["default"]["api_base"] == "${GW_BASE}"
    assert secret not in shown.stdout


def test_an_unset_variable_in_api_key_is_one_line_naming_it_and_the_file(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    (workspace / "graphchat.yaml").write_text(
        f"models:\n  default:\n    model: openai/gateway\n    api_base: {model_server.url}\n"
        "    api_key: ${GW_KEY}\n"
    )
    done = cli("ask", "hello")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    first = done.stderr.strip().splitlines()[0]
    assert "environment variable GW_KEY is not set" in first
    assert f"models.default.api_key in {workspace / 'graphchat.yaml'}" in first
    assert model_server.requests == []  # nothing was sent
    where = cli("where")  # and `where` does not call the key set
    assert where.returncode == 0, where.stderr
    assert "key: GW_KEY not set (named by api_key)" in where.stdout, where.stdout
    report = json.loads(cli("where", "--json").stdout)
    assert "GW_KEY" in json.dumps(report) and "${GW_KEY}" not in where.stdout


def test_init_from_graph_carries_an_api_key_variable(tmp_path: Path) -> None:
    project = graph_project(
        tmp_path,
        config='[providers.gw]\ntype = "openai_compat"\nbase_url = "${GW_BASE}"\napi_key = "${GW_KEY}"\n\n'
        '[models.chat]\nprovider = "gw"\nmodel = "llama3"\n',
    )
    done = gc("init", "--from-graph", cwd=project)
    assert done.returncode == 0, done.stderr
    shown = json.loads(gc("config", "show", "--json", cwd=project).stdout)
    chat = shown["config"]["models"]["chat"]
    assert chat["api_key"] == "${GW_KEY}" and chat["api_base"] == "${GW_BASE}"
    assert "GW_KEY" not in done.stderr  # carried, not listed as dropped


# --- prompts: solver, judge, planner ------------------------------------------------------------

PROMPTS = "prompts:\n  solver: SOLVER-X\n  judge: JUDGE-X\n  planner: PLANNER-X\n"


def by_system_prompt(body: dict[str, Any]) -> dict[str, Any]:
    """The judge says yes to `urgent?` and no to anything else; the solver answers; the planner
    drafts a one-step plan."""
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    question = body["messages"][-1]["content"] if body["messages"] else ""
    if system.startswith("JUDGE-X"):
        return {"json": {"verdict": "urgent?" in json.dumps(body["messages"]), "reason": "r"}}
    if system.startswith("PLANNER-X"):
        return {
            "json": {
                "identifier": "g",
                "name": "G",
                "description": "d",
                "steps": [
                    {
                        "id": "E0",
                        "tool_name": "filter",
                        "input": {"over": [1, 2], "where": {"value": "{{item}}", "op": "gt", "to": 1}},
                    }
                ],
                "output": {"kept": "{{E0.items}}"},
            }
        }
    return {"text": f"solved ({len(question)})"}


def test_prompts_replace_the_solver_judge_and_planner_system_prompts(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    (workspace / "graphchat.yaml").write_text(
        f"models:\n  default: {{model: openai/m, api_base: {model_server.url}, api_key: sk-t}}\n" + PROMPTS
    )
    (workspace / "plans" / "p.yaml").write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n"
        "  - id: E0\n    tool_name: decide\n    input:\n      infer: urgent?\n"
        "      then: {tool_name: filter, input: {over: [1, 2], where: {value: '{{item}}', op: gt, to: 1}}}\n"
        "  - id: E1\n    tool_name: exit\n    input: {infer: blocked?, status: error}\n"
        "solver:\n  query_to_answer: Describe.\n"
    )
    model_server.default = by_system_prompt
    done = cli("plan", "run", "p", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["answer"].startswith("solved")
    systems = [
        next(m["content"] for m in r["messages"] if m["role"] == "system") for r in model_server.requests
    ]
    # the decide's judge, the exit gate's judge, the solver: each with its replaced prompt only
    assert systems == ["JUDGE-X", "JUDGE-X", "SOLVER-X"], systems
    # plan_and_execute's planner (plan go)
    model_server.requests.clear()
    done = cli("plan", "go", "keep the big ones")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"kept": [2]}
    first = model_server.requests[0]["messages"]
    assert first[0] == {"role": "system", "content": "PLANNER-X"}
    assert "keep the big ones" in first[1]["content"]  # the goal and the catalog still follow


def test_an_unknown_prompt_names_the_prompts_there_are(workspace: Path, cli) -> None:
    (workspace / "graphchat.yaml").write_text("prompts:\n  solvr: x\n")
    done = cli("config", "show")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        "prompts.solvr: unknown prompt (did you mean solver? prompts: chat, workbench, solver, judge, planner)"
        in done.stderr
    )


# --- the user's layer ----------------------------------------------------------------------------


def test_the_user_layer_sits_under_the_workspaces_and_config_show_names_each_source(
    workspace: Path, cli
) -> None:
    user = workspace.parent / "config" / "graphchat" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text(
        "models:\n  named:\n    scout: openai/scout\nsettings:\n  max_agent_iterations: 7\n"
        "approvals:\n  deny: ['rm_*']\nplans:\n  paths: [library]\n"
    )
    (user.parent / "library").mkdir()
    (user.parent / "library" / "shared.yaml").write_text(
        "identifier: shared\nname: Shared\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n    input: {instruction: hi, model: scout}\n"
    )
    (workspace / "graphchat.yaml").write_text(
        "settings:\n  max_agent_iterations: 3\napprovals:\n  deny: ['git_*']\n"
    )
    env = {"XDG_CONFIG_HOME": str(user.parent.parent)}
    shown = cli("config", "show", "--json", env=env)
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert body["sources"][:2] == [str(user), str(workspace / "graphchat.yaml")]
    assert body["config"]["settings"]["max_agent_iterations"] == 3
    assert body["value_sources"]["settings.max_agent_iterations"] == str(workspace / "graphchat.yaml")
    assert body["value_sources"]["models.named.scout"] == str(user)
    assert body["config"]["approvals"]["deny"] == ["rm_*", "git_*"]  # a deny is never dropped
    # the user's plan library is read, and its named model resolves
    done = cli("plan", "validate", "shared", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    paths = cli("config", "path", "--json", env=env)
    assert json.loads(paths.stdout)["files"][0] == {"path": str(user), "exists": True}


# --- prompt caching ------------------------------------------------------------------------------


def test_cache_markers_reach_the_provider_and_usage_shows_the_cache_tokens(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    """A model marked `prompt_caching: true` (an OpenAI-compatible gateway in front of Anthropic)
    gets graph's two breakpoints; settings.prompt_caching: false turns them off everywhere."""
    config = (
        f"models:\n  default: {{model: openai/gateway, api_base: {model_server.url}, api_key: sk-t, "
        "prompt_caching: true}\n"
    )
    (workspace / "graphchat.yaml").write_text(config)
    (workspace / "plans" / "p.yaml").write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n"
        "    input: {instruction: hi}\n"
    )
    model_server.script = [
        {
            "text": "ok",
            "usage": {
                "prompt_tokens": 20,
                "completion_tokens": 2,
                "prompt_tokens_details": {"cached_tokens": 16},
            },
        }
    ]
    done = cli("plan", "run", "p", "--json")
    assert done.returncode == 0, done.stderr
    last = model_server.requests[-1]["messages"][-1]
    assert last.get("cache_control") == {"type": "ephemeral"}, model_server.requests[-1]
    usage = json.loads(done.stdout)["usage"]
    assert usage["by_model"][0]["cache_read_input_tokens"] == 16
    assert usage["by_step"][0]["cache_read_input_tokens"] == 16
    (workspace / "graphchat.yaml").write_text(config + "settings:\n  prompt_caching: false\n")
    assert cli("plan", "run", "p").returncode == 0
    assert "cache_control" not in json.dumps(model_server.requests[-1])


CACHED_USAGE = {
    "prompt_tokens": 1000,  # of which 800 read from the cache and 100 written to it
    "completion_tokens": 10,
    "prompt_tokens_details": {"cached_tokens": 800},
    "cache_creation_input_tokens": 100,
}


def test_cache_tokens_are_priced_at_the_pricing_sections_cache_rates(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    """graph's `[pricing]` (USD per million): cache_read and cache_write price the cached part of
    the input; left out, they are the input price x 0.1 and x 1.25 (graph's defaults)."""
    model = f"models:\n  default: {{model: openai/gateway, api_base: {model_server.url}, api_key: sk-t}}\n"
    for prices in (
        "{input: 3, output: 15, cache_read: 0.3, cache_write: 3.75}",
        "{input: 3, output: 15}",  # the defaults: the same rates here
    ):
        (workspace / "graphchat.yaml").write_text(model + f"pricing:\n  gateway: {prices}\n")
        model_server.script = [{"text": "ok", "usage": CACHED_USAGE}]
        done = cli("ask", "--json", "hi")
        assert done.returncode == 0, done.stderr
        # 100 uncached x $3 + 800 read x $0.30 + 100 written x $3.75 + 10 out x $15, per million
        assert json.loads(done.stdout)["usage"]["cost_usd"] == pytest.approx(0.001065), prices
    # plan run --json: the total and each group carry graph's cost_usd
    (workspace / "plans" / "p.yaml").write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n"
        "    input: {instruction: hi}\n"
    )
    model_server.script = [{"text": "ok", "usage": CACHED_USAGE}]
    done = cli("plan", "run", "p", "--json")
    assert done.returncode == 0, done.stderr
    usage = json.loads(done.stdout)["usage"]
    assert usage["cost_usd"] == pytest.approx(0.001065)
    assert usage["by_model"][0]["cost_usd"] == usage["by_step"][0]["cost_usd"] == usage["cost_usd"]
    # a rate of its own is used as given
    (workspace / "graphchat.yaml").write_text(
        model + "pricing:\n  gateway: {input: 3, output: 15, cache_read: 1, cache_write: 0}\n"
    )
    model_server.script = [{"text": "ok", "usage": CACHED_USAGE}]
    done = cli("ask", "--json", "hi")
    assert json.loads(done.stdout)["usage"]["cost_usd"] == pytest.approx(
        0.00125
    )  # 300 + 800 + 0 + 150 micro-dollars


def test_cache_tokens_are_priced_from_litellms_price_list(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    """A model litellm prices (gpt-4o: $2.50 in, $10 out, cache reads $1.25 a million, writes
    at the input price), served by the scripted server."""
    (workspace / "graphchat.yaml").write_text(
        f"models:\n  default: {{model: openai/gpt-4o, api_base: {model_server.url}, api_key: sk-t}}\n"
    )
    model_server.script = [{"text": "ok", "usage": CACHED_USAGE}]
    done = cli("ask", "--json", "hi")
    assert done.returncode == 0, done.stderr
    # 200 x $2.50 + 800 x $1.25 + 10 x $10 per million (not 1,000 x $2.50 + 100: $0.0026)
    assert json.loads(done.stdout)["usage"]["cost_usd"] == pytest.approx(0.0016)


def test_a_plain_openai_compatible_model_gets_no_markers(workspace: Path, cli, model_server) -> None:
    (workspace / "plans" / "p.yaml").write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n"
        "    input: {instruction: hi}\n"
    )
    done = cli("plan", "run", "p", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "cache_control" not in json.dumps(model_server.requests[-1])


def test_prompt_caching_is_on_by_default_where_the_provider_takes_markers() -> None:
    from graphchat.llm.client import _caches
    from graphchat.workspace import ModelConfig

    assert _caches(ModelConfig(model="anthropic/claude-sonnet-4-5"))
    assert not _caches(ModelConfig(model="anthropic/claude-sonnet-4-5", prompt_caching=False))
    assert not _caches(ModelConfig(model="openai/gpt-4o"))  # OpenAI caches by itself


def test_the_repair_role_makes_the_one_repair_pass_of_a_structured_reply(
    workspace: Path, cli, model_server: ScriptedModelServer
) -> None:
    base = f"api_base: {model_server.url}, api_key: sk-t"
    (workspace / "graphchat.yaml").write_text(
        f"models:\n  default: {{model: openai/main, {base}}}\n  repair: {{model: openai/fixer, {base}}}\n"
    )
    (workspace / "plans" / "p.yaml").write_text(
        "identifier: p\nname: P\ndescription: d\nsteps:\n  - id: E0\n    tool_name: builtin__infer\n"
        "    input:\n      instruction: hi\n      output_schema: {type: object, required: [n], properties: {n: {type: integer}}}\n"
        "output:\n  n: '{{E0.n}}'\n"
    )
    model_server.script = [{"text": "not json"}, {"json": {"n": 4}}]
    done = cli("plan", "run", "p", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == {"n": 4}
    assert [r["model"] for r in model_server.requests] == ["main", "fixer"]
