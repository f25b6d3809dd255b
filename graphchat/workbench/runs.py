"""A run of the workbench's draft (plain or debug): the executor's events kept as each top-level
step's live status, and the run's calls, tokens and cost at its end.

Runs inside the workbench keep no journal and never park; their questions and approvals go to
the bench's asker (the workbench pane). A debug run puts a `Debugger` on the run's CallContext
(the one call path) and around its models; an abort cancels the run.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext
from graphchat.events import EventSink, format_cost
from graphchat.llm.types import Usage
from graphchat.plans.executor import CURRENT_STEP, apply_defaults, input_problems, llm_factory_for, run_plan
from graphchat.workbench.debug import Debugger
from graphchat.workbench.lines import LineSink

if TYPE_CHECKING:
    from graphchat.workbench.bench import Bench
    from graphchat.workbench.debug import Pause

# What the plan tab shows beside a top-level step, by status.
MARKS = {
    "pending": "· pending",
    "not run": "· not run",
    "running": "◐ running",
    "paused": "⏸ paused",
    "done": "✓ done",
    "failed": "✗ failed",
    "skipped": "⤼ skipped (result injected)",
    "aborted": "■ aborted",
}
SKIPPED_NOTE = "skipped: result injected"


class StepStatus(EventSink):
    """Forwards every event to `inner` and keeps what the run did: each top-level step's status
    and the tool calls made (a skipped call is not one). Not a `human` sink: a map's item calls
    are not dropped (they are counted, and the run tab shows each one)."""

    def __init__(self, inner: EventSink, steps: list[str], changed: Callable[[], None]) -> None:
        self.inner = inner
        self.status: dict[str, str] = dict.fromkeys(steps, "pending")
        self.changed = changed
        self.tool_calls = 0
        self._injected: set[str] = set()

    def set(self, step: str, status: str) -> None:
        if step in self.status:
            self.status[step] = status
            self.changed()

    def injected(self, step: str) -> None:
        """A result of a call in top-level `step` was injected at a pause: it ends skipped."""
        self._injected.add(step)

    def emit(self, event: str, **fields: Any) -> None:
        if event == "step_started":
            self.set(str(fields.get("step")), "running")
        elif event == "step_finished":
            step = str(fields.get("step"))
            injected = step in self._injected
            self.set(step, "failed" if fields.get("is_error") else "skipped" if injected else "done")
        elif event == "tool_finished":
            if fields.get("message") == SKIPPED_NOTE and not fields.get("is_error"):
                self.injected((CURRENT_STEP.get() or "").split("/", 1)[0])
            elif fields.get("call") is not None:  # it ran (a refused or unknown call has no id)
                self.tool_calls += 1
        self.inner.emit(event, **fields)

    def waiting(self, what: str | None) -> None:
        self.inner.waiting(what)


class ModelSpend:
    """The models a run made (through its factory) and what tools spent on models (on_usage)."""

    def __init__(self) -> None:
        self.models: list[Any] = []
        self.by_tools = Usage()

    def factory(self, inner: Any) -> Any:
        def made(role: str, model: str | None, events: EventSink | None) -> Any:
            llm = inner(role, model, events)
            self.models.append(llm)
            return llm

        return made

    def add(self, usage: Usage) -> None:
        self.by_tools = self.by_tools + usage

    def total(self) -> Usage:
        total = self.by_tools
        for llm in self.models:
            total = total + llm.usage
        return total


def parse_json(text: str) -> tuple[Any, str | None]:
    """(value, None), or (None, the one-line reason it is not JSON)."""
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"


_PLACEHOLDERS: dict[str, Any] = {
    "string": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "object": {},
}


def needs_inputs(schema: Any) -> bool:
    """The plan's input schema requires something: a run starts with the inputs editor."""
    return isinstance(schema, dict) and bool(schema.get("required"))


def prefilled_inputs(schema: Any) -> dict[str, Any]:
    """The inputs editor's first text: each property's default, else its first example, else
    its first enum value, else a placeholder of its type."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    out: dict[str, Any] = {}
    for name, prop in (props or {}).items():
        if not isinstance(prop, dict):
            out[name] = None
        elif "default" in prop:
            out[name] = prop["default"]
        elif prop.get("examples"):
            out[name] = prop["examples"][0]
        elif prop.get("enum"):
            out[name] = prop["enum"][0]
        else:
            kind = prop.get("type")
            kind = next((k for k in kind if k != "null"), None) if isinstance(kind, list) else kind
            out[name] = _PLACEHOLDERS.get(str(kind)) if kind else None
    return out


def inputs_problems(schema: Any, text: str) -> tuple[dict[str, Any] | None, list[str]]:
    """The typed inputs, or the problems with them: not JSON, not an object, not the schema's."""
    value, problem = parse_json(text)
    if problem is not None:
        return None, [problem]
    problems = input_problems(schema, apply_defaults(schema, value))
    return (value, []) if not problems else (None, problems)


def spent_line(tool_calls: int, usage: Usage) -> str:
    """`spent: 3 tool calls · 1 model call · 42 in / 17 out tokens · $0.0001` (cost when known)."""
    plural = "" if tool_calls == 1 else "s"
    parts = [f"{tool_calls} tool call{plural}", f"{usage.calls} model call{'' if usage.calls == 1 else 's'}"]
    parts.append(f"{usage.input_tokens:,} in / {usage.output_tokens:,} out tokens")
    parts.append(format_cost(usage.cost_usd) if usage.cost_usd is not None else "cost unknown")
    return "spent: " + " · ".join(parts)


async def run_draft(bench: Bench, inputs: dict[str, Any], *, debug: bool = False) -> dict[str, Any]:
    """Run the bench's draft with `inputs` (a debug run with `debug`); the transcript, the
    steps' status and the spend go to the bench; returns what `workbench__run_plan` answers."""
    # ruamel: imported when used, not at start-up
    from graphchat.workbench.draft import DraftError

    plan = bench.draft.plan()
    if plan is None:
        raise DraftError("the draft has problems; fix them before a run: " + "; ".join(bench.draft.problems))
    if bench.running:
        raise DraftError("a run is going on; wait for it to end (or abort it at a pause)")
    bench.run_lines.clear()
    bench.log_run(
        ("debug run " if debug else "run ") + f"{plan.identifier} {json.dumps(inputs, ensure_ascii=False)}"
    )
    status = StepStatus(LineSink(bench.log_run), [s.label for s in plan.steps], bench.notify)
    bench.step_status = status.status
    spend = ModelSpend()
    factory = spend.factory(llm_factory_for(bench.settings))
    ctx = CallContext(asker=bench.asker, events=status, surface="cli", on_usage=spend.add)
    task: asyncio.Task[Any] | None = None
    debugger: Debugger | None = None
    if debug:

        def paused(pause: Pause) -> None:
            status.set(pause.top, "paused")

            def answered(future: asyncio.Future[Any]) -> None:
                status.set(pause.top, "running")
                if pause.kind == "model" and not future.cancelled() and future.result().action == "skip":
                    status.injected(pause.top)  # a skipped call is no model call: nothing spent
                    bench.log_run(f"⤼ the model call ({pause.tool}) in {pause.step} skipped: answer injected")

            pause.answered.add_done_callback(answered)
            bench.log_run(pause.describe().splitlines()[0])
            bench.show_pause(pause)

        def abort() -> None:
            if task is not None:
                task.cancel()

        debugger = Debugger(bench.breakpoints, paused, on_abort=abort)
        ctx = replace(ctx, hook=debugger)
        factory = debugger.models(factory)
    bench.debugger = debugger
    task = asyncio.ensure_future(
        run_plan(
            plan,
            inputs,
            catalog=bench.catalog,
            ctx=ctx,
            llm_factory=factory,
            events=status,
            settings=bench.settings,
        )
    )
    bench.running = True
    result: dict[str, Any]
    try:
        outcome = await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if debugger is None or not debugger.aborted or (current is not None and current.cancelling()):
            raise  # not the person's abort: the workbench itself is going away
        for step, state in status.status.items():
            if state in ("running", "paused"):
                status.set(step, "aborted")
        result = {"outcome": "aborted", "error": "the person aborted the run at a pause"}
        bench.log_run("outcome: aborted — nothing after the pause ran")
    else:
        result = {"outcome": outcome.kind, "steps_executed": outcome.steps_executed}
        for key in ("error", "output", "answer", "usage"):
            if getattr(outcome, key):
                result[key] = getattr(outcome, key)
        bench.log_run(f"outcome: {outcome.kind}" + (f" — {outcome.error}" if outcome.error else ""))
    finally:
        bench.running = False
        bench.debugger = None
        for step, state in status.status.items():  # the run is over: what it did not reach
            if state == "pending":
                status.status[step] = "not run"
    usage = spend.total()
    result["spent"] = {"tool_calls": status.tool_calls, **usage.to_dict()}
    bench.log_run(spent_line(status.tool_calls, usage))
    return result
