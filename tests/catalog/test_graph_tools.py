"""The tools graph's plans use (issue 12): user tools, builtin__reshape, the git and github packs.

graph's own example plans and user tools (tests/fixtures/graph, MIT, copied from
tylerdavis/graph) load, validate with both packs on, and — those needing only git, reshape,
infer and user tools — run against a small git repository made here, with the scripted model
for model steps. The github pack runs against a local fake of the API (tests/fake_github.py).

Run here: file_survey, weekly_status, change_summary, nightly_diff_report, docs_drift,
changelog_entry, compose_changelog (git-cliff is a test dependency), pr_review and pr_followup
(fake API), and graph_review_core's empty-diff path. Validated only: graph_review_9000 and
graph_review_thread_audit (their user__gh_pr_thread_sync shells out to `gh`), and
graph_review_core's review path here (it runs, with its named models `scout` and `reviewer`
routed, in tests/cli/test_from_graph.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fake_github import FakeGithub

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "graph"
EXAMPLE_PLANS = sorted(p.stem for p in [*FIXTURES.glob("plans/*.yaml"), *FIXTURES.glob("shots_plans/*.yaml")])
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Ada",
    "GIT_AUTHOR_EMAIL": "ada@example.test",
    "GIT_COMMITTER_NAME": "Ada",
    "GIT_COMMITTER_EMAIL": "ada@example.test",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def make_repo(root: Path, *, packs: str = "[git, github]", examples: bool = True) -> Path:
    """A git repository that is also a workspace: v1 (two files), then a commit changing crates/
    and adding src/new.rs. With `examples`, graph's plans and user tools are in plans/ and tools/."""
    repo = root / "repo"
    (repo / "plans").mkdir(parents=True)
    (repo / "tools").mkdir()
    (repo / "threads").mkdir()
    # graph's repository names its models `scout` and `reviewer` ([models.named], .graph/config.toml)
    named = "models:\n  named:\n    scout: openai/scout\n    reviewer: openai/reviewer\n"
    write(repo / "graphchat.yaml", f"tools:\n  packs: {packs}\n{named}")
    write(repo / "crates" / "core.rs", "fn run() {}\n")
    write(repo / "README.md", "# demo\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "crates", "README.md")
    git(repo, "commit", "-q", "-m", "first")
    git(repo, "tag", "v1")
    write(repo / "crates" / "core.rs", "fn run() { exit(4) }\n")
    write(repo / "src" / "new.rs", "pub fn added() {}\n")
    git(repo, "add", "crates", "src")
    git(repo, "commit", "-q", "-m", "exit code 4 on a failed gate (#12)")
    if examples:
        for plan in [*FIXTURES.glob("plans/*.yaml"), *FIXTURES.glob("shots_plans/*.yaml")]:
            shutil.copy(plan, repo / "plans" / plan.name)
        for tool in FIXTURES.glob("tools/*.yaml"):
            shutil.copy(tool, repo / "tools" / tool.name)
    return repo


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path)


def run(graphchat, repo: Path, *args: str, env: dict[str, str] | None = None, **kw: Any):
    """graphchat in the repository (its workspace), isolated from the user's tools folder."""
    extra = {"XDG_CONFIG_HOME": str(repo.parent / "config"), **(env or {})}
    return graphchat(*args, home=repo, cwd=repo, env=extra, **kw)


def call(
    graphchat,
    repo: Path,
    tool: str,
    arguments: dict[str, Any],
    env: dict[str, str] | None = None,
    yes: bool = True,
):
    flags = ("--yes",) if yes else ()
    done = run(graphchat, repo, "tools", "call", *flags, tool, json.dumps(arguments), env=env)
    value = json.loads(done.stdout) if done.stdout.strip().startswith(("{", "[")) else done.stdout
    return done, value


# --- graph's example plans ---------------------------------------------------------------------


def test_every_example_plan_of_graph_loads_and_validates(repo: Path, cli) -> None:
    assert len(EXAMPLE_PLANS) == 12
    done = run(cli, repo, "plan", "validate")
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    valid = [line for line in said.splitlines() if line.rstrip().endswith("is valid")]
    assert sorted(line.split("'")[1] for line in valid) == EXAMPLE_PLANS, said
    assert "skipped" not in said


def test_without_the_packs_the_plans_naming_their_tools_do_not_validate(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, packs="[]")
    done = run(cli, repo, "plan", "validate", "docs_drift")
    assert done.returncode != 0
    assert "builtin__git_changed_files" in done.stdout + done.stderr


def test_file_survey_reads_every_changed_file_at_the_head(repo: Path, cli) -> None:
    """docs/shots/plans/file_survey.yaml: git_changed_files, then git_file mapped over the files."""
    done = run(
        cli, repo, "plan", "run", "file_survey", "--input", "base=v1", "--input", "head=HEAD", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"] == "file_survey"  # no finish: a silent plan
    assert "E1: 2/2" in done.stderr  # git_file read both changed files


def test_file_survey_fails_on_a_deleted_file_as_graph_documents(repo: Path, cli) -> None:
    """graph: a deleted file's path is listed but `git_file` at the head fails on it by design."""
    git(repo, "rm", "-q", "README.md")
    git(repo, "commit", "-q", "-m", "drop readme")
    done = run(cli, repo, "plan", "run", "file_survey", "--input", "base=v1", "--input", "head=HEAD")
    assert done.returncode == 1
    assert "path 'README.md' does not exist in 'HEAD'" in done.stderr


def _system(body: dict[str, Any]) -> str:
    return " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")


def _user_text(body: dict[str, Any]) -> str:
    return " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "user")


def test_weekly_status_runs_its_gate_map_and_solver(repo: Path, cli, model_server) -> None:
    """docs/shots/plans/weekly_status.yaml: the solver sees the files, the diff and each file's text."""
    model_server.default = {"text": "WEEKLY STATUS"}
    done = run(cli, repo, "plan", "run", "weekly_status", "--input", "since=v1", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "WEEKLY STATUS"
    sent = _user_text(model_server.requests[-1])
    assert "src/new.rs" in sent and "+fn run() { exit(4) }" in sent and "pub fn added() {}" in sent


def test_nightly_diff_report_exits_quietly_when_nothing_changed(repo: Path, cli, model_server) -> None:
    done = run(
        cli, repo, "plan", "run", "nightly_diff_report", "--input", "base=HEAD", env=model_server.env()
    )
    assert done.returncode == 0, done.stderr
    assert "no changes since HEAD — nothing to report" in done.stdout + done.stderr
    assert model_server.requests == []


def test_change_summary_sends_the_diff_to_the_solver(repo: Path, cli, model_server) -> None:
    model_server.default = {"text": "SUMMARY"}
    args = ("plan", "run", "change_summary", "--input", "base=v1", "--input", "head=HEAD")
    done = run(cli, repo, *args, env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "SUMMARY"
    assert "diff --git a/crates/core.rs b/crates/core.rs" in _user_text(model_server.requests[-1])


def test_docs_drift_passes_without_a_model_call_when_docs_changed(repo: Path, cli, model_server) -> None:
    write(repo / "docs" / "cli.md", "exit 4\n")
    git(repo, "add", "docs")
    git(repo, "commit", "-q", "-m", "docs")
    args = ("plan", "run", "docs_drift", "--input", "base=v1", "--input", "head=HEAD", "--json")
    done = run(cli, repo, *args, env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "docs updated alongside crate changes" in done.stdout
    assert model_server.requests == []


def test_docs_drift_asks_the_judge_and_fails_the_gate(repo: Path, cli, model_server) -> None:
    """Crate code changed without docs: the inferred exit sees the crate diff; `yes` is exit 4."""
    model_server.default = {"json": {"verdict": True, "reason": "exit codes changed"}}
    args = ("plan", "run", "docs_drift", "--input", "base=v1", "--input", "head=HEAD")
    done = run(cli, repo, *args, env=model_server.env())
    assert done.returncode == 4, done.stderr
    assert "behavioral change without a docs/ update" in done.stdout + done.stderr
    asked = " ".join(json.dumps(r["messages"]) for r in model_server.requests)
    assert "exit(4)" in asked


def test_changelog_entry_never_regenerates_a_curated_snippet(repo: Path, cli, model_server) -> None:
    """.graph/plans/changelog_entry.yaml's guard: user__snippet_status (bash + jq) sees the
    snippet folder and the exit fires before git-cliff or the model is needed."""
    write(repo / "docs" / "snippets" / "changelog" / "v9.9.9" / "summary.mdx", "Faster `plan run`.\n")
    args = ("plan", "run", "changelog_entry", "--input", "version=v9.9.9", "--json")
    done = run(cli, repo, *args, env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "already exists" in done.stdout
    assert '"regenerated": false' in done.stdout.replace(" ", "").replace('":', '": ')
    assert model_server.requests == []


def test_graph_review_core_exits_on_an_empty_working_tree_diff(repo: Path, cli, model_server) -> None:
    """.graph/plans/graph_review_core.yaml with head '' reviews the working tree: its user tools
    (repo_changed_files, repo_diff: bash + jq) find nothing, and the empty-diff exit fires."""
    args = ("plan", "run", "graph_review_core", "--input", "base=HEAD", "--json")
    done = run(cli, repo, *args, env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert "nothing to review" in done.stdout
    assert "empty_diff" in done.stdout
    assert model_server.requests == []


# --- user tools ----------------------------------------------------------------------------------


def test_user_tools_are_listed_with_their_family(repo: Path, cli) -> None:
    done = run(cli, repo, "tools", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["tools"]}
    assert rows["user__repo_diff"]["family"] == "read"  # exec, read_only: true
    assert rows["user__write_changelog_page"]["family"] == "write"  # exec, read_only: false
    assert rows["user__review_graph_pr"]["family"] == "read"  # prompt: read-only unless it says not
    assert rows["builtin__gh_pr_comment"]["family"] == "write"
    assert rows["builtin__gh_pr_meta"]["family"] == "read"
    assert rows["builtin__reshape"]["family"] == "read"


def test_a_broken_tool_file_is_a_warning_naming_it_and_breaks_nothing(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, examples=False)
    write(
        repo / "tools" / "leaky.yaml",
        "name: leaky\ndescription: d\nkind: exec\ncommand: echo\nargs: ['{{E0.x}}']\n",
    )
    write(repo / "tools" / "noname.yaml", "description: d\nkind: reshape\nshape: {a: 1}\n")
    write(
        repo / "tools" / "good.yaml", "name: good\ndescription: d\nkind: reshape\nshape: {a: '{{input.a}}'}\n"
    )
    done = run(cli, repo, "tools", "list")
    assert done.returncode == 0, done.stderr
    assert "user__good" in done.stdout and "leaky" not in done.stdout
    warnings = [line for line in done.stderr.splitlines() if "leaky.yaml" in line]
    assert len(warnings) == 1 and "may only reference {{input.*}}, found {{E0}}" in warnings[0]
    assert any("noname.yaml" in line and "tool name" in line for line in done.stderr.splitlines())
    done, value = call(cli, repo, "user__good", {"a": [1, 2]})
    assert done.returncode == 0 and value == {"a": [1, 2]}  # typed splice keeps the array


def test_the_user_tools_folder_adds_tools_and_the_workspace_wins_a_name(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, examples=False)
    mine = repo.parent / "config" / "graphchat" / "tools"
    write(mine / "hello.yaml", "name: hello\ndescription: mine\nkind: reshape\nshape: {who: user}\n")
    write(mine / "everywhere.yaml", "name: everywhere\ndescription: d\nkind: reshape\nshape: {from: user}\n")
    write(
        repo / "tools" / "hello.yml", "name: hello\ndescription: ws\nkind: reshape\nshape: {who: workspace}\n"
    )
    done = run(cli, repo, "tools", "list")
    assert "user__everywhere" in done.stdout
    assert any(
        "hello.yaml" in line and "duplicate tool name 'hello'" in line for line in done.stderr.splitlines()
    )
    done, value = call(cli, repo, "user__hello", {})
    assert value == {"who": "workspace"}


EXEC_TOOLS = {
    "echo_json": """
name: echo_json
description: prints its input back as JSON
kind: exec
command: python3
args: ["-c", "import json,sys; print(json.dumps({'argv': sys.argv[1:]}))", "{{input.word}}", "{{input.n}}", "{{input.list}}"]
read_only: true
input_schema:
  type: object
  required: [word]
  properties:
    word: {type: string}
    n: {type: integer, default: 3}
    list: {type: array, default: [1, "a"]}
""",
    "where": """
name: where
description: pwd and an env variable, as text
kind: exec
command: sh
args: ["-c", "pwd; echo \\"$GREETING\\""]
cwd: sub
env: {GREETING: "hi ${WHO_TO_GREET}"}
output: text
""",
    "fails": """
name: fails
description: exits 3
kind: exec
command: sh
args: ["-c", "echo partial; echo broken >&2; exit 3"]
""",
    "not_json": """
name: not_json
description: prints text while promising JSON
kind: exec
command: echo
args: ["{{input.x}}"]
output: json
""",
    "slow": """
name: slow
description: sleeps past its budget
kind: exec
command: sleep
args: ["30"]
timeout_secs: 1
""",
    "shell_free": """
name: shell_free
description: an argument is never read by a shell
kind: exec
command: printf
args: ["%s", "{{input.x}}"]
output: text
""",
}


def test_exec_tools_template_args_run_without_a_shell_and_report_failures(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, examples=False)
    for name, text in EXEC_TOOLS.items():
        write(repo / "tools" / f"{name}.yaml", text)
    (repo / "sub").mkdir()

    done, value = call(cli, repo, "user__echo_json", {"word": "two words"})
    assert done.returncode == 0, done.stderr
    # defaults applied, objects as pretty JSON (graph's objects_interpolate_as_json_in_text)
    assert value == {"argv": ["two words", "3", '[\n  1,\n  "a"\n]']}

    done, value = call(cli, repo, "user__where", {}, env={"WHO_TO_GREET": "ada"})
    assert done.returncode == 0, done.stderr
    assert value == {"text": f"{(repo / 'sub').resolve()}\nhi ada"}

    done, _ = call(cli, repo, "user__where", {})
    assert done.returncode != 0 and "WHO_TO_GREET" in done.stderr + done.stdout
    done, _ = call(cli, repo, "user__where", {}, env={"WHO_TO_GREET": "ada"}, yes=False)
    assert done.returncode != 0 and "(write tool)" in done.stderr  # not read_only: approval needed

    done = run(cli, repo, "tools", "call", "--yes", "--json", "user__fails", "{}")
    value = json.loads(done.stdout)
    assert done.returncode != 0 and value["is_error"] is True
    assert value["value"] == {
        "error": "'sh' exited with exit status: 3",
        "stderr": "broken",
        "stdout": "partial",
    }

    done, _ = call(cli, repo, "user__not_json", {"x": "hello"})
    assert done.returncode != 0 and "stdout is not valid JSON" in done.stdout + done.stderr

    done, _ = call(cli, repo, "user__slow", {})
    assert done.returncode != 0 and "timed out after 1s" in done.stdout + done.stderr

    marker = repo / "pwned"
    done, value = call(cli, repo, "user__shell_free", {"x": f"$(touch {marker}); `touch {marker}`"})
    assert done.returncode == 0, done.stderr
    assert value == {"text": f"$(touch {marker}); `touch {marker}`"} and not marker.exists()


PROMPT_TOOL = """
name: gist
description: a gist and keywords
kind: prompt
system: You summarize.
prompt: "Summarize: {{input.text}}"
model: judge
output_schema:
  type: object
  required: [gist, keywords]
  properties:
    gist: {type: string}
    keywords: {type: array, items: {type: string}}
"""

PLAIN_PROMPT_TOOL = """
name: reword
description: reword text
kind: prompt
prompt: "Reword: {{input.text}}"
"""


def test_prompt_tools_send_their_prompt_and_repair_a_bad_structured_reply(
    tmp_path: Path, cli, model_server
) -> None:
    repo = make_repo(tmp_path, examples=False)
    write(repo / "tools" / "gist.yaml", PROMPT_TOOL)
    write(repo / "tools" / "reword.yaml", PLAIN_PROMPT_TOOL)
    model_server.script = [{"json": {"gist": "short"}}, {"json": {"gist": "short", "keywords": ["a", "b"]}}]
    done, value = call(cli, repo, "user__gist", {"text": "a long text"}, env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert value == {"gist": "short", "keywords": ["a", "b"]}
    assert len(model_server.requests) == 2  # one repair pass
    first = model_server.requests[0]
    assert _system(first) == "You summarize."
    assert "Summarize: a long text" in _user_text(first)

    model_server.script = [{"text": "said otherwise"}]
    done, value = call(cli, repo, "user__reword", {"text": "x"}, env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert value == {"text": "said otherwise"}


# --- builtin__reshape ------------------------------------------------------------------------------


RESHAPE_PLAN = """
identifier: shapes
name: shapes
description: reshape every commit of a git_log
input_schema: {type: object, properties: {}}
steps:
  - id: E0
    tool_name: builtin__git_log
    input: {base: v1}
  - id: E1
    tool_name: map
    input:
      over: "{{E0.commits}}"
      do:
        tool_name: builtin__reshape
        input:
          shape:
            pr: "{{item.pr}}"
            title: "PR #{{item.pr}}: {{item.subject}}"
            raw: "{{item.subject}}"
output:
  items: "{{E1.results}}"
"""


def test_builtin_reshape_in_a_map_keeps_types_and_never_rerenders_data(repo: Path, cli) -> None:
    write(repo / "plans" / "shapes.yaml", RESHAPE_PLAN)
    write(repo / "x.txt", "x\n")
    git(repo, "add", "x.txt")
    git(repo, "commit", "-q", "-m", "quote {{E9.nope}} in a subject")
    done = run(cli, repo, "plan", "run", "shapes")
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert items[0] == {
        "pr": None,
        "title": "PR #: quote {{E9.nope}} in a subject",
        "raw": "quote {{E9.nope}} in a subject",
    }
    assert items[1] == {
        "pr": 12,
        "title": "PR #12: exit code 4 on a failed gate (#12)",
        "raw": "exit code 4 on a failed gate (#12)",
    }


# --- the git pack ----------------------------------------------------------------------------------


def test_git_pack_tools_match_graphs_results(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, examples=False)
    git(repo, "mv", "README.md", "GUIDE.md")
    git(repo, "rm", "-q", "crates/core.rs")
    (repo / "logo.bin").write_bytes(bytes(range(256)))
    write(repo / "src" / "big.rs", "// line\n" * 100)
    git(repo, "add", "logo.bin", "src")
    git(repo, "commit", "-q", "-m", "move things")

    done, value = call(cli, repo, "builtin__git_changed_files", {"base": "v1", "head": "HEAD", "prefix": ""})
    assert done.returncode == 0, done.stderr
    changes = {c["path"]: c for c in value["changes"]}
    assert value["count"] == len(value["files"]) == 5
    assert changes["GUIDE.md"] == {
        "path": "GUIDE.md",
        "status": "renamed",
        "old_path": "README.md",
        "additions": 0,
        "deletions": 0,
        "binary": False,
    }
    assert changes["crates/core.rs"]["status"] == "deleted"
    assert changes["logo.bin"]["binary"] is True and changes["logo.bin"]["additions"] == 0
    assert changes["src/big.rs"]["additions"] == 100

    done, value = call(
        cli, repo, "builtin__git_changed_files", {"base": "v1", "head": "HEAD", "prefix": "src/"}
    )
    assert value["files"] == ["src/big.rs", "src/new.rs"]

    args = {"base": "v1", "head": "HEAD", "paths": ".", "exclude": "logo.bin", "max_bytes": 100}
    done, value = call(cli, repo, "builtin__git_diff", args)
    assert done.returncode == 0, done.stderr
    assert value["text"].startswith("diff --git") and "[diff truncated: showing 100 of " in value["text"]

    done, value = call(cli, repo, "builtin__git_file", {"ref": "v1", "path": "README.md"})
    assert value == {"text": "# demo"}
    done, _ = call(cli, repo, "builtin__git_file", {"ref": "HEAD", "path": "README.md"})
    assert done.returncode != 0 and "README.md" in done.stdout + done.stderr

    done, value = call(cli, repo, "builtin__git_grep", {"pattern": "fn [a-z]+", "max_matches": 1})
    assert value == {
        "matches": [{"path": "src/new.rs", "line": 1, "text": "pub fn added() {}"}],
        "count": 1,
        "truncated": False,
    }
    done, value = call(cli, repo, "builtin__git_grep", {"pattern": "nothing-here"})
    assert value == {"matches": [], "count": 0, "truncated": False}
    done, _ = call(cli, repo, "builtin__git_grep", {"pattern": "x", "ref": "no-such-ref"})
    assert done.returncode != 0

    done, value = call(cli, repo, "builtin__git_log", {"base": "v1", "max_commits": 1})
    assert value["count"] == 1 and value["total"] == 2 and value["truncated"] is True
    assert value["commits"][0]["subject"] == "move things" and value["commits"][0]["pr"] is None
    done, value = call(cli, repo, "builtin__git_log", {"base": "v1", "head": "HEAD~1"})
    assert value["commits"][0]["pr"] == 12 and len(value["commits"][0]["sha"]) == 40
    done, _ = call(cli, repo, "builtin__git_log", {"base": "no-such-tag"})
    assert done.returncode != 0


def test_an_unknown_pack_fails_at_start_listing_the_packs(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, packs="[git, slackk]", examples=False)
    done = run(cli, repo, "tools", "list")
    assert done.returncode == 2
    assert "unknown tool pack 'slackk' (available: git, github, slack, data, llm)" in done.stderr
    assert "graphchat.yaml:2" in done.stderr


def test_packs_are_off_unless_listed(tmp_path: Path, cli) -> None:
    repo = make_repo(tmp_path, packs="[]", examples=False)
    done = run(cli, repo, "tools", "list")
    assert "builtin__reshape" in done.stdout and "builtin__git_diff" not in done.stdout
    assert "builtin__gh_pr_meta" not in done.stdout


# --- the github pack ---------------------------------------------------------------------------------

TOKEN = "ghp_fakeTokenForTests0123456789abcdef"


@pytest.fixture
def fake_github() -> Any:
    fake = FakeGithub().start()
    yield fake
    fake.stop()


def github_env(fake: FakeGithub) -> dict[str, str]:
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.url, "GITHUB_REPOSITORY": fake.repo}


def test_github_pack_reads_a_pr_and_its_review_threads_and_posts_a_comment(
    repo: Path, cli, fake_github: FakeGithub
) -> None:
    base, head = git(repo, "rev-parse", "v1"), git(repo, "rev-parse", "HEAD")
    fake_github.pulls[7] = {
        "number": 7,
        "title": "Gates fail loudly (LN 1234)",
        "body": None,
        "state": "open",
        "merged": False,
        "base": {"sha": base, "ref": "main"},
        "head": {"sha": head, "ref": "feature/arm64-cleanup"},
        "user": {"login": "ada"},
    }
    payload = {"label": "L", "severity": "warn", "invariant": "i", "file": "a.rs", "line": 3, "finding": "f"}
    fake_github.threads = [
        _thread("T1", f"Bad\n\n<!-- graph:finding {json.dumps(payload)} -->", resolved_by=None),
        _thread("T2", f"Fixed\n\n<!-- graph:finding {json.dumps(payload)} -->", resolved_by="graph-bot"),
        _thread(
            "T3",
            f"Meh\n\n<!-- graph:finding {json.dumps(payload)} -->",
            resolved_by="ada",
            replies=["wontfix"],
        ),
        _thread("T4", '<!-- graph:finding {"label": "partial"} -->', resolved_by=None),
        _thread("T5", "a human comment", resolved_by=None),
    ]
    env = github_env(fake_github)

    done, meta = call(cli, repo, "builtin__gh_pr_meta", {"pr": 7}, env=env)
    assert done.returncode == 0, done.stderr
    assert meta == {
        "title": "Gates fail loudly (LN 1234)",
        "body": "",
        "base_sha": base,
        "head_sha": head,
        "state": "OPEN",
        "author": "ada",
    }

    done, ticket = call(cli, repo, "builtin__gh_pr_ticket", {"pr": 7}, env=env)
    assert ticket == {"found": True, "ticket": "LN-1234", "source": "title"}  # arm64 is not a ticket

    done, threads = call(
        cli, repo, "builtin__gh_pr_review_threads", {"pr": 7, "marker": "graph:finding"}, env=env
    )
    assert done.returncode == 0, done.stderr
    assert [(f["thread_id"], f["state"]) for f in threads["findings"]] == [
        ("T1", "open"),
        ("T2", "resolved"),
        ("T3", "declined"),
    ]
    assert (
        threads["count"] == 3
        and threads["open_count"] == 1
        and threads["skipped"] == 1
        and threads["has_findings"]
    )
    assert threads["findings"][2]["replies"] == [{"author": "ada", "body": "wontfix"}]
    assert threads["findings"][0]["label"] == "L" and threads["findings"][0]["reply_count"] == 0

    args = {"pr": 7, "body": "Looks good", "marker": "graph:summary"}
    done, posted = call(cli, repo, "builtin__gh_pr_comment", {**args}, env=env)
    assert done.returncode == 0, done.stderr
    assert fake_github.issue_comments[0]["body"] == "Looks good\n\n<!-- graph:summary -->"
    assert posted == {"text": fake_github.issue_comments[0]["html_url"]}
    done, _ = call(cli, repo, "builtin__gh_pr_comment", {**args, "body": "Still good"}, env=env)
    assert [c["body"] for c in fake_github.issue_comments] == [
        "Still good\n\n<!-- graph:summary -->"
    ]  # edited in place
    # without a marker: the token identity's last comment is edited (gh --edit-last), another's is not
    human = {**fake_github.issue_comments[0], "id": 1, "body": "human", "user": {"login": "ada"}}
    fake_github.issue_comments.append(human)
    done, _ = call(cli, repo, "builtin__gh_pr_comment", {"pr": 7, "body": "plain"}, env=env)
    assert [c["body"] for c in fake_github.issue_comments] == ["plain", "human"]

    fake_github.reject_lines = {99}
    comments = [
        {"path": "a.rs", "line": 3, "body": "here", "extra": 1},
        {"path": "a.rs", "body": "no line"},
        {"path": "b.rs", "line": 99, "body": "off"},
    ]
    inline = {"pr": 7, "head_sha": head, "marker": "graph:inline", "comments": comments}
    done, out = call(cli, repo, "builtin__gh_pr_inline_comments", inline, env=env)
    assert done.returncode == 0, done.stderr
    assert "url" in out["comments"][0] and out["comments"][0]["extra"] == 1
    assert "url" not in out["comments"][1] and "url" not in out["comments"][2]
    assert fake_github.review_comments[0]["body"] == "here\n\n<!-- graph:inline -->"
    assert (
        fake_github.review_comments[0]["commit_id"] == head
        and fake_github.review_comments[0]["side"] == "RIGHT"
    )
    done, _ = call(cli, repo, "builtin__gh_pr_inline_comments", inline, env=env)
    assert len(fake_github.review_comments) == 1  # refreshed, not stacked

    # every request carried the token; it is in no file of the workspace
    assert fake_github.requests and all(
        r["headers"].get("Authorization") == f"Bearer {TOKEN}" for r in fake_github.requests
    )
    assert_token_nowhere(repo)


def test_a_plan_over_the_github_pack_keeps_the_token_out_of_its_thread(
    repo: Path, cli, fake_github: FakeGithub, model_server
) -> None:
    """docs/shots/plans/pr_followup.yaml runs against the fake API and the local repository:
    gh_pr_meta's shas feed git_changed_files; the decide compares `state` with `open`, which
    gh's `OPEN` never equals, so (as in graph) the else branch reads the ticket."""
    base, head = git(repo, "rev-parse", "v1"), git(repo, "rev-parse", "HEAD")
    fake_github.pulls[9] = {
        "number": 9,
        "title": "t",
        "body": "Fixes PROJ-77",
        "state": "open",
        "merged": False,
        "base": {"sha": base, "ref": "main"},
        "head": {"sha": head, "ref": "x"},
        "user": {"login": "ada"},
    }
    env = {**github_env(fake_github), **model_server.env()}
    done = run(cli, repo, "plan", "run", "pr_followup", "--input", "pr=9", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert "✓ builtin__gh_pr_ticket" in done.stderr and "✓ builtin__git_changed_files" in done.stderr
    assert [r["path"] for r in fake_github.requests] == ["/api/v3/repos/owner/repo/pulls/9"] * 2
    assert fake_github.issue_comments == []
    done = run(cli, repo, "ask", f"say {TOKEN}", env=env)  # a thread file is written
    assert done.returncode == 0, done.stderr
    threads = [p for p in (repo / "threads").rglob("*") if p.is_file()]
    assert any("say [redacted]" in p.read_text() for p in threads), "the question was kept, redacted"
    assert_token_nowhere(repo)


def assert_token_nowhere(root: Path) -> None:
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert TOKEN not in path.read_text(errors="replace"), f"the token is in {path}"


def test_github_pack_without_a_token_says_what_to_set(repo: Path, cli, fake_github: FakeGithub) -> None:
    env = {"GITHUB_API_URL": fake_github.url, "GITHUB_REPOSITORY": fake_github.repo}
    done, _ = call(cli, repo, "builtin__gh_pr_meta", {"pr": 1}, env=env)
    assert done.returncode != 0 and "GITHUB_TOKEN is not set" in done.stdout + done.stderr
    assert fake_github.requests == []


def _thread(tid: str, first: str, *, resolved_by: str | None, replies: list[str] = ()) -> dict[str, Any]:
    nodes = [{"url": f"https://github.test/{tid}", "body": first, "author": {"login": "graph-bot"}}]
    nodes += [{"url": "r", "body": text, "author": {"login": "ada"}} for text in replies]
    return {
        "id": tid,
        "isResolved": resolved_by is not None,
        "isOutdated": False,
        "path": "a.rs",
        "line": 3,
        "resolvedBy": {"login": resolved_by} if resolved_by else None,
        "comments": {"nodes": nodes},
    }


def test_pr_review_reviews_a_pr_end_to_end_against_the_fake_api(
    repo: Path, cli, fake_github: FakeGithub, model_server
) -> None:
    """docs/shots/plans/pr_review.yaml: gh_pr_meta → git_changed_files/git_diff over the local
    repository → user__review_graph_pr (a prompt tool, scripted model) → user__findings_to_review_comments
    (jq) → gh_pr_inline_comments → the summary comment, whose table links the inline comment."""
    base, head = git(repo, "rev-parse", "v1"), git(repo, "rev-parse", "HEAD")
    fake_github.pulls[5] = {
        "number": 5,
        "title": "Exit 4",
        "body": "gates",
        "state": "open",
        "merged": False,
        "base": {"sha": base, "ref": "main"},
        "head": {"sha": head, "ref": "x"},
        "user": {"login": "ada"},
    }
    finding = {
        "file": "crates/core.rs",
        "line": 1,
        "invariant": "docs-parity",
        "severity": "warn",
        "finding": "exit code changed without docs",
        "suggestion": "update docs/cli.md",
    }
    model_server.default = {"json": {"summary": "**1 warn**: docs parity.", "findings": [finding]}}
    env = {**github_env(fake_github), **model_server.env()}
    done = run(cli, repo, "plan", "run", "pr_review", "--input", "pr=5", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    review = model_server.requests[0]
    assert "crates/core.rs" in _user_text(review) and "+fn run() { exit(4) }" in _user_text(review)
    [inline] = fake_github.review_comments
    assert inline["path"] == "crates/core.rs" and inline["line"] == 1 and inline["commit_id"] == head
    assert inline["body"].startswith("**warn** `docs-parity` — exit code changed without docs")
    [summary] = fake_github.issue_comments
    assert "**1 warn**: docs parity." in summary["body"]
    assert f"[`crates/core.rs`]({inline['html_url']})" in summary["body"]
    assert summary["body"].endswith("<!-- graph:pr_review:summary -->")
    assert_token_nowhere(repo)


def test_github_thread_sync_and_release_against_the_fake_api(
    repo: Path, cli, fake_github: FakeGithub
) -> None:
    fake_github.threads = [_thread("T1", "x", resolved_by=None), _thread("T2", "y", resolved_by=None)]
    fake_github.review_comments.append({"id": 7, "pull": 3, "body": "old\n\n<!-- legacy -->"})
    creates = [
        {"path": "a.rs", "line": 2, "body": "New", "payload": {"label": "L"}, "keep": True},
        {"path": "a.rs", "body": "no line", "payload": {}},
    ]
    threads = [
        {"thread_id": "T1", "transition": "resolve", "state": "open"},
        {"thread_id": "T2", "transition": "none", "state": "open"},
        {"thread_id": "T9", "transition": "decline", "state": "open"},  # unknown: the resolve fails
    ]
    args = {
        "pr": 3,
        "head_sha": "abc",
        "marker": "m:finding",
        "creates": creates,
        "threads": threads,
        "sweep_marker": "legacy",
    }
    done, out = call(cli, repo, "builtin__gh_pr_thread_sync", args, env=github_env(fake_github))
    assert done.returncode == 0, done.stderr
    assert [c["body"] for c in fake_github.review_comments] == ['New\n\n<!-- m:finding {"label":"L"} -->']
    assert out["creates"][0]["keep"] is True and "url" in out["creates"][0] and "url" not in out["creates"][1]
    assert [(t["applied"], t["transitioned"]) for t in out["threads"]] == [
        (True, True),
        (False, False),
        (False, False),
    ]
    assert fake_github.threads[0]["isResolved"] and fake_github.threads[0]["comments"]["nodes"][-1][
        "body"
    ].startswith("🤖 ")
    counts = {k: v for k, v in out.items() if k not in ("creates", "threads")}
    assert counts == {
        "created_count": 1,
        "resolved_now_count": 1,
        "declined_now_count": 0,
        "still_open_count": 3,  # graph counts the input state: all three were open
        "transitions_count": 1,
        "has_creates": True,
        "has_transitions": True,
    }

    fake_github.releases = [
        _release("v1.0.0", "2026-01-01T00:00:00Z"),
        _release("v1.1.0-rc1", "2026-02-01T00:00:00Z", prerelease=True),
        _release("v1.1.0", "2026-03-01T00:00:00Z"),
        _release("v2.0.0", None, draft=True),
    ]
    done, latest = call(cli, repo, "builtin__gh_release", {}, env=github_env(fake_github))
    assert done.returncode == 0, done.stderr
    assert latest["tag"] == "v1.1.0" and latest["previous_tag"] == "v1.0.0" and latest["author"] == "ada"
    done, pre = call(
        cli,
        repo,
        "builtin__gh_release",
        {"tag": "v1.1.0", "include_prereleases": True},
        env=github_env(fake_github),
    )
    assert pre["previous_tag"] == "v1.1.0-rc1"
    done, first = call(cli, repo, "builtin__gh_release", {"tag": "v1.0.0"}, env=github_env(fake_github))
    assert first["previous_tag"] is None and first["is_draft"] is False


def _release(
    tag: str, published: str | None, *, prerelease: bool = False, draft: bool = False
) -> dict[str, Any]:
    return {
        "tag_name": tag,
        "name": f"Release {tag}",
        "body": "notes",
        "html_url": f"https://github.test/r/{tag}",
        "published_at": published,
        "author": {"login": "ada"},
        "prerelease": prerelease,
        "draft": draft,
        "target_commitish": "main",
    }


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("tools: [git]\n", "tools: expected a mapping"),
        ("tools:\n  packs: git\n", "tools.packs: expected a list of pack names"),
        (
            "tools:\n  pack: [git]\n",
            "tools.pack: unknown key (expected one of: packs, github_api_url, paths)",
        ),
        ("tools:\n  github_api_url: api.github.com\n", "tools.github_api_url: expected an http(s) URL"),
    ],
)
def test_the_tools_key_of_graphchat_yaml_is_checked(tmp_path: Path, text: str, problem: str) -> None:
    from graphchat.errors import ConfigError
    from graphchat.workspace import load_settings

    write(tmp_path / "graphchat.yaml", text)
    with pytest.raises(ConfigError) as caught:
        load_settings(tmp_path)
    assert problem in caught.value.message and "graphchat.yaml:" in caught.value.message


def test_packs_and_the_api_url_reach_the_settings(tmp_path: Path) -> None:
    from graphchat.catalog.packs import enabled_packs
    from graphchat.workspace import load_settings

    write(
        tmp_path / "graphchat.yaml",
        "tools:\n  packs: [data, github]\n  github_api_url: https://ghe.test/api/v3\n",
    )
    settings = load_settings(tmp_path)
    assert settings.packs == ("github",) and enabled_packs(settings) == ["git", "github"]
    assert settings.github_api_url == "https://ghe.test/api/v3"


# --- graph's release plans: git-cliff (a test dependency, from PyPI) -------------------------------


def cliff_repo(root: Path) -> tuple[Path, dict[str, str]]:
    """A repository with graph's cliff.toml and conventional commits: v0.1.0, then a fix."""
    repo = make_repo(root, packs="[git]")
    shutil.copy(FIXTURES / "cliff.toml", repo / "cliff.toml")
    write(repo / "a.txt", "a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "feat: plans run anywhere")
    git(repo, "tag", "v0.1.0")
    write(repo / "b.txt", "b\n")
    git(repo, "add", "b.txt")
    git(repo, "commit", "-q", "-m", "fix: exit 4 on a failed gate (#12)")
    cliff = shutil.which("git-cliff") or str(Path(sys.executable).parent / "git-cliff")
    assert Path(cliff).exists(), "git-cliff (a test dependency) is not installed"
    return repo, {"PATH": f"{Path(cliff).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_compose_changelog_writes_the_page_from_git_cliff_and_the_snippets(tmp_path: Path, cli) -> None:
    """.graph/plans/compose_changelog.yaml: user__cliff_context (git-cliff + jq), a filter, a map
    whose body runs user__snippet_status and builtin__reshape (sections over the snippet state),
    then user__write_changelog_page — zero inference."""
    repo, env = cliff_repo(tmp_path)
    write(repo / "docs" / "snippets" / "changelog" / "v0.1.0" / "summary.mdx", "Plans run anywhere.\n")
    done = run(cli, repo, "plan", "run", "compose_changelog", "--input", "tag=v0.2.0", "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"path": "docs/changelog.mdx", "releases": 3}  # v1, v0.1.0, v0.2.0
    page = (repo / "docs" / "changelog.mdx").read_text()
    assert "import SummaryV0_1_0 from '/snippets/changelog/v0.1.0/summary.mdx';" in page
    assert page.index('<Update label="v0.2.0"') < page.index('<Update label="v0.1.0"')
    assert "### Fixed\n\n- exit 4 on a failed gate (#12)\n" in page
    assert "<SummaryV0_1_0 />\n\n### Added\n\n- plans run anywhere\n" in page


def test_changelog_entry_writes_a_new_releases_snippet(tmp_path: Path, cli, model_server) -> None:
    """.graph/plans/changelog_entry.yaml end to end: snippet_status, release_subjects (git-cliff),
    builtin__infer with graph's output_schema (scripted model), write_changelog_snippet."""
    repo, env = cliff_repo(tmp_path)
    model_server.default = {
        "json": {
            "summary": "#### Gates\nA failed gate exits 4.",
            "migration_needed": False,
            "migration_prompt": "",
        }
    }
    done = run(
        cli,
        repo,
        "plan",
        "run",
        "changelog_entry",
        "--input",
        "version=v0.2.0",
        "--yes",
        env={**env, **model_server.env()},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "version": "v0.2.0",
        "regenerated": True,
        "migration_needed": False,
        "written": ["summary.mdx"],
    }
    assert (
        repo / "docs" / "snippets" / "changelog" / "v0.2.0" / "summary.mdx"
    ).read_text() == "#### Gates\nA failed gate exits 4.\n"
    [asked] = model_server.requests
    assert "exit 4 on a failed gate (#12)" in _user_text(asked)
