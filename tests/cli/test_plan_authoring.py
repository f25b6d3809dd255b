"""Plan authoring (issue 22): graph's edit verbs through the real command. One edit each,
written back; a rejected edit leaves the file byte for byte; problems the plan already had
never block an edit; a catalog problem (an unknown tool) is reported, never a rejection."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SCHEMA = '{"type":"object","properties":{"who":{"type":"string","default":"you"}}}'


def envelope(done) -> dict:
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


@pytest.fixture
def greet(workspace: Path, cli) -> Path:
    """The authoring walk up to a runnable plan: new → input_schema → two steps → output."""
    steps = [
        ("new", "greet", "--description", "greet someone"),
        ("set", "greet", "input_schema", SCHEMA),
        ("step", "add", "greet", "E0", "builtin__reshape", '{"shape":{"greeting":"hi {{input.who}}"}}'),
        ("step", "add", "greet", "E1", "builtin__reshape", '{"shape":{"loud":"{{E0.greeting}}!"}}'),
        ("set", "greet", "output", '{"text":"{{E1.loud}}"}'),
    ]
    for args in steps:
        done = cli("plan", *args, "--json")
        assert done.returncode == 0, (args, done.stderr)
        assert envelope(done)["ok"] is True
    return workspace / "plans" / "greet.yaml"


def test_the_authoring_walk_ends_in_a_plan_that_runs_with_another_input(greet: Path, cli) -> None:
    done = cli("plan", "step", "rename", "greet", "E0", "hello", "--json")
    assert done.returncode == 0, done.stderr
    assert envelope(done) == {
        "ok": True,
        "id": "hello",
        "renamedFrom": "E0",
        "steps": 2,
        "savedTo": str(greet),
    }
    text = greet.read_text()
    assert "{{hello.greeting}}" in text and "E0" not in text
    done = cli("plan", "run", "greet", "--input", "who=Ada")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"text": "hi Ada!"}
    assert cli("plan", "validate", "greet").returncode == 0


def test_without_json_one_line_on_stderr_and_stdout_empty(greet: Path, cli) -> None:
    done = cli("plan", "step", "update", "greet", "E1", "reasoning", "shout it")
    assert done.returncode == 0 and done.stdout == ""
    assert done.stderr.strip() == f"✓ step E1: reasoning updated → {greet}"
    assert "reasoning: shout it" in greet.read_text()
    done = cli("plan", "step", "unset", "greet", "E1", "reasoning", "--json")
    assert envelope(done)["ok"] is True and "reasoning" not in greet.read_text()


def test_an_edit_that_adds_a_problem_leaves_the_file_byte_for_byte(greet: Path, cli) -> None:
    before = greet.read_bytes()
    # E1 reads E0: removing it would leave a reference dangling
    done = cli("plan", "step", "rm", "greet", "E0", "--json")
    assert done.returncode == 1
    body = envelope(done)
    assert body["ok"] is False and body["error"].startswith("edit rejected")
    assert any("step E1" in p and "E0" in p for p in body["problemsIntroduced"])
    # a duplicate id
    done = cli("plan", "step", "add", "greet", "E1", "builtin__reshape", '{"shape":{}}')
    assert done.returncode == 1 and done.stdout == ""
    assert "edit rejected" in done.stderr and "duplicate step id 'E1'" in done.stderr
    # a reference to a later step (inserted before the step it reads)
    done = cli("plan", "step", "add", "greet", "E9", "builtin__reshape", '{"shape":{"x":"{{E1.loud}}"}}',
                     "--before", "E1", "--json")  # fmt: skip
    assert done.returncode == 1 and envelope(done)["problemsIntroduced"]
    assert greet.read_bytes() == before


def test_refusals_and_usage_mistakes(greet: Path, cli) -> None:
    done = cli("plan", "step", "rm", "greet", "nope", "--json")
    assert done.returncode == 1
    assert envelope(done)["availableSteps"] == ["E0", "E1"]
    done = cli("plan", "unset", "greet", "identifier")
    assert done.returncode == 2 and "plan set" in done.stderr
    done = cli("plan", "set", "greet", "colour", "red")
    assert done.returncode == 2 and "unknown plan attribute 'colour'" in done.stderr
    done = cli("plan", "set", "greet", "output", "{not json")
    assert done.returncode == 2
    done = cli("plan", "new", "greet")
    assert done.returncode == 1 and "already exists" in done.stderr
    done = cli("plan", "set", "greet", "output", '{"text":"{{E0.greeting}}"}')
    assert done.returncode == 0
    done = cli("plan", "step", "rm", "greet", "E1")
    assert done.returncode == 0
    done = cli("plan", "step", "rm", "greet", "E0")
    assert done.returncode == 1 and "last step" in done.stderr


def test_an_invalid_plan_stays_editable_and_an_unknown_tool_is_reported_not_rejected(
    workspace: Path, cli
) -> None:
    done = cli("plan", "new", "draft", "--json")
    assert envelope(done)["preExistingProblems"] == ["steps: the plan has no steps"]
    done = cli("plan", "set", "draft", "description", "a draft", "--json")
    body = envelope(done)
    assert done.returncode == 0 and body["preExistingProblems"] == ["steps: the plan has no steps"]
    assert "pre-existing" in body["note"]
    done = cli("plan", "step", "add", "draft", "E0", "nowhere__tool", "{}", "--json")
    body = envelope(done)
    assert done.returncode == 0 and "preExistingProblems" not in body
    assert any("nowhere__tool" in note for note in body["notes"])
    assert cli("plan", "validate", "draft").returncode == 1  # the catalog problem stands


def test_comments_and_key_order_survive_an_edit(workspace: Path, cli) -> None:
    path = workspace / "plans" / "kept.yaml"
    path.write_text(
        "# a header comment\nidentifier: kept\nname: Kept\ndescription: keeps comments\n"
        "steps:\n  - id: E0  # the first step\n    tool_name: builtin__reshape\n    input: {shape: {a: 1}}\n"
        "output: {a: '{{E0.a}}'}\n"
    )
    done = cli("plan", "set", "kept", "exemplars", "keep this", "and this")
    assert done.returncode == 0, done.stderr
    text = path.read_text()
    assert text.startswith("# a header comment\nidentifier: kept\n")
    assert "# the first step" in text
    assert text.index("exemplars:") < text.index("steps:")


def test_changing_the_identifier_writes_a_new_file_and_leaves_the_old(greet: Path, cli) -> None:
    before = greet.read_bytes()
    done = cli("plan", "set", "greet", "identifier", "salute", "--json")
    body = envelope(done)
    assert done.returncode == 0 and body["renamedFrom"] == str(greet)
    assert body["savedTo"] == str(greet.with_name("salute.yaml"))
    assert greet.read_bytes() == before
    assert "identifier: salute" in greet.with_name("salute.yaml").read_text()


def test_plan_show_tree_and_mermaid(greet: Path, cli) -> None:
    done = cli("plan", "show", "greet", "--tree")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "plan__greet — Greet (output finish)",
        "├── E0  builtin__reshape  ← input.who",
        "├── E1  builtin__reshape  ← E0",
        "└── output  ← E1",
    ]
    done = cli("plan", "show", "greet", "--mermaid")
    assert done.stdout.startswith("flowchart TD\n") and "n_E0 --> n_E1" in done.stdout


def test_plan_run_tree_draws_each_steps_status_on_stderr(greet: Path, cli) -> None:
    done = cli("plan", "run", "greet", "--tree", "--input", "who=Bo")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"text": "hi Bo!"}  # stdout stays the deliverable
    tail = done.stderr.splitlines()[-4:]
    assert tail[0] == "plan__greet — Greet (output finish)"
    assert tail[1].startswith("├── E0  builtin__reshape  ← input.who   ✓ ")
    assert tail[2].startswith("├── E1  builtin__reshape  ← E0   ✓ ")
    assert tail[3] == "└── output  ← E1"


def test_every_verb_answers_with_an_envelope_under_json(greet: Path, cli) -> None:
    verbs = [
        ("plan", "set", "greet", "exemplars", "greet Ada", "say hi"),
        ("plan", "unset", "greet", "exemplars"),
        ("plan", "step", "update", "greet", "E1", "input", '{"shape":{"loud":"{{E0.greeting}}!!"}}'),
        ("plan", "step", "update", "greet", "E1", "tool", "builtin__reshape"),
        ("plan", "step", "update", "greet", "E1", "reasoning", "louder"),
        ("plan", "step", "unset", "greet", "E1", "reasoning"),
        ("plan", "step", "add", "greet", "E2", "builtin__reshape", '{"shape":{"n":1}}', "--after", "E0"),
        ("plan", "step", "rename", "greet", "E2", "count"),
        ("plan", "step", "rm", "greet", "count"),
    ]
    for args in verbs:
        done = cli(*args, "--json")
        assert done.returncode == 0, (args, done.stderr)
        body = envelope(done)
        assert body["ok"] is True and body["savedTo"] == str(greet), (args, body)
    done = cli("plan", "run", "greet", "--input", "who=Cy")
    assert json.loads(done.stdout) == {"text": "hi Cy!!"}


def test_an_edit_says_the_catalogs_warnings_as_every_host_does(greet: Path, cli) -> None:
    """`plan set`/`plan step` get their catalog from `host.open_host`: a server the catalog
    skips is said (before, an edit's catalog notes were read from a catalog built silently)."""
    from tests.servers.support import stdio, write_servers

    write_servers(greet.parent.parent, {"plan": stdio()})
    done = cli("plan", "set", "greet", "description", "greet anyone", "--json")
    assert done.returncode == 0, done.stderr
    assert envelope(done)["ok"] is True
    assert "server name 'plan' is reserved" in done.stderr and "this server is skipped" in done.stderr
