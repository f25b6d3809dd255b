"""Control steps: the `tool_name`s a plan runs itself, one module each, and the one table the
loader and the executor dispatch through.

A step's module holds everything about it (see `ControlStep`): the fields of its `input`, the
bodies among them, where it may stand, its load-time checks (`load`, written with the toolkit
of `graphchat.plans.grammar`) and its run (`run`, with what `graphchat.plans.runtime` shares
with the executor). Nothing else in the package names a control step.

Adding a control step is a new module here and one entry in `CONTROL`.

Every `run` returns exactly the result shape docs/plans.md gives for its step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from graphchat.plans.steps import agent, ask, decide, exit, filter, map, reduce

if TYPE_CHECKING:
    from graphchat.plans.grammar import Results, Site
    from graphchat.plans.model import Step
    from graphchat.plans.runtime import Frame, StepRunner


class ControlStep(Protocol):
    """What a control step's module provides."""

    @property
    def FIELDS(self) -> tuple[str, ...]:  # noqa: N802 - a module constant
        """The fields of its `input` (snake_case; camelCase spellings are accepted)."""
        ...

    @property
    def BODIES(self) -> tuple[str, ...]:  # noqa: N802
        """Which of FIELDS are bodies (`then`/`else`, `do`). A step with bodies cannot stand
        inside another step's body (a sub-plan can)."""
        ...

    @property
    def ONLY_IN(self) -> str | None:  # noqa: N802
        """Inside a body, the step may stand only in the bodies of this control step (None:
        any body that allows nesting)."""
        ...

    @property
    def PER_ITEM(self) -> tuple[str, ...]:  # noqa: N802
        """The names a per-item field sees beside the plan's scope, for each item of `over`
        (`item`, `index`, ...); `()` for a step that does not go through `over`."""
        ...

    @property
    def PER_ITEM_FIELDS(self) -> tuple[str, ...]:  # noqa: N802
        """Which of FIELDS are rendered once per item (and see PER_ITEM)."""
        ...

    def sometimes(self, step: Step) -> tuple[str, ...]:
        """Which of FIELDS (bodies included) are rendered on some runs only (a branch, a gated
        message, a default): the data-flow checker reports what they splice as evidence."""
        ...

    def load(self, site: Site) -> None:
        """Check the step's normalised `input` and load its bodies, reporting every problem."""
        ...

    def result(self, step: Step, known: Results) -> dict[str, Any]:
        """The JSON Schema of the step's result (what docs/plans.md gives for it), for the
        data-flow checker, `splice_types` and the docs: a closed object (`additionalProperties:
        false`); `known` gives the schemas of its bodies' results and of `over`'s elements."""
        ...

    def tools(self, step: Step) -> tuple[str, ...] | None:
        """The tool names or `*` globs the step may call (None: any tool of the catalog; `()`:
        none), for `plan validate` and the plan tools' reach."""
        ...

    async def run(self, runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
        """Run the step; its result has the shape the plan language documents for it."""
        ...


CONTROL: dict[str, ControlStep] = {
    "exit": exit,
    "decide": decide,
    "filter": filter,
    "map": map,
    "reduce": reduce,
    "agent": agent,
    "ask": ask,
}
