"""Argument hygiene (issue 18, break 1–2): a value a model, a plan or an MCP client chooses
reaches a program as data, never as one of its options, and a path stays in the repository.

Every case is a file in `corpus/arguments/`: a tool, the arguments a hostile model chose
(`{marker}` is a file the attack would create, `{secret}` a file it would read), and either
`names` (the call is refused with an error naming that) or `exit` + `shows` (a value in a
place where it is data runs as data). Each case runs through `tools call` (exit code, the
message, nothing written, nothing leaked) and — all at once, in one round of a scripted model
— through `ask`, where the model gets the same refusal as its tool result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial.support import CORPUS
from tests.catalog.test_graph_tools import call, git, make_repo, run, write

CASES = sorted((CORPUS / "arguments").glob("*.json"))
SECRET = "the-secret-value-42"

EXEC_TOOLS = {
    "count": """
name: count
description: bytes in a file
kind: exec
read_only: true
command: wc
args: ["-c", "{{input.file}}"]
output: text
input_schema: {type: object, required: [file], properties: {file: {type: string}}}
""",
    "count_any": """
name: count_any
description: bytes in a file, any name
kind: exec
read_only: true
command: wc
args: ["-c", "--", "{{input.file}}"]
output: text
input_schema: {type: object, required: [file], properties: {file: {type: string}}}
""",
    "shell_echo": """
name: shell_echo
description: echo a word through sh -c, as a positional parameter
kind: exec
read_only: true
command: sh
args: ["-c", 'printf %s "$1"', "shell_echo", "{{input.word}}"]
output: text
input_schema: {type: object, required: [word], properties: {word: {type: string}}}
""",
    "sort_with": """
name: sort_with
description: sort letters.txt with a flag of the caller's
kind: exec
read_only: true
command: sort
args: ["{{input.flag}}", "letters.txt"]
options_allowed: [flag]
output: text
input_schema: {type: object, required: [flag], properties: {flag: {type: string}}}
""",
}


def load(case: Path, marker: Path, secret: Path) -> dict[str, Any]:
    text = case.read_text().replace("{marker}", str(marker)).replace("{secret}", str(secret))
    return json.loads(text)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = make_repo(tmp_path, examples=False)
    for name, text in EXEC_TOOLS.items():
        write(repo / "tools" / f"{name}.yaml", text)
    write(repo / "letters.txt", "a\nb\n")
    (tmp_path / "secret.txt").write_text(SECRET + "\0")
    return repo


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_a_chosen_value_is_data_through_tools_call(case: Path, repo: Path, cli) -> None:
    marker = repo.parent / "pwned"
    spec = load(case, marker, repo.parent / "secret.txt")
    done, value = call(cli, repo, spec["tool"], spec["arguments"], yes=False)
    shown = done.stdout + done.stderr
    assert "Traceback" not in shown
    assert not marker.exists(), f"{case.stem}: the attack wrote {marker}"
    assert SECRET not in shown, f"{case.stem}: the secret leaked"
    if "names" in spec:
        assert done.returncode == 1, shown
        assert spec["names"] in shown, shown
        assert len([line for line in done.stderr.splitlines() if line.startswith("error:")]) == 1, done.stderr
    else:
        assert done.returncode == spec["exit"], shown
        assert spec["shows"] in shown, shown


def test_a_hostile_model_gets_each_refusal_as_its_tool_result(repo: Path, cli, model_server) -> None:
    marker = repo.parent / "pwned"
    secret = repo.parent / "secret.txt"
    refused = [load(c, marker, secret) for c in CASES]
    refused = [spec for spec in refused if "names" in spec]
    calls = [
        {"id": f"call_{i}", "name": spec["tool"], "arguments": spec["arguments"]}
        for i, spec in enumerate(refused)
    ]
    model_server.push({"tool_calls": calls}, {"text": "done"})
    done = run(cli, repo, "ask", "look around", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done"
    assert not marker.exists()
    results = {
        m["tool_call_id"]: m["content"] for m in model_server.requests[-1]["messages"] if m["role"] == "tool"
    }
    for i, spec in enumerate(refused):
        assert spec["names"] in results[f"call_{i}"], (spec["about"], results[f"call_{i}"])
        assert SECRET not in results[f"call_{i}"]


def test_ordinary_refs_and_paths_still_work(repo: Path, cli) -> None:
    """`HEAD`, `main`, `v1`, `HEAD~1`, a sha, and `''` where a tool gives it a meaning."""
    sha = git(repo, "rev-parse", "HEAD~1")
    for ref in ("HEAD", "main", "v1", "HEAD~1", sha, sha[:8]):
        done, value = call(cli, repo, "builtin__git_file", {"ref": ref, "path": "README.md"})
        assert done.returncode == 0 and value == {"text": "# demo"}, (ref, done.stderr)
    done, value = call(cli, repo, "builtin__git_grep", {"pattern": "exit", "ref": ""})
    assert done.returncode == 0 and value["count"] == 1, done.stderr
    done, value = call(cli, repo, "builtin__git_log", {"base": "v1", "head": ""})
    assert done.returncode == 0 and value["count"] == 1, done.stderr
    done, value = call(cli, repo, "builtin__git_file", {"ref": "HEAD", "path": "./README.md"})
    assert done.returncode == 0 and value == {"text": "# demo"}, done.stderr
    done, value = call(
        cli,
        repo,
        "builtin__git_diff",
        {"base": "v1", "head": "HEAD", "paths": "crates ./src", "exclude": "src/nothing", "max_bytes": 5000},
    )
    assert done.returncode == 0 and "crates/core.rs" in value["text"], done.stderr


def test_options_allowed_must_name_an_input(repo: Path, cli) -> None:
    write(
        repo / "tools" / "bad.yaml",
        "name: bad\ndescription: x\nkind: exec\ncommand: ls\nargs: ['{{input.x}}']\noptions_allowed: [y]\n"
        "input_schema: {type: object, properties: {x: {type: string}}}\n",
    )
    done = run(cli, repo, "tools", "list")
    assert done.returncode == 0
    assert "bad.yaml" in done.stderr and "options_allowed" in done.stderr and "'y'" in done.stderr
