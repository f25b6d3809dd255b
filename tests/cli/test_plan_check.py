"""Issue 21: the data-flow checker behind `plan validate`, over a real workspace.

Two real MCP servers (tests/servers/catalog_server.py as `shop`, tools_server.py as `t`), whose
output shapes are learned from real calls (`graphchat tools call`). A valid plan runs; each
mutant of it — one edit of every kind the issue lists — is rejected by `plan validate` with one
line naming the step, the path and the fix, and `plan run` of the same mutant fails too, so the
checker is never stricter than the run.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.inprocess import run_cli
from tests.servers.support import SERVERS, stdio, write_servers

BASE = """\
identifier: shop_report
name: Shop report
description: Lists a category's items, prices each one and keeps the cheap ones.
input_schema:
  type: object
  properties:
    category: {type: string, default: books}
    count: {type: integer, default: 2}
steps:
  - id: listed
    tool_name: shop__list_items
    input: {category: "{{input.category}}", count: "{{input.count}}"}
  - id: priced
    tool_name: map
    input:
      over: "{{listed.items}}"
      do: {tool_name: shop__get_item, input: {id: "{{item.id}}"}}
  - id: cheap
    tool_name: filter
    input:
      over: "{{priced.results}}"
      where: {value: "{{item.price}}", op: lt, to: 100}
  - id: stamped
    tool_name: t__stamp
    input: {n: "{{cheap.count}}"}
output:
  category: "{{listed.category}}"
  first: "{{listed.items.0.name}}"
  priced: "{{priced.count}}"
  cheap: "{{cheap.items}}"
  total: "{{stamped.total}}"
"""


@dataclass
class Mutant:
    kind: str
    old: str
    new: str
    line: str  # what `plan validate` says, on one line after `<file>:<line>: `
    run_exit: int = 1


MUTANTS = [
    Mutant(
        "misspelt input name",
        '"{{input.category}}"',
        '"{{input.categry}}"',
        "step listed: input.category: '{{input.categry}}': 'categry' is not an input of this plan: "
        "did you mean 'category'? (inputs: category, count)",
    ),
    Mutant(
        "misspelt tool argument",
        '{category: "{{input.category}}"',
        '{categry: "{{input.category}}"',
        "step listed: input.categry: shop__list_items has no argument 'categry': did you mean 'category'?",
    ),
    Mutant(
        "missing tool argument",
        'category: "{{input.category}}", ',
        "",
        "step listed: input: shop__list_items's required argument 'category' is missing: add `category:`",
    ),
    Mutant(
        "misspelt control result field: count",
        "{{priced.count}}",
        "{{priced.cont}}",
        "output.priced: '{{priced.cont}}': no field 'cont': did you mean 'count'? "
        "(priced is a map step's result {count, results})",
    ),
    Mutant(
        "misspelt control result field: results",
        "{{priced.results}}",
        "{{priced.result}}",
        "step cheap: input.over: '{{priced.result}}': no field 'result': did you mean 'results'?",
    ),
    Mutant(
        "misspelt control result field: items",
        "{{cheap.items}}",
        "{{cheap.itms}}",
        "output.cheap: '{{cheap.itms}}': no field 'itms': did you mean 'items'? "
        "(cheap is a filter step's result {count, items, dropped, dropped_count})",
    ),
    Mutant(
        "misspelt field of a tool's result",
        "{{listed.category}}",
        "{{listed.categroy}}",
        "output.category: '{{listed.categroy}}': no field 'categroy': did you mean 'category'? "
        "(listed is shop__list_items's result {category, items}, learned from",
    ),
    Mutant(
        "misspelt field of a map item",
        "{{item.id}}",
        "{{item.di}}",
        "step priced/do: input.id: '{{item.di}}': no field 'di': did you mean 'id'? "
        "(item is an element of shop__list_items's result {id, name}, learned from",
    ),
    Mutant(
        "misspelt field of a map body's result",
        "{{item.price}}",
        "{{item.prise}}",
        "step cheap: input.where.value: '{{item.prise}}': no field 'prise': did you mean 'price'?",
    ),
    Mutant(
        "misspelt field of a declared output schema",
        "{{stamped.total}}",
        "{{stamped.totl}}",
        "output.total: '{{stamped.totl}}': no field 'totl': did you mean 'total'?",
    ),
    Mutant(
        "a field read from an array",
        "{{listed.items.0.name}}",
        "{{listed.items.name}}",
        "output.first: '{{listed.items.name}}': listed.items is an array (shop__list_items's result, learned from",
    ),
    Mutant(
        "a wrong-typed default",
        "count: {type: integer, default: 2}",
        "count: {type: integer, default: two}",
        "input_schema.properties.count.default: 'two' does not fit its own schema: 'two' is not of type 'integer'",
        run_exit=3,
    ),
    Mutant(
        "a misspelt control field",
        'over: "{{listed.items}}"',
        'ovr: "{{listed.items}}"',
        "step priced: input.ovr: unknown field in `map` input (allowed: over, do, concurrency): did you mean `over`?",
    ),
    Mutant(
        "a forward reference",
        '"{{input.count}}"',
        '"{{stamped.total}}"',
        "step listed: input.count: forward reference to step 'stamped'",
    ),
    Mutant(
        "an unknown op",
        "op: lt",
        "op: less",
        "step cheap: input.where: unknown op 'less'",
    ),
    Mutant(
        "a misspelt tool",
        "tool_name: shop__get_item",
        "tool_name: shop__get_itme",
        "step priced/do: tool_name: server 'shop' has no tool 'shop__get_itme': did you mean 'shop__get_item'?",
    ),
]


def run(ws: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(["--home", str(ws), *args], env=env, input="", timeout=90, home=ws.parent, cwd=ws)


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace with the two servers, whose shapes are learned from real calls."""
    ws = tmp_path_factory.mktemp("check") / "ws"
    for sub in ("catalog", "plans", "threads"):
        (ws / sub).mkdir(parents=True)
    (ws / "graphchat.yaml").write_text("settings: {}\n")
    write_servers(ws, {"shop": stdio(str(SERVERS / "catalog_server.py")), "t": stdio()})
    (ws / "plans" / "shop_report.yaml").write_text(BASE)
    ok = run(ws, "plan", "run", "shop_report")  # the base plan runs: the shapes are learned
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["total"] == 4
    again = run(ws, "tools", "call", "shop__list_items", "--input", "category=games")
    assert again.returncode == 0, again.stderr
    return ws


def test_the_valid_plan_validates_with_learned_shapes(shop: Path) -> None:
    assert json.loads((shop / "catalog" / "shapes" / "shop__list_items.json").read_text())["seen_count"] == 2
    result = run(shop, "plan", "validate", "shop_report", "--strict")
    assert result.returncode == 0, result.stderr
    assert "note:" not in result.stderr


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.kind)
def test_validate_rejects_the_mutant_in_one_line_and_run_fails_too(
    mutant: Mutant, shop: Path, tmp_path: Path
) -> None:
    assert mutant.old in BASE
    path = tmp_path / "mutant.yaml"
    path.write_text(BASE.replace(mutant.old, mutant.new, 1))
    checked = run(shop, "plan", "validate", str(path))
    assert checked.returncode == 1, checked.stderr
    located = re.compile(rf"^{re.escape(str(path))}:\d+: ")
    lines = [located.sub("", line) for line in checked.stderr.splitlines() if located.match(line)]
    assert any(line.startswith(mutant.line) for line in lines), checked.stderr
    ran = run(shop, "plan", "run", str(path))
    assert ran.returncode == mutant.run_exit, ran.stderr
    assert ran.stdout == ""


def test_evidence_is_a_note_before_a_run_and_the_run_fails_at_the_step(shop: Path, tmp_path: Path) -> None:
    """A field two edits from a learned one is an error for `plan validate`, but only a note
    before `plan run`'s first step: the run starts and fails where the data says so."""
    path = tmp_path / "learned.yaml"
    path.write_text(BASE.replace("{{listed.category}}", "{{listed.categroy}}"))
    ran = run(shop, "plan", "run", str(path), env={"GRAPHCHAT_EVENTS": "jsonl"})
    assert ran.returncode == 1
    assert "no field 'categroy': did you mean 'category'?" in ran.stderr
    assert '"tool_started"' in ran.stderr  # it ran: the shape cache did not stop it
    assert "no key 'categroy' at listed" in ran.stderr


def test_a_field_the_learned_shape_never_saw_is_a_note_and_strict_fails(shop: Path, tmp_path: Path) -> None:
    path = tmp_path / "optional.yaml"
    path.write_text(BASE.replace("{{listed.category}}", "{{listed.discount}}"))
    plain = run(shop, "plan", "validate", str(path))
    assert plain.returncode == 0, plain.stderr
    said = (
        f"note: {path}:27: output.category: '{{{{listed.discount}}}}': no field 'discount' seen so far "
        "(it may be optional) (listed is shop__list_items's result {category, items}, learned from "
    )
    assert said in plain.stderr, plain.stderr
    strict = run(shop, "plan", "validate", str(path), "--strict", "--json")
    assert strict.returncode == 1
    assert any("no field 'discount' seen so far" in p for p in json.loads(strict.stdout)["problems"])


def test_every_problem_of_every_tier_at_once(shop: Path, tmp_path: Path) -> None:
    """A load problem, a tool problem and a data-flow problem in one plan: all three, one pass."""
    text = (
        BASE.replace("op: lt", "op: less")
        .replace("tool_name: shop__get_item", "tool_name: shop__get_itme")
        .replace("{{priced.count}}", "{{priced.cont}}")
    )
    path = tmp_path / "three.yaml"
    path.write_text(text)
    result = run(shop, "plan", "validate", str(path), "--json")
    assert result.returncode == 1
    problems = json.loads(result.stdout)["problems"]
    assert [p.split(":")[0:2] for p in problems] == [
        ["step cheap", " input.where"],
        ["step priced/do", " tool_name"],
        ["output.priced", " '{{priced.cont}}'"],
    ], problems
    text_out = run(shop, "plan", "validate", str(path))
    assert "3 problems" in text_out.stderr
    located = [
        line for line in text_out.stderr.splitlines() if re.match(rf"{re.escape(str(path))}:\d+: ", line)
    ]
    assert len(located) == 3, text_out.stderr
