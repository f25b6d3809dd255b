"""The shape of the plans package: each control step lives in one module of plans/steps, the
one table lists them all, and the executor and the steps do not import each other.

These read the source (AST), so an import hidden in a function or under TYPE_CHECKING counts.
"""

from __future__ import annotations

import ast
import types
from pathlib import Path
from typing import Any

import pytest

import graphchat.plans
from graphchat.plans.steps import CONTROL

PLANS = Path(graphchat.plans.__file__).parent
STEPS = PLANS / "steps"
HELPERS = {"__init__", "pool"}  # modules of plans/steps that are not control steps


def module_name(path: Path) -> str:
    parts = path.relative_to(PLANS.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports anywhere (top level, in functions, under TYPE_CHECKING);
    `from pkg import mod` counts as importing `pkg.mod` as well as `pkg`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*parent, base] if base else parent)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def plans_graph() -> dict[str, set[str]]:
    """graphchat.plans module -> the graphchat.plans modules it imports."""
    files = {module_name(p): p for p in PLANS.rglob("*.py")}
    return {name: {m for m in imports_of(path) if m in files and m != name} for name, path in files.items()}


def step_modules() -> list[Path]:
    return sorted(p for p in STEPS.glob("*.py") if p.stem not in HELPERS)


@pytest.mark.parametrize("path", sorted(STEPS.glob("*.py")), ids=lambda p: p.name)
def test_no_step_module_imports_the_executor(path: Path) -> None:
    assert "graphchat.plans.executor" not in imports_of(path)


def test_executor_and_steps_share_no_import_cycle() -> None:
    graph = plans_graph()
    executor = "graphchat.plans.executor"
    assert any(m.startswith("graphchat.plans.steps") for m in graph[executor])  # it does use them

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        return False

    for name in graph:
        if name.startswith("graphchat.plans.steps"):
            assert not reaches(name, executor), f"{name} reaches the executor through its imports"


def test_the_table_has_an_entry_per_control_step_module() -> None:
    names = {p.stem for p in step_modules()}
    assert set(CONTROL) == names
    for name, control in CONTROL.items():
        assert getattr(control, "__name__", None) == f"graphchat.plans.steps.{name}"


@pytest.mark.parametrize("path", step_modules(), ids=lambda p: p.stem)
def test_a_control_step_module_holds_its_grammar_and_its_run(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined = {
        target.id
        for node in tree.body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    coroutines = {node.name for node in tree.body if isinstance(node, ast.AsyncFunctionDef)}
    assert {"FIELDS", "BODIES", "ONLY_IN"} <= defined
    assert {"load", "result", "tools", "sometimes"} <= functions and "run" in coroutines
    assert {"PER_ITEM", "PER_ITEM_FIELDS"} <= defined
    control = CONTROL[path.stem]
    assert set(control.BODIES) <= set(control.FIELDS)
    assert control.ONLY_IN is None or control.ONLY_IN in CONTROL


@pytest.mark.parametrize(
    "module", ["loader", "grammar", "runtime", "model", "validate", "splice_types", "check"]
)
def test_the_loader_names_no_control_step(module: str) -> None:
    """The loader (and what it is built on), `plan validate` and the data-flow checker know
    control steps only through the table: what a step may call, which fields run per item or
    on some runs only, and its result are declared in its module.
    (The executor is not scanned: an outcome's kind `exit` is a word, not a dispatch.)"""
    tree = ast.parse((PLANS / f"{module}.py").read_text(encoding="utf-8"))
    named = {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in CONTROL
    }
    assert not named, f"plans/{module}.py names control steps {sorted(named)}"


def test_the_table_lists_every_step_once() -> None:
    assert len(set(map(id, CONTROL.values()))) == len(CONTROL)


async def test_a_new_control_step_is_one_module_and_one_table_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step the loader and executor have never heard of works once the table lists it:
    its fields and checks at load time, its placement in bodies, its run."""
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.events import EventSink
    from graphchat.plans.executor import run_plan
    from graphchat.plans.grammar import Site
    from graphchat.plans.loader import load_plan_data
    from graphchat.plans.model import PlanLoadError, Step
    from graphchat.plans.runtime import Frame, StepRunner, render_text

    echo = types.ModuleType("graphchat.plans.steps.echo")

    def load(site: Site) -> None:
        site.string("text", required=True)
        site.positive_int("times")

    async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
        return {"echo": render_text(step, step.input["text"], scope) * step.input.get("times", 1)}

    echo.__dict__.update(
        FIELDS=("text", "times"), BODIES=(), ONLY_IN=None, PER_ITEM=(), PER_ITEM_FIELDS=(), load=load, run=run
    )
    monkeypatch.setitem(CONTROL, "echo", echo)

    def plan(step_input: dict[str, Any]) -> dict[str, Any]:
        body = {"tool_name": "echo", "input": step_input}
        return {
            "identifier": "p",
            "name": "p",
            "description": "d",
            "steps": [{"id": "E1", "tool_name": "map", "input": {"over": "{{input.xs}}", "do": body}}],
            "output": {"r": "{{E1.results}}"},
        }

    with pytest.raises(PlanLoadError) as err:
        load_plan_data(plan({"text": "{{item}}", "times": 0, "loud": True}), "<p>")
    assert err.value.problems == [
        "<p>: step E1/do: input.loud: unknown field in `echo` input (allowed: text, times)",
        "<p>: step E1/do: input.times: must be at least 1, got 0",
    ]
    loaded = load_plan_data(plan({"text": "{{item}}", "times": 2}), "<p>")
    out = await run_plan(
        loaded, {"xs": ["a", "b"]}, catalog=Catalog(), ctx=CallContext(events=EventSink()), llm_factory=None
    )
    assert out.kind == "ok", out.error
    assert out.output == {"r": [{"echo": "aa"}, {"echo": "bb"}]}
