"""Every example plan in docs/plans.md loads, validates, and — where it needs no model — runs as
the page says it does.

The page marks its examples: a ```yaml block whose first line starts with `# plan` is a plan
file (`# plan — needs a model` when it reaches a model: such a plan is run against the
scripted model server instead of by a documented command); a ```yaml block whose first line is `# file: NAME` is a file of the workspace (an
`--answers` file); a ```console block holds `$ graphchat plan run …` lines, each followed by
the stdout the page promises (compared as JSON when it is JSON) and, optionally, a last line
`[exit N]` with the exit code (0 when absent). All the page's plans live in one workspace, so
they may call each other as `plan__<identifier>` tools.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from graphchat.plans.loader import load_plan_text

DOC = Path(__file__).resolve().parent.parent / "docs" / "plans.md"
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```\s*$", re.S | re.M)


@dataclass
class Example:
    identifier: str
    text: str
    needs_model: bool


@dataclass
class Command:
    args: list[str]
    stdout: str
    exit_code: int


def blocks() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(DOC.read_text(encoding="utf-8"))]


def plans() -> list[Example]:
    out = []
    for lang, body in blocks():
        first = body.splitlines()[0] if body else ""
        if lang == "yaml" and first.startswith("# plan"):
            plan = load_plan_text(body, f"docs/plans.md ({first})")
            out.append(Example(plan.identifier, body, "needs a model" in first))
    return out


def files() -> dict[str, str]:
    out = {}
    for lang, body in blocks():
        first = body.splitlines()[0] if body else ""
        if lang == "yaml" and first.startswith("# file: "):
            out[first.removeprefix("# file: ").strip()] = body
    return out


def commands() -> list[Command]:
    out: list[Command] = []
    for lang, body in blocks():
        if lang != "console":
            continue
        current: Command | None = None
        for line in body.splitlines():
            if line.startswith("$ "):
                current = Command(shlex.split(line[2:]), "", 0)
                out.append(current)
            elif current is not None:
                found = re.fullmatch(r"\[exit (\d+)\]", line.strip())
                if found:
                    current.exit_code = int(found.group(1))
                else:
                    current.stdout += line + "\n"
    return out


RUNS = [c for c in commands() if c.args[:3] == ["graphchat", "plan", "run"]]


def test_the_page_has_examples_of_every_control_step() -> None:
    text = "\n".join(e.text for e in plans())
    for step in ("exit", "decide", "filter", "map", "reduce", "agent", "ask"):
        assert f"tool_name: {step}" in text, f"no example plan uses `{step}`"
    runnable = {e.identifier for e in plans() if not e.needs_model}
    ran = {c.args[3] for c in RUNS}
    assert runnable == ran, "every plan that needs no model is run on the page, and only those"
    assert {"needs a model" in e.text.splitlines()[0] for e in plans()} == {True, False}


@pytest.fixture
def docs_workspace(workspace: Path) -> Path:
    for example in plans():
        (workspace / "plans" / f"{example.identifier}.yaml").write_text(example.text, encoding="utf-8")
    for name, body in files().items():
        (workspace / name).write_text(body, encoding="utf-8")
    return workspace


def test_every_example_plan_loads_and_validates(docs_workspace: Path, cli) -> None:
    examples = plans()
    assert len({e.identifier for e in examples}) == len(examples), "two example plans share an identifier"
    done = cli("plan", "validate", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    checked = {p.get("identifier") for p in report["plans"]} if isinstance(report, dict) else set()
    assert {e.identifier for e in examples} <= checked, report


@pytest.mark.parametrize("command", RUNS, ids=[" ".join(c.args[3:]) for c in RUNS])
def test_every_run_in_the_page_prints_what_it_says(docs_workspace: Path, cli, command: Command) -> None:
    needs_model = {e.identifier for e in plans() if e.needs_model}
    assert command.args[3] not in needs_model, "a documented run needs a model: it cannot be checked"
    done = cli(*command.args[1:])
    assert done.returncode == command.exit_code, done.stderr
    expected = command.stdout.strip()
    if expected.startswith(("{", "[")):
        assert json.loads(done.stdout) == json.loads(expected)
    else:
        assert done.stdout.strip() == expected


def _system(body: dict) -> str:
    messages = body.get("messages") or []
    first = messages[0] if messages else {}
    return str(first.get("content") or "") if first.get("role") == "system" else ""


def _model_tour_reply(body: dict) -> dict:
    """The model side of `model_tour`: the judge, builtin__infer, the agent and the solver."""
    last = str((body.get("messages") or [{}])[-1].get("content") or "")
    system = _system(body)
    if "judge one yes/no question" in system:
        asked = " ".join(str(m.get("content")) for m in body["messages"][1:])
        return {"json": {"verdict": "internal" not in asked, "reason": "said so"}}
    if "automated workflow" in system:
        if not any(m.get("role") == "tool" for m in body["messages"]):
            return {"tool_calls": [{"name": "plan__tag", "arguments": {"value": "faster startup"}}]}
        return {"json": {"risky": ["faster startup"]}}
    if "final answer of a workflow" in system:
        return {"text": "RELEASE NOTES"}
    if any("Write a one-line headline" in str(m.get("content")) for m in body["messages"]):
        return {"json": {"headline": "Faster and friendlier"}}
    return {"text": f"unexpected request: {last[:80]}"}


def test_the_plan_that_needs_a_model_runs_against_a_scripted_model(
    docs_workspace: Path, cli, model_server
) -> None:
    """`model_tour` (infer filter, builtin__infer, agent, solver) with a scripted model: each step
    returns what the page says, and the solver gets it."""
    assert "model_tour" in {e.identifier for e in plans() if e.needs_model}
    model_server.default = _model_tour_reply
    changes = '["faster startup", "internal refactor", "new --json flag"]'
    done = cli("plan", "run", "model_tour", "--input", f"changes={changes}", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "RELEASE NOTES"
    solver = [r for r in model_server.requests if "final answer of a workflow" in _system(r)]
    assert len(solver) == 1
    sent = solver[0]["messages"][-1]["content"]
    assert "Faster and friendlier" in sent  # headline.headline, from builtin__infer's JSON
    data = json.loads(sent.split("Data:\n", 1)[1].split("\n\nNotes:", 1)[0])
    assert data == {
        "changes": ["faster startup", "new --json flag"],  # the filter's items
        "risky": ["faster startup"],  # the agent's output
        "agent_rounds": 2,
        "agent_calls": [{"tool": "plan__tag", "round": 1}],
        "agent_finished": True,
    }
    judged = [r for r in model_server.requests if "judge one yes/no question" in _system(r)]
    assert len(judged) == 3  # one inferred gate per element
