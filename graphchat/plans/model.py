"""The typed plan: what the loader produces and the executor runs.

Field names are the spec's snake_case; the loader has already normalised camelCase spellings
(toolName, outputSchema, whenUnanswered, ...) and checked every load-time rule, so the
executor can trust the structure (but not the data templates render to).
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RESERVED_ROOTS = frozenset({"input", "item", "index", "accumulator", "length"})
PLAN_TOOL_PREFIX = "plan__"  # a plan is the catalog tool plan__<identifier>


def plan_identifier(tool_name: str) -> str | None:
    """The identifier of the plan that `tool_name` (`plan__<identifier>`) calls, else None."""
    if tool_name.startswith(PLAN_TOOL_PREFIX):
        return tool_name[len(PLAN_TOOL_PREFIX) :]
    return None


@dataclass
class Step:
    """One step: a catalog tool call or a control step (`graphchat.plans.steps.CONTROL`).

    `input` holds the step's input tree with snake_case keys (templates unrendered). For control
    steps with bodies (`decide` then/else, `map`/`reduce` do) the parsed bodies are in `bodies`
    and are NOT rendered with the rest of the input.
    """

    id: str | None
    tool_name: str
    input: dict[str, Any] = field(default_factory=dict)
    reasoning: str | None = None
    bodies: dict[str, Body] = field(default_factory=dict)
    line: int | None = None

    @property
    def label(self) -> str:
        return self.id or self.tool_name


@dataclass
class Body:
    """A `then`/`else`/`do` body: one call without id (`single`) or a list of steps with ids.

    The body's result is the last step's result.
    """

    steps: list[Step]
    single: bool = False


@dataclass
class Solver:
    query_to_answer: str
    data: Any = None
    system_prompt: str | None = None


@dataclass
class Plan:
    identifier: str
    name: str
    description: str
    steps: list[Step]
    exemplars: list[str] = field(default_factory=list)
    requires_servers: list[str] = field(default_factory=list)
    input_schema: dict[str, Any] | None = None
    solver: Solver | None = None
    output: Any = None  # template map; None when absent
    path: Path | None = None
    # What the loader ignored, as graph ignores it (an unknown field on a step or in `solver`):
    # `<file>:<line>: step <id>: <field>: <what>`, for the commands to print on stderr.
    warnings: list[str] = field(default_factory=list)

    @property
    def finish(self) -> str:
        """solver | output | silent"""
        if self.solver is not None:
            return "solver"
        if self.output is not None:
            return "output"
        return "silent"

    @property
    def tool_name(self) -> str:
        return PLAN_TOOL_PREFIX + self.identifier

    def missing_servers(self, configured: Container[str]) -> list[str]:
        """The `requires_servers` that are not `configured` (the plan is hidden and cannot run)."""
        return [name for name in self.requires_servers if name not in configured]

    def all_steps(self) -> list[Step]:
        """Every step, body steps included, in file order."""
        out: list[Step] = []

        def walk(steps: list[Step]) -> None:
            for step in steps:
                out.append(step)
                for body in step.bodies.values():
                    walk(body.steps)

        walk(self.steps)
        return out


class PlanLoadError(Exception):
    """A plan that does not load: every problem, each `<file>: step <id>: <field>: <what>`."""

    def __init__(
        self,
        source: str,
        problems: list[str],
        lines: list[int | None] | None = None,
        *,
        partial: Plan | None = None,
        refused: set[str] | None = None,
    ) -> None:
        self.source = source
        self.problems = problems
        # What did load (steps with problems included, as far as they loaded), so the checks
        # after loading can still run and every problem is reported at once; `refused`: labels
        # of steps whose tool name the loader refused (not checked again).
        self.partial = partial
        self.refused: set[str] = set(refused or ())
        # the 1-based line of each problem in the file, where it is known (parallel to problems)
        self.lines: list[int | None] = list(lines) if lines is not None else [None] * len(problems)
        super().__init__("\n".join(problems))
