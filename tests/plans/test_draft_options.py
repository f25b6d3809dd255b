"""`plan draft --from PLAN`, `--output PATH` and `--salvage` (graph's draft options) through the
real command against the scripted model server (the planner role)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import GraphchatRunner
from tests.plans.test_draft import GOAL, request_text, two_pass
from tests.scripted_server import ScriptedModelServer

DIGEST = """identifier: digest
name: Digest
description: A digest of a topic.
input_schema:
  type: object
  required: [topic]
  properties:
    topic: {type: string}
steps:
  - id: E0
    tool_name: builtin__infer
    input: {instruction: "Digest {{input.topic}}"}
output:
  digest: "{{E0.text}}"
"""


def three_steps_last_broken() -> dict[str, Any]:
    """E0 and E1 are valid; E2 names a tool nobody has; the output reads E2."""
    doc = two_pass()
    doc["steps"].append({"id": "E2", "tool_name": "builtin__no_such_tool", "input": {"x": "{{E1.text}}"}})
    doc["output"] = {"summary": "{{E2.text}}"}
    return doc


def test_from_redrafts_into_the_plans_identity_and_replaces_it_where_it_is(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    target = workspace / "plans" / "digest.yaml"
    target.write_text(DIGEST)
    model_server.push({"json": two_pass(identifier="something_else")})  # its own identity: replaced
    done = cli("plan", "draft", GOAL, "--from", "digest", env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{target}\n"
    assert sorted(p.name for p in (workspace / "plans").iterdir()) == ["digest.yaml"]
    doc = yaml.safe_load(target.read_text())
    assert doc["identifier"] == "digest" and doc["name"] == "Digest"
    assert doc["description"] == "A digest of a topic."
    assert doc["input_schema"]["required"] == ["topic"]
    assert [s["id"] for s in doc["steps"]] == ["E0", "E1"]  # every step drafted anew
    [request] = model_server.requests
    assert "The plan to redraft (digest)" in request_text(
        request
    ) and "Digest {{input.topic}}" in request_text(request)
    assert cli("plan", "validate", "digest").returncode == 0
    clash = cli("plan", "draft", GOAL, "--from", "digest", "--name", "x", env=model_server.env())
    assert clash.returncode == 2 and clash.stderr.startswith("error: --from keeps that plan's identifier")
    missing = cli("plan", "draft", GOAL, "--from", "nope", env=model_server.env())
    assert missing.returncode == 1 and "nope" in missing.stderr
    assert len(model_server.requests) == 1  # neither spent a model call


def test_output_writes_there_and_never_over_a_file_without_force(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    out = tmp_path / "elsewhere" / "drafted.yaml"
    model_server.push({"json": two_pass()})
    done = cli("plan", "draft", GOAL, "--output", str(out), env=model_server.env())
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{out}\n"
    assert yaml.safe_load(out.read_text())["identifier"] == "two_pass"
    assert list((workspace / "plans").iterdir()) == []
    again = cli("plan", "draft", GOAL, "--output", str(out), env=model_server.env())
    assert again.returncode == 1 and f"{out} already exists" in again.stderr
    assert len(model_server.requests) == 1  # refused before any model call
    both = cli("plan", "draft", GOAL, "--output", str(out), "--stdout", env=model_server.env())
    assert both.returncode == 2


def test_salvage_keeps_the_valid_prefix_of_the_last_draft_and_says_so(
    workspace: Path, cli: GraphchatRunner, model_server: ScriptedModelServer
) -> None:
    bad = three_steps_last_broken()
    model_server.push({"json": bad}, {"json": bad}, {"json": bad})
    plain = cli("plan", "draft", GOAL, env=model_server.env())
    assert plain.returncode == 1
    assert "nothing saved" in plain.stderr and list((workspace / "plans").iterdir()) == []

    model_server.push({"json": bad}, {"json": bad}, {"json": bad})
    done = cli("plan", "draft", GOAL, "--salvage", env=model_server.env())
    assert done.returncode == 1  # the draft still failed
    saved = workspace / "plans" / "two_pass.yaml"
    assert done.stdout == f"{saved}\n"
    [line] = [x for x in done.stderr.splitlines() if x.startswith("salvaged:")]
    assert line == (
        f"salvaged: the valid first 2 of 3 steps of the last draft (without its output), saved to {saved}; "
        "finish it with `graphchat plan step add` rather than redrafting"
    )
    doc = yaml.safe_load(saved.read_text())
    assert [s["id"] for s in doc["steps"]] == ["E0", "E1"] and "output" not in doc
    assert cli("plan", "validate", "two_pass").returncode == 0

    model_server.push({"json": bad}, {"json": bad}, {"json": bad})
    shown = cli("plan", "draft", GOAL, "--salvage", "--stdout", "--json", env=model_server.env())
    body = json.loads(shown.stdout)
    assert body["ok"] is False and body["path"] is None
    assert body["salvaged"] == {"steps": 2, "of": 3, "dropped": ["output"]}
    assert [s["id"] for s in body["plan"]["steps"]] == ["E0", "E1"]
