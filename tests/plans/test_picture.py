"""A plan's picture (issue 22, build 4): `plan show --tree` and `--mermaid` on every bundled plan
and graph's example plans, as snapshots of the text (GRAPHCHAT_UPDATE_SNAPSHOTS=1 rewrites them
after a deliberate change; review the diff)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from graphchat.plans.loader import load_plan
from graphchat.plans.picture import mermaid, reads, tree

REPO = Path(__file__).resolve().parent.parent.parent
SNAPSHOTS = Path(__file__).resolve().parent / "snapshots"
FIXTURES = REPO / "tests" / "fixtures" / "graph"
PLANS = sorted(
    [*REPO.glob("plans/*.yaml"), *FIXTURES.glob("plans/*.yaml"), *FIXTURES.glob("shots_plans/*.yaml")],
    key=lambda p: (p.parent.name, p.name),
)


def _check(name: str, text: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("GRAPHCHAT_UPDATE_SNAPSHOTS") == "1":
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no snapshot {path.name}: run with GRAPHCHAT_UPDATE_SNAPSHOTS=1"
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", PLANS, ids=[f"{p.parent.name}/{p.stem}" for p in PLANS])
def test_tree_and_mermaid_of_every_bundled_and_graph_plan(path: Path) -> None:
    plan = load_plan(path)
    _check(f"{path.parent.name}__{path.stem}.tree.txt", "\n".join(tree(plan)) + "\n")
    _check(f"{path.parent.name}__{path.stem}.mmd", mermaid(plan))


def test_reads_names_inputs_and_steps_but_not_section_locals() -> None:
    value = {"a": "{{input.zone}} {{E0.x.y}}", "b": ["{{#E1.items}}{{name}}{{/E1.items}}", "{{item.z}}"]}
    assert reads(value, {"E0", "E1"}) == ["input.zone", "E0", "E1"]
