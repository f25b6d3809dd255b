"""What the control steps share with the executor while a plan runs.

The failures and early ends a step raises (`StepFailed`, `ExitFired`), where a step runs
(`Frame`, `AskTurn`), throttled progress, rendering a step's templates into step errors, and
`StepRunner`: what a step may ask of the run it belongs to. The executor implements
`StepRunner`; the step modules (`graphchat.plans.steps`) use it. Both import this module and
neither imports the other's internals, so there is no import cycle.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from graphchat.template import EmptyData, TemplateError, json_kind
from graphchat.template import render_text as _render_text
from graphchat.template import render_value as _render_value

if TYPE_CHECKING:
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.events import EventSink
    from graphchat.llm.types import ModelClient
    from graphchat.plans.model import Body, Plan, Step
    from graphchat.workspace import Settings

# (role, model override or None, events) -> the model (graphchat.llm.client.LLM or a test double)
LLMFactory = Callable[[str, "str | None", "EventSink | None"], "ModelClient"]


# --- sharing the event loop ----------------------------------------------------------------

SLICE_S = 0.001  # how long a run may hold the event loop before it lets others run
_slice_started = time.perf_counter()


async def checkpoint() -> None:
    """Let the other tasks of the event loop run when this one has held it for a slice.

    A plan whose steps never wait (control steps, native tools) would otherwise keep the loop
    until it ends: under `mcp serve`, every other call of the session would wait behind it.
    Called before each step and between the items of a loop; costs a clock read when there is
    nothing to do, and one `sleep(0)` every `SLICE_S` when there is."""
    global _slice_started
    if time.perf_counter() - _slice_started >= SLICE_S:
        import asyncio

        await asyncio.sleep(0)
        _slice_started = time.perf_counter()


# --- failures and early ends ---------------------------------------------------------------


class StepFailed(Exception):
    """A step failed. `str()` is `step <id> (<tool>): <message>`; `empty_data` marks EmptyData.

    `kind` says what failed, for a host that repairs plans (the planner): the template error's
    class name (`BadPath`, `MissingStep`, `EmptyData`, …), `tool` for a tool's error result, or
    None for anything else (a control step's own check, a model call)."""

    def __init__(
        self, step: str, tool: str, message: str, *, empty_data: bool = False, kind: str | None = None
    ) -> None:
        super().__init__(message)
        self.step = step
        self.tool = tool
        self.message = message
        self.empty_data = empty_data
        self.kind = "EmptyData" if empty_data and kind is None else kind

    def __str__(self) -> str:
        return f"step {self.step} ({self.tool}): {self.message}"


class ExitFired(Exception):
    """An `exit` step fired: the rest of the plan and the finish are skipped."""

    def __init__(
        self, status: str, message: str, step: str, reason: str | None = None, output: Any = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.step = step
        self.reason = reason
        self.output = output
        self.has_output = output is not None
        self.counted = False  # counted once in steps_executed by the body it fired in (graph's body.rs)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"status": self.status, "message": self.message, "step": self.step}
        if self.reason is not None:
            data["reason"] = self.reason
        if self.has_output:
            data["output"] = self.output
        return data


class Parking(Protocol):
    """How a run parks and resumes (issues 9, 19). The executor reports its top-level position
    (`resumed_at`, `step_done`, `parked`) and every finished step below it, at any depth
    (`remember`, by address: see `Frame.path`); a resumed run takes those back (`remembered`).
    An `ask` step (or an approval) takes a stored answer (`answer_for`) or opens a request
    (`open`) when nobody here can answer."""

    def resumed_at(self) -> tuple[int, dict[str, Any], int]:
        """(top-level steps already done, their scope, steps executed so far); (0, {}, 0) fresh."""
        ...

    def step_done(self, done: int, scope: dict[str, Any], steps_executed: int) -> None: ...

    def parked(self, done: int, scope: dict[str, Any], steps_executed: int, requests: list[Any]) -> None: ...

    def remember(self, key: str, value: Any) -> None:
        """A step (or a decision inside one: a decide's verdict) finished at address `key`."""
        ...

    def remembered(self, key: str) -> tuple[bool, Any]:
        """(True, value) when the parked run had finished `key`, else (False, None)."""
        ...

    def answer_for(self, key: str) -> Any:
        """The settled answer (an `asks.Answer`) of the request at `key`, None when none."""
        ...

    def open(self, question: Any, key: str, source: dict[str, Any], timeout: float | None) -> Any:
        """Open a request for `question` at `key`; the request (its `public()` shape)."""
        ...

    def check_permitted(self, key: str, arguments: Any) -> None:
        """A permitted approval at `key` runs only with the arguments the person saw: others
        are refused (a GraphchatError naming them)."""
        ...


# --- rendering a step's templates ----------------------------------------------------------


def template_message(err: TemplateError) -> str:
    """A template error's text without the step prefix (the caller names the step)."""
    if err.path is not None:
        return "{{" + err.path + "}}: " + err.detail
    return err.detail


describe = json_kind  # what a JSON value is, for step error messages


def _failed(step: Step, err: TemplateError) -> StepFailed:
    return StepFailed(
        step.label,
        step.tool_name,
        template_message(err),
        empty_data=isinstance(err, EmptyData),
        kind=type(err).__name__,
    )


def render(step: Step, value: Any, scope: Mapping[str, Any]) -> Any:
    """`value`'s templates rendered in `scope`; a template error fails `step`."""
    try:
        return _render_value(value, scope, step=step.label)
    except TemplateError as err:
        raise _failed(step, err) from None


def render_text(step: Step, value: Any, scope: Mapping[str, Any]) -> str:
    """`value` rendered as text in `scope`; a template error fails `step`."""
    try:
        return _render_text(value, scope, step=step.label)
    except TemplateError as err:
        raise _failed(step, err) from None


def render_over(step: Step, scope: Mapping[str, Any]) -> list[Any]:
    """The step's `over`, rendered; anything but an array fails the step."""
    over = render(step, step.input.get("over"), scope)
    if not isinstance(over, list):
        raise StepFailed(step.label, step.tool_name, f"`over` must render to an array, got {describe(over)}")
    return over


# --- where a step runs ---------------------------------------------------------------------


class AskTurn:
    """Questions in item order inside a concurrent map: item i asks only after every item
    before it has asked or finished."""

    def __init__(self) -> None:
        import asyncio

        self.done: set[int] = set()
        self.low = 0
        self.cond = asyncio.Condition()

    async def wait(self, index: int) -> None:
        async with self.cond:
            await self.cond.wait_for(lambda: self.low >= index)

    async def release(self, index: int) -> None:
        async with self.cond:
            self.done.add(index)
            while self.low in self.done:
                self.low += 1
            self.cond.notify_all()


@dataclass
class Frame:
    """Where a step runs: its path prefix (for exit attribution), the map item and ask order.

    `path` is the frame's unique address in the run (issue 19): `E0[3]/` for item 3 of map
    `E0`, `D/then/` for a decide's branch, `P/` inside a sub-plan called by step `P`. A step's
    address is `path + label`: a parked run keeps each finished step's result under it, and a
    resumed run takes it from there instead of running the step again, at any depth."""

    prefix: str = ""
    index: int | None = None
    turn: AskTurn | None = None
    ctx: CallContext | None = None
    path: str = ""


# The parking of the run and the address (`base + Frame.path + label`) of the step whose tool
# call runs now: an approval or a sub-plan reached through that call parks under it.
PARKING_AT: ContextVar[tuple[Parking, str] | None] = ContextVar("graphchat_parking_at", default=None)


class Progress:
    """Throttled `done/total` progress events for a long step (at most ~4 a second + the end)."""

    def __init__(self, events: EventSink, step: str, total: int, interval: float = 0.25) -> None:
        self.events = events
        self.step = step
        self.total = total
        self.done = 0
        self.interval = interval
        self.last = time.monotonic()

    def tick(self) -> None:
        self.done += 1
        if self.done == self.total:
            if self.total > 1:
                self.events.progress(self.step, self.done, self.total)
            return
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.events.progress(self.step, self.done, self.total)


# --- what a step may ask of its run --------------------------------------------------------


class StepRunner(Protocol):
    """One plan run as a control step sees it (the executor's `Runner` is the one there is)."""

    @property
    def plan(self) -> Plan: ...
    @property
    def catalog(self) -> Catalog: ...
    @property
    def ctx(self) -> CallContext:
        """The run's own context (the caller's, one plan deeper)."""
        ...

    @property
    def events(self) -> EventSink: ...
    @property
    def settings(self) -> Settings | None: ...

    steps_executed: int
    """Steps counted so far, as graph counts them (an `agent` adds its inner tool calls)."""

    def llm(self, role: str, model: str | None = None) -> ModelClient:
        """The model for `role` (or a named model); ConfigError when none can be used here."""
        ...

    async def gate(
        self, step: Step, logical: Any, infer: Any, model: Any, scope: Mapping[str, Any]
    ) -> tuple[bool, str | None]:
        """A step's gate: (verdict, reason) — a logical gate (reason None) or an inferred one."""
        ...

    async def run_body(self, owner: Step, body: Body, scope: dict[str, Any], frame: Frame, what: str) -> Any:
        """Run a then/else/do body of `owner`; its failures are re-attributed to `owner`."""
        ...

    def quiet_ctx(self) -> CallContext:
        """The context for calls inside a map/filter body (quiet tool lines on a terminal)."""
        ...

    @property
    def parking(self) -> Parking | None:
        """Where a question nobody here can answer parks the run (None: it fails as in graph)."""
        ...

    base: str
    """This run's address in the parked record ("" for the run itself; `P/` for a sub-plan
    called by step `P`)."""

    async def once(self, key: str, make: Callable[[], Awaitable[Any]]) -> Any:
        """`await make()`, remembered at address `key` when the run may park: a resumed run
        gets the remembered value back without calling `make` again."""
        ...


async def prepare_servers(catalog: Catalog, names: set[str]) -> None:
    """Start every server the plan names, together, at its start (not one by one as steps
    reach them), and wait for the tool lists never cached, so their tools resolve.

    A server that fails to start is reported by the call that needs it (naming the server and
    why), not here.
    """
    catalog.prestart(sorted(names & set(catalog.groups())))  # in the background, in parallel
    wanted = [n for n in catalog.unprepared(retry_failed=True) if n in names]  # a plan needs them
    if wanted:
        await catalog.prepare(wanted)
