"""Run a loaded plan: inputs, steps in order through the catalog, control steps, the finish.

`run_plan` is the one entry point, used by `plan run` and by `plan__*` tools alike. Every
tool step goes through `Catalog.call` (the one call path); control steps run through the step
table (`graphchat.plans.steps.CONTROL`), and what they share with this module is in
`graphchat.plans.runtime`. The hot path (a map body over thousands of items) avoids
per-item deep copies and per-item schema work: a body scope is one shallow dict copy.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from graphchat.asks import TOOL_CALL, Parked
from graphchat.catalog.base import CallContext, ToolResult
from graphchat.errors import ConfigError, GraphchatError
from graphchat.events import EventSink, sampling_server
from graphchat.jsonschema_util import errors, fits
from graphchat.llm.budget import BudgetExceeded, budget_scope
from graphchat.llm.client import LLM
from graphchat.plans import finish as finishes
from graphchat.plans.gates import GateError, evaluate
from graphchat.plans.model import Body, Plan, Step, plan_identifier
from graphchat.plans.runtime import (
    PARKING_AT,
    ExitFired,
    Frame,
    LLMFactory,
    Parking,
    StepFailed,
    checkpoint,
    describe,
    prepare_servers,
    render,
    render_text,
    template_message,
)
from graphchat.plans.steps import CONTROL
from graphchat.template import EmptyData, TemplateError
from graphchat.workspace import builtin_prompt

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog, ToolResult
    from graphchat.llm.types import ModelClient

MAX_DEPTH = 8
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"verdict": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
    "additionalProperties": False,
}
JUDGE_SYSTEM = (
    "You judge one yes/no question about the data given with it. Set verdict to true for yes "
    "and false for no, and give a one-sentence reason grounded in that data."
)


# --- outcome -------------------------------------------------------------------------------


@dataclass
class PlanOutcome:
    """What a run produced. `kind`: ok | exit | failed | input.

    `parked`: the run waits for a person (`requests`, issue 9).

    Its presentation belongs to its callers: `plan run` (exit code, `--json` envelope) and the
    `plan__<id>` tool (`tool_result`, still here: catalog/plan_tools.py should own it)."""

    plan: str
    kind: str
    finish: str
    answer: str | None = None
    output: Any = None
    exit: dict[str, Any] | None = None
    error: str | None = None
    problems: list[str] = field(default_factory=list)
    input_schema: dict[str, Any] | None = None
    empty_data: bool = False
    steps_executed: int = 0
    usage: dict[str, Any] | None = None
    # When a step failed: the failure itself (its step, tool and `kind`), and the results of
    # the steps that completed before it, by id (what a replanner reads and reuses).
    failure: StepFailed | None = None
    results: dict[str, Any] | None = None
    requests: list[Any] = field(default_factory=list)

    def body(self) -> dict[str, Any]:
        """graph's result body of a run (graph-cli plan_cmd.rs `run_plan`, mcp_server/run.rs):
        `{answer, output, plan, steps_executed, exit, usage}`, every key always present; `answer`
        is the solver's report or a fired exit's message (null otherwise); `output` the output map
        or the fired exit's output; `exit` graph's `PlanExit` ({status, message, reason, output,
        step}) or null; `usage` null when nothing was spent. The `plan run --json` envelope and
        what `mcp serve` answers a plan call with."""
        exit_block = None
        answer = self.answer or None
        if self.exit is not None:
            fired = self.exit
            exit_block = {
                "status": fired.get("status"),
                "message": fired.get("message"),
                "reason": fired.get("reason"),
                "output": fired.get("output"),
                "step": fired.get("step"),
            }
            answer = fired.get("message") or None
        return {
            "answer": answer,
            "output": self.output,
            "plan": self.plan,
            "steps_executed": self.steps_executed,
            "exit": exit_block,
            "usage": self.usage or None,
        }

    def tool_result(self) -> ToolResult:
        """The result of the `plan__<id>` tool (spec: plans as tools)."""
        if self.kind == "parked":  # the run waits for a person: not an error (mcp serve, issue 19)
            return ToolResult({"parked": True, "requests": self.requests}, note="waiting for a person")
        if self.kind == "ok":
            if self.finish == "solver":
                return ToolResult({"answer": self.answer})
            if self.finish == "output":
                return ToolResult(self.output)
            # graph (pipeline/mod.rs, a plan call with no output and no answer): {ok, steps_executed}
            return ToolResult({"ok": True, "steps_executed": self.steps_executed})
        if self.kind == "exit" and self.exit is not None:
            if self.exit["status"] == "success":
                value: dict[str, Any] = {
                    "exited": True,
                    "status": "success",
                    "message": self.exit["message"],
                }
                if "output" in self.exit:
                    value["output"] = self.exit["output"]
                return ToolResult(value)
            return ToolResult.error(f"plan '{self.plan}' exited with an error: {self.exit['message']}")
        return ToolResult.error(self.error or "plan failed")


# --- usage and quiet events ----------------------------------------------------------------


# The path of the step running in this task (a map item runs in its own task, so concurrent
# items each see theirs): the group of a model call in `usage.by_step`, as graph's CallSite.
CURRENT_STEP: ContextVar[str | None] = ContextVar("graphchat_plan_step", default=None)


class UsageTap(EventSink):
    """Forwards every event and adds up the model usage of the run (llm_call events): in all,
    by step (graph's `by_step`: the step path, else the call's role) and by model."""

    def __init__(self, inner: EventSink | None) -> None:
        self.inner = inner
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.failed = 0  # calls that failed over to a fallback model (or failed with it)
        self.cost_usd: float | None = None  # of the calls whose price is known
        self.by_step: dict[str, dict[str, Any]] = {}
        self.by_model: dict[str, dict[str, Any]] = {}
        self.by_server: dict[str, dict[str, Any]] = {}  # MCP servers' sampling requests served

    def emit(self, event: str, **fields: Any) -> None:
        if event == "llm_call":
            spent_in = int(fields.get("input_tokens") or 0)
            spent_out = int(fields.get("output_tokens") or 0)
            cost = fields.get("cost_usd")
            self.calls += 1
            self.input_tokens += spent_in
            self.output_tokens += spent_out
            path = CURRENT_STEP.get() or str(fields.get("role") or fields.get("site") or "unknown")
            model = str(fields.get("model") or "")
            provider = model.split("/", 1)[0] if "/" in model else ""
            groups = [
                self.by_step.setdefault(path, {"path": path}),
                self.by_model.setdefault(model, {"provider": provider, "model": model}),
            ]
            server = sampling_server(fields)
            if server is not None:
                groups.append(self.by_server.setdefault(server, {"server": server}))
            for group in groups:
                group["calls"] = group.get("calls", 0) + 1
                group["input_tokens"] = group.get("input_tokens", 0) + spent_in
                group["output_tokens"] = group.get("output_tokens", 0) + spent_out
                for key in ("cache_read_input_tokens", "cache_creation_input_tokens"):  # graph's keys
                    group[key] = group.get(key, 0) + int(fields.get(key) or 0)
                if fields.get("failed"):  # a call that failed over to a fallback model
                    group["failed"] = group.get("failed", 0) + 1
                if cost is not None:  # graph's cost_usd: the priced calls' sum
                    group["cost_usd"] = group.get("cost_usd", 0.0) + cost
            if fields.get("failed"):
                self.failed += 1
            if cost is not None:
                self.cost_usd = (self.cost_usd or 0.0) + cost
        if self.inner is not None:
            self.inner.emit(event, **fields)

    def waiting(self, what: str | None) -> None:
        if self.inner is not None:  # the spinner of a model call inside a plan (solver, judge, agent)
            self.inner.waiting(what)

    def usage(self) -> dict[str, Any] | None:
        if not self.calls:
            return None

        def ranked(groups: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
            # graph's order (usage.rs `rank`): the highest cost first, else the most tokens
            rows = [
                {**g, "cost_usd": round(g["cost_usd"], 8)} if "cost_usd" in g else g for g in groups.values()
            ]
            return sorted(rows, key=lambda g: -g.get("cost_usd", g["input_tokens"] + g["output_tokens"]))

        return {
            "calls": self.calls,
            **({"failed": self.failed} if self.failed else {}),
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            **({"cost_usd": round(self.cost_usd, 8)} if self.cost_usd is not None else {}),
            "by_step": ranked(self.by_step),
            "by_model": ranked(self.by_model),
            **({"by_server": ranked(self.by_server)} if self.by_server else {}),
        }


class QuietToolEvents(EventSink):
    """For a human's terminal inside a map: per-item lines (tool calls, a sub-plan's steps and
    progress) would drown the map's own progress line, so they are dropped; failures, warnings
    and questions still show. JSONL keeps everything."""

    DROPPED = frozenset({"tool_started", "step_started", "step_finished", "progress"})

    def __init__(self, inner: EventSink) -> None:
        self.inner = inner

    def emit(self, event: str, **fields: Any) -> None:
        if event in self.DROPPED or (event == "tool_finished" and not fields.get("is_error")):
            return
        self.inner.emit(event, **fields)

    # The two events of every body call, dropped before their fields are built (a map over
    # 100,000 items makes 200,000 of them); what is kept goes through `emit` as above.
    def tool_started(self, tool: str, args: Any, call: str | None = None) -> None:
        pass

    def tool_finished(
        self, tool: str, ms: float, is_error: bool, message: str | None = None, call: str | None = None
    ) -> None:
        if is_error:
            super().tool_finished(tool, ms, is_error, message, call)

    def waiting(self, what: str | None) -> None:
        self.inner.waiting(what)


def is_human_sink(events: EventSink | None) -> bool:
    while isinstance(events, UsageTap):
        events = events.inner
    return bool(events is not None and events.human)


# --- the runner ----------------------------------------------------------------------------


TOP = Frame()


class Runner:
    """One plan run: the scope walk, step dispatch, gates, bodies, counters (the
    `runtime.StepRunner` the control steps see)."""

    def __init__(
        self,
        plan: Plan,
        *,
        catalog: Catalog,
        ctx: CallContext,
        llm_factory: LLMFactory | None,
        events: UsageTap,
        settings: Any = None,
        parking: Parking | None = None,
        base: str = "",
    ) -> None:
        self.plan = plan
        self.parking = parking
        self.base = base
        self.catalog = catalog
        self.ctx = ctx
        self.llm_factory = llm_factory
        self.events = events
        self.settings = settings
        self.steps_executed = 0
        self.at = "the start"  # where the run is: `step <id> (<tool>)` of the top level, or the finish
        self._quiet_ctx: CallContext | None = None

    # -- models --

    def llm(self, role: str, model: str | None = None) -> ModelClient:
        if self.llm_factory is None:
            raise ConfigError("this plan needs a model but none can be used here")
        return self.llm_factory(role, model, self.events)

    async def judge(self, question: str, model: str | None) -> tuple[bool, str]:
        """One structured call to the judge role: (verdict, reason)."""
        llm = self.llm("judge", model)

        system = builtin_prompt(self.settings, "judge", JUDGE_SYSTEM)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
        out = await llm.structured(messages, VERDICT_SCHEMA, site="judge")
        if not isinstance(out, Mapping) or not isinstance(out.get("verdict"), bool):
            raise ValueError(f"the judge did not return a verdict: {out!r}")
        return bool(out["verdict"]), str(out.get("reason") or "")

    async def gate(
        self, step: Step, logical: Any, infer: Any, model: Any, scope: Mapping[str, Any]
    ) -> tuple[bool, str | None]:
        """Evaluate a step's gate: a logical one (reason null) or an inferred one."""
        label = step.label
        try:
            if infer is not None:
                question = render_text(step, infer, scope)
                model_name = render_text(step, model, scope) if isinstance(model, str) else None
                return await self.judge(question, model_name or None)
            verdict, _reason = evaluate(logical, scope, step=label)
            return verdict, None
        except TemplateError as err:
            raise StepFailed(
                label,
                step.tool_name,
                template_message(err),
                empty_data=isinstance(err, EmptyData),
                kind=type(err).__name__,
            ) from None
        except GateError as err:
            raise StepFailed(label, step.tool_name, f"gate: {err}") from None
        except StepFailed:
            raise
        except Exception as err:
            if isinstance(err, GraphchatError) and err.exit_code == 2:
                raise
            raise StepFailed(label, step.tool_name, f"judge: {err}") from None

    # -- dispatch --

    async def run_steps(self, steps: list[Step], scope: dict[str, Any], frame: Frame = TOP) -> Any:
        """Run steps in order, each result stored under its id in `scope`; the last result."""
        if steps is self.plan.steps and self.parking is not None and not self.base:
            return await self.run_parkable(steps, scope)
        result: Any = None
        top = frame is TOP
        events = self.events
        for step in steps:
            if top:
                self.at = f"step {step.label} ({step.tool_name})"
                events.step_started(step.label, step.tool_name)
                started = time.perf_counter()
                try:
                    result = await self.run_step(step, scope, frame)
                except StepFailed:
                    events.step_finished(
                        step.label, step.tool_name, (time.perf_counter() - started) * 1000, True
                    )
                    raise
                events.step_finished(step.label, step.tool_name, (time.perf_counter() - started) * 1000)
            else:
                result = await self.run_step(step, scope, frame)
            if step.id is not None:
                scope[step.id] = result
        return result

    async def run_parkable(self, steps: list[Step], scope: dict[str, Any]) -> Any:
        """The plan's top-level steps when the run may park (issue 9): the steps a parked run
        already did are skipped (their results are in the restored scope), each finished step
        is reported to the parking (a resumed run checkpoints there), and a question nobody
        can answer parks the run at its step."""
        assert self.parking is not None
        done, saved, executed = self.parking.resumed_at()
        scope.update(saved)
        self.steps_executed += executed
        result: Any = None
        for index in range(done, len(steps)):
            try:
                result = await self.run_steps([steps[index]], scope)
            except Parked as parked:
                self.parking.parked(index, scope, self.steps_executed, parked.requests)
                raise
            self.parking.step_done(index + 1, scope, self.steps_executed)
        return result

    async def run_step(self, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
        await checkpoint()  # a long run shares the loop (mcp serve: other calls go on)
        name = step.tool_name
        control = CONTROL.get(name)
        token = CURRENT_STEP.set(frame.prefix + step.label)
        try:
            if self.parking is None:
                return await self._run_step(step, scope, frame, name, control)
            # A run that may park: a step a parked run finished is not run again, at any depth
            # (issue 19); its address is the run's base + its frame's path + its label. (The
            # top level keeps its own position: the finished steps and their scope.)
            key = self.base + frame.path + step.label
            nested = frame is not TOP or bool(self.base)
            if nested:
                found, value = self.parking.remembered(key)
                if found:
                    return value
            at = PARKING_AT.set((self.parking, key))
            call = TOOL_CALL.set(None)  # a model call that led here is the caller's, not this step's
            try:
                value = await self._run_step(step, scope, frame, name, control)
            finally:
                TOOL_CALL.reset(call)
                PARKING_AT.reset(at)
            if nested:
                self.parking.remember(key, value)
            return value
        finally:
            CURRENT_STEP.reset(token)

    async def once(self, key: str, make: Callable[[], Awaitable[Any]]) -> Any:
        if self.parking is None:
            return await make()
        found, value = self.parking.remembered(key)
        if found:
            return value
        value = await make()
        self.parking.remember(key, value)
        return value

    async def _run_step(
        self, step: Step, scope: dict[str, Any], frame: Frame, name: str, control: Any
    ) -> Any:
        # Counted once it has a result, as graph's RunState::steps_executed (pipeline/state.rs):
        # a failed step is not a step executed, nor a fired top-level exit, nor the control step
        # whose body an exit fired in; an exit that fires inside a body is (run_body).
        if control is not None:
            value = await control.run(self, step, scope, frame)
            self.steps_executed += 1
            return value
        arguments = render(step, step.input, scope)
        result = await self.catalog.call(name, arguments, frame.ctx or self.ctx)
        if result.is_error:
            raise StepFailed(step.label, name, result.error_message, kind="tool")
        self.steps_executed += 1
        return result.value

    async def run_body(self, owner: Step, body: Body, scope: dict[str, Any], frame: Frame, what: str) -> Any:
        """Run a then/else/do body; a failure is re-attributed to the owning control step as
        `<what> (<tool>): <message>` (`<what>: step <id> (<tool>): …` for step lists)."""
        try:
            if body.single:
                return await self.run_step(body.steps[0], scope, frame)
            return await self.run_steps(body.steps, scope, frame)
        except ExitFired as fired:
            # graph's body.rs: an exit that fires in a body is one of the body's steps executed
            # (`steps_executed + 1`), counted once however many bodies it leaves.
            if not fired.counted:
                fired.counted = True
                self.steps_executed += 1
            raise
        except StepFailed as inner:
            if body.single:
                message = f"{what} ({inner.tool}): {inner.message}"
            else:
                message = f"{what}: {inner}"
            raise StepFailed(
                owner.label, owner.tool_name, message, empty_data=inner.empty_data, kind=inner.kind
            ) from None

    def quiet_ctx(self) -> CallContext:
        """The context for calls inside a map/filter body (quiet tool lines on a terminal)."""
        if self._quiet_ctx is None:
            ctx = self.ctx
            if is_human_sink(ctx.events):
                assert ctx.events is not None
                ctx = replace(ctx, events=QuietToolEvents(ctx.events))
            self._quiet_ctx = ctx
        return self._quiet_ctx


# --- inputs --------------------------------------------------------------------------------


def apply_defaults(schema: Mapping[str, Any] | None, value: Any) -> Any:
    """Fill the `default`s of the schema's top-level properties where the input leaves them out
    (only the top level, as graph's `apply_schema_defaults` in pipeline/doc.rs)."""
    if not isinstance(schema, Mapping) or not isinstance(value, dict):
        return value
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return value
    out = dict(value)
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            continue
        if name not in out and "default" in prop:
            import copy

            out[name] = copy.deepcopy(prop["default"])
    return out


def input_problems(schema: Mapping[str, Any] | None, value: Any) -> list[str]:
    if not isinstance(value, dict):
        return [f"the input must be a JSON object, got {describe(value)}"]
    if not schema:
        return []

    schema = dict(schema)
    return [] if fits(schema, value) else errors(schema, value)


def chain_problem(plan_id: str, chain: tuple[str, ...]) -> str | None:
    """A cycle or a too-deep nesting, naming the chain; None when the call may go ahead."""
    if plan_id in chain:
        return "plan cycle: " + " → ".join((*chain, plan_id))
    # graph's MAX_PLAN_DEPTH counts nested plans below the top-level one (pipeline/mod.rs): the
    # chain holds the top-level plan too, so 1 + 8 plans run and a tenth is refused.
    if len(chain) > MAX_DEPTH:
        return f"plans nest deeper than {MAX_DEPTH}: " + " → ".join((*chain, plan_id))
    return None


def llm_factory_for(settings: Any) -> LLMFactory:
    """An LLM per (role, model) made on first use, so a run that calls no model never imports
    litellm. `model` may name a role (`judge`, `solver`, …), a named model (models.named) or be
    a litellm model string; an unknown name is a ConfigError listing the names known."""

    def factory(role: str, model: str | None, events: EventSink | None) -> ModelClient:
        return LLM(settings.step_model(model, role), events=events)

    return factory


# --- the entry point -----------------------------------------------------------------------


async def run_plan(
    plan: Plan,
    inputs: Any,
    *,
    catalog: Catalog,
    ctx: CallContext,
    llm_factory: LLMFactory | None,
    events: EventSink | None = None,
    on_text: Callable[[str], None] | None = None,
    settings: Any = None,
    reuse: Mapping[str, Any] | None = None,
    parking: Parking | None = None,
) -> PlanOutcome:
    """Run `plan` with `inputs`. `ctx` is the CALLER's context: the run itself uses
    `ctx.child(plan.identifier)` (depth limit and cycle detection are checked here).

    `on_text` receives the solver's report as it streams (plan run); `llm_factory` is only
    called when the plan actually reaches a model (so output/silent plans never import litellm).
    `reuse` (step id → result): the leading top-level steps whose ids it holds are not run, their
    results are taken from it (a repaired plan keeping what already ran; the caller checks
    that those steps are unchanged).
    `parking`: a question nobody can answer parks the run (outcome `parked`) instead of failing.
    """
    tap = UsageTap(events if events is not None else ctx.events)
    outcome = PlanOutcome(plan=plan.identifier, kind="ok", finish=plan.finish)
    problem = chain_problem(plan.identifier, ctx.chain)
    if problem is not None:
        outcome.kind, outcome.error = "failed", problem
        return outcome
    if inputs is None:
        inputs = {}
    inputs = apply_defaults(plan.input_schema, inputs)
    problems = input_problems(plan.input_schema, inputs)
    if problems:
        outcome.kind = "input"
        outcome.problems = problems
        outcome.input_schema = plan.input_schema
        outcome.error = f"plan '{plan.identifier}' needs inputs:\n" + "\n".join(f"  - {p}" for p in problems)
        return outcome

    run_ctx = replace(ctx.child(plan.identifier), events=tap)
    base = ""
    if parking is None and (at := PARKING_AT.get()) is not None:
        # a sub-plan called by a step of a run that may park (`plan__x`): its steps are that
        # run's, under the calling step's address; a question in it parks the whole run
        parking, base = at[0], at[1] + "/"
    runner = Runner(
        plan,
        catalog=catalog,
        ctx=run_ctx,
        llm_factory=llm_factory,
        events=tap,
        settings=settings,
        parking=parking,
        base=base,
    )

    owned = False
    try:
        # the run's budget (model calls, cost, wall clock), or the enclosing turn's or run's
        async with budget_scope(settings, "run") as (_budget, owned):
            await _steps_and_finish(plan, runner, outcome, inputs, catalog, reuse, on_text)
    except BudgetExceeded as hit:
        if not owned:  # the enclosing turn or run stops on it
            raise
        outcome.kind = "failed"
        outcome.error = f"plan failed at {runner.at}: {hit.message}"
    outcome.steps_executed = runner.steps_executed
    outcome.usage = tap.usage()
    return outcome


async def _steps_and_finish(
    plan: Plan,
    runner: Runner,
    outcome: PlanOutcome,
    inputs: Any,
    catalog: Catalog,
    reuse: Mapping[str, Any] | None,
    on_text: Callable[[str], None] | None,
) -> None:
    """The steps, then the finish, of one run: what they produced goes into `outcome`."""
    scope: dict[str, Any] = {"input": inputs}
    not_found: str | None = None
    try:
        # the servers of the plans it calls too: a plan tool's approval family is then known
        await prepare_servers(catalog, reachable_servers(plan, catalog))
        unknown = unresolved_tools(plan, catalog)
        if unknown:
            step, name = unknown[0]
            raise StepFailed(step, name, f"unknown tool: {name}")
        steps = plan.steps
        if reuse:
            kept = 0
            while kept < len(steps) and steps[kept].id is not None and steps[kept].id in reuse:
                scope[steps[kept].id] = reuse[steps[kept].id]  # type: ignore[index]
                kept += 1
            steps = steps[kept:]
        await runner.run_steps(steps, scope)
    except Parked as parked:
        if runner.base:  # a sub-plan: the run that called it parks
            raise
        outcome.kind = "parked"
        outcome.requests = parked.requests
    except ExitFired as fired:
        outcome.kind = "exit"
        outcome.exit = fired.to_json()
        if fired.has_output:
            outcome.output = fired.output
    except StepFailed as failed:
        if failed.empty_data and plan.finish == "solver":
            not_found = str(failed)  # the solver explains what was not found
        else:
            outcome.kind = "failed"
            outcome.error = f"plan failed at {failed}"
            outcome.empty_data = failed.empty_data
            outcome.failure = failed
            outcome.results = {k: v for k, v in scope.items() if k != "input"}
    if outcome.kind == "ok":
        runner.at = "the finish"
        try:
            if plan.finish == "solver":
                outcome.answer = await finishes.solve(runner, scope, not_found=not_found, on_text=on_text)
            elif plan.finish == "output":
                outcome.output = finishes.render_output(plan, scope)
        except finishes.FinishFailed as failed:
            outcome.kind = "failed"
            outcome.error = f"plan failed at {failed.where}: {failed.message}"
            outcome.empty_data = failed.empty_data


def reachable_servers(plan: Plan, catalog: Catalog) -> set[str]:
    """MCP servers the steps of `plan` name, and those of the plans it calls (transitively)."""
    plans: dict[str, Plan] = {}
    for source in catalog.sources:
        plans.update(source.plans())
    found: set[str] = set()
    todo, seen = [plan], {plan.identifier}
    while todo:
        current = todo.pop()
        found |= servers_named_by(current)
        for step in current.all_steps():
            ident = plan_identifier(step.tool_name)
            if ident is not None and ident in plans and ident not in seen:
                seen.add(ident)
                todo.append(plans[ident])
    return found


def servers_named_by(plan: Plan) -> set[str]:
    """MCP servers a plan's steps name (`server__tool`), plus its `requires_servers`."""
    names = set(plan.requires_servers)
    for step in plan.all_steps():
        name = step.tool_name
        if step.tool_name not in CONTROL and "__" in name and not name.startswith(("plan__", "builtin__")):
            names.add(name.split("__", 1)[0])
    return names


def unresolved_tools(plan: Plan, catalog: Catalog) -> list[tuple[str, str]]:
    """Step tools the catalog cannot resolve, checked before any step runs.

    MCP tools (`server__tool` of a server without a cached tool list) are only known once the
    server starts, so names whose prefix is not `plan`/`builtin` are left to dispatch time.
    """
    missing = []
    for step in plan.all_steps():
        name = step.tool_name
        if step.tool_name in CONTROL or not name.startswith(("plan__", "builtin__")):
            continue
        if catalog.get(name) is None:
            missing.append((step.label, name))
    return missing
