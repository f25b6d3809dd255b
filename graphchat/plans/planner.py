"""`plan_and_execute`: the planner drafts a plan for a goal, the executor runs it, and a step
that breaks is repaired by the planner — keeping what already ran.

- Drafting is `graphchat.plans.draft.draft_plan` (the same prompt, catalog digest and
  validate-and-retry loop as `plan draft`, up to 3 validation attempts a draft).
- The plan runs with `run_plan`, the host's asker and approvals (the caller's context).
- On `BadPath`, `MissingStep` or a tool error the planner is shown the plan, the failing step,
  the error and a digest of the keys of the results so far, and replies with a whole plan. The
  identical prefix of executed steps (same id, tool and input) is reused, never re-run; the
  first changed step and every step after it run. `settings.planning_attempts` replans at most.
- `EmptyData` never replans: a solver finish explains what was not found, an output finish
  fails (as `plan run`).

Every replan is visible: a `replan` event (stderr line `replanning after E2: …`, JSONL), the
`planned` event of each plan that runs, and the `replans` of the tool result (in the thread).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from graphchat.catalog.base import CallContext, ToolResult
from graphchat.events import RoleUsage
from graphchat.jsontype import json_type
from graphchat.llm.budget import BudgetExceeded, budget_scope
from graphchat.plans.draft import DraftResult, draft_plan
from graphchat.plans.executor import MAX_DEPTH, PlanOutcome, llm_factory_for, run_plan
from graphchat.plans.loader import load_plan_data
from graphchat.plans.runtime import PARKING_AT

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog
    from graphchat.events import EventSink
    from graphchat.plans.draft import DraftResult
    from graphchat.plans.model import Plan
    from graphchat.plans.runtime import LLMFactory

PLAN_AND_EXECUTE = "plan_and_execute"
DRAFT_ATTEMPTS = 3  # validation attempts of each draft (as `plan draft`)
REPLANNABLE = frozenset({"BadPath", "MissingStep", "tool"})  # StepFailed.kind values
KEYS_CHARS = 4000  # the key digest of the results so far is cut beyond this

DESCRIPTION = (
    "Plan and execute a multi-step data-gathering task: a planner composes a validated sequence "
    "of tool calls with data flowing between steps, executes it (replanning on failures), and "
    "synthesizes an answer. Use for complex queries needing several dependent tool calls — "
    "prefer calling tools directly for simple lookups."
)
INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {
            "type": "string",
            "description": "The complete task, self-contained: include every name, id, timeframe and "
            "constraint the planner needs (it cannot see the conversation).",
        },
        "goal": {"type": "string", "description": "Another name for `query`."},
        "context": {"type": "string", "description": "Anything else the planner should know."},
    },
}

REPLAN_FEEDBACK = [
    "The plan shown failed while running. Reply with the whole repaired plan document.",
    "Keep every step before the failing one exactly as it is (same id, tool_name and input): "
    "their results are reused, not run again.",
    "Replace the failing step, and the steps after it as needed, reading only keys the results "
    "so far have (see the key digest).",
]


# --- the run ----------------------------------------------------------------------------------


@dataclass
class PlannerRun:
    """What a `plan_and_execute` run produced. `error` is the one-line summary of a failed run."""

    goal: str
    plan_doc: dict[str, Any] | None = None
    outcome: PlanOutcome | None = None
    steps_executed: int = 0
    replans: list[dict[str, Any]] = field(default_factory=list)
    draft_attempts: int = 0
    problems: list[str] = field(default_factory=list)
    error: str | None = None
    usage: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def answer(self) -> str:
        outcome = self.outcome
        if outcome is None:
            return ""
        if outcome.kind == "exit" and outcome.exit is not None:
            return str(outcome.exit.get("message") or "")
        return outcome.answer or ""

    def to_json(self) -> dict[str, Any]:
        """The tool's result as graph's — `{answer, degraded, steps_executed}` — plus the final
        `plan` document (and `output`, `exit`, `replans` when there are some)."""
        data: dict[str, Any] = {
            "answer": self.answer if self.ok else self.error,
            "degraded": not self.ok,
            "steps_executed": self.steps_executed,
        }
        outcome = self.outcome
        if outcome is not None and outcome.output is not None:
            data["output"] = outcome.output
        if outcome is not None and outcome.exit is not None:
            data["exit"] = outcome.exit
        if self.replans:
            data["replans"] = self.replans
        if self.problems:
            data["problems"] = self.problems
        data["plan"] = self.plan_doc
        return data

    def tool_result(self) -> ToolResult:
        data = self.to_json()
        if self.ok:
            return ToolResult(data)
        error = data.pop("answer")
        return ToolResult.error(str(error), **data)


def depth_problem(chain: tuple[str, ...]) -> str | None:
    """Why `plan_and_execute` may not run under `chain` (a plan it ran calling it again, or too
    deep a nesting), or None."""
    if PLAN_AND_EXECUTE in chain:
        return "plan_and_execute cannot run inside a plan_and_execute run: " + " → ".join(
            (*chain, PLAN_AND_EXECUTE)
        )
    if len(chain) >= MAX_DEPTH:
        return f"plans nest deeper than {MAX_DEPTH}: " + " → ".join((*chain, PLAN_AND_EXECUTE))
    return None


async def plan_and_execute(
    goal: str,
    *,
    catalog: Catalog,
    ctx: CallContext,
    settings: Any,
    llm_factory: LLMFactory | None = None,
    events: EventSink | None = None,
    context: str | None = None,
    on_text: Callable[[str], None] | None = None,
) -> PlannerRun:
    """Draft a plan for `goal`, run it, replan on repairable failures (see the module doc).
    Never raises for a plan problem: a failed run has `error` set. A model that cannot be
    used (no model configured) raises ConfigError.

    The planner's calls and the runs' share one budget (graphchat.llm.budget): the enclosing
    turn's, else this run's own; a budget this run owns ends it with `error` naming the setting."""
    run = PlannerRun(goal=goal)
    owned = False
    try:
        async with budget_scope(settings, "run") as (_budget, owned):
            return await _plan_and_execute(run, catalog, ctx, settings, llm_factory, events, context, on_text)
    except BudgetExceeded as hit:
        if not owned:
            raise
        run.error = f"plan_and_execute: {hit.message}"
        return run


async def _plan_and_execute(
    run: PlannerRun,
    catalog: Catalog,
    ctx: CallContext,
    settings: Any,
    llm_factory: LLMFactory | None,
    events: EventSink | None,
    context: str | None,
    on_text: Callable[[str], None] | None,
) -> PlannerRun:
    goal = run.goal
    tap = RoleUsage(events if events is not None else ctx.events)
    problem = depth_problem(ctx.chain)
    if problem is not None:
        run.error = problem
        return run
    factory = llm_factory or llm_factory_for(settings)
    llm = factory("planner", None, tap)
    base = _context_sections(settings, context)
    run_ctx = replace(ctx, events=tap, chain=(*ctx.chain, PLAN_AND_EXECUTE), surface="plan")
    budget = max(0, int(getattr(settings, "planning_attempts", 2)))
    sections: dict[str, str] = dict(base)
    feedback: list[str] | None = None
    previous: Plan | None = None
    results: dict[str, Any] = {}
    try:
        while True:
            frame = planner_frame(len(run.replans), ctx.parking)
            draft = await drafted(
                frame,
                partial(
                    draft_plan,
                    goal,
                    llm=llm,
                    catalog=catalog,
                    settings=settings,
                    context=sections,
                    feedback=feedback,
                    attempts=DRAFT_ATTEMPTS,
                    check=no_self_calls,
                ),
            )
            run.draft_attempts += draft.attempts
            if not draft.ok or draft.plan is None:
                run.problems = draft.problems
                first = draft.problems[0] if draft.problems else "no plan"
                what = "draft" if previous is None else "repaired plan"
                run.error = (
                    f"plan_and_execute: the planner's {what} still does not validate after "
                    f"{draft.attempts} attempts: {first}"
                )
                return run
            plan = draft.plan
            run.plan_doc = draft.plan_doc
            reuse = reusable(previous, plan, results) if previous is not None else {}
            tap.planned(
                plan.identifier,
                [{"id": s.label, "tool": s.tool_name, "reused": s.id in reuse} for s in plan.steps],
                len(run.replans) + 1,
            )
            at = PARKING_AT.set(frame) if frame is not None else None
            try:
                outcome = await run_plan(
                    plan,
                    {},
                    catalog=catalog,
                    ctx=run_ctx,
                    llm_factory=factory,
                    events=tap,
                    on_text=on_text,
                    settings=settings,
                    reuse=reuse,
                )
            finally:
                if at is not None:
                    PARKING_AT.reset(at)
            run.outcome = outcome
            run.steps_executed += outcome.steps_executed
            failure = outcome.failure
            if outcome.kind in ("ok", "exit"):
                return run
            if failure is None or failure.kind not in REPLANNABLE:
                run.error = f"plan_and_execute: {outcome.error or 'the plan failed'}"
                return run
            if len(run.replans) >= budget:
                run.error = (
                    f"plan_and_execute gave up after {len(run.replans)} replan"
                    f"{'s' if len(run.replans) != 1 else ''}: {outcome.error}"
                )
                return run
            results = outcome.results or {}
            run.replans.append({"step": failure.step, "tool": failure.tool, "error": failure.message})
            tap.replan(failure.step, failure.message, len(run.replans), budget)
            sections = {**base, **replan_sections(draft.yaml or "", failure, results)}
            feedback = REPLAN_FEEDBACK
            previous = plan
    finally:
        run.usage = tap.total()


# --- the planner's frame in a run that may park (issue 19) -----------------------------------


def planner_frame(attempt: int, parking: Any = None) -> tuple[Any, str] | None:
    """Where the plan of this attempt lives in a run that may park: (its parking, the address
    `<calling step>#plan<attempt>`); its steps are kept under `<address>/`. Called by a turn
    (`parking`: the call's own record, `runs/frames.py`): `#plan<attempt>`. None: no parking."""
    at = PARKING_AT.get()
    if at is None:
        return None if parking is None else (parking, f"#plan{attempt}")
    return at[0], f"{at[1]}#plan{attempt}"


async def drafted(frame: tuple[Any, str] | None, draft: Callable[[], Awaitable[DraftResult]]) -> DraftResult:
    """The planner's draft — or, in a resumed run, the plan it was running when the run parked
    (kept at the frame's address): the planner model is not asked again, so an approval given
    inside it runs exactly the call the person saw."""
    if frame is None:
        return await draft()
    parking, key = frame
    found, kept = parking.remembered(key)
    if found:
        doc = kept["plan"]
        return DraftResult(plan_doc=doc, attempts=0, plan=load_plan_data(doc), yaml=kept.get("yaml"))
    result = await draft()
    if result.ok:
        parking.remember(key, {"plan": result.plan_doc, "yaml": result.yaml})
    return result


def no_self_calls(plan: Plan) -> list[str]:
    """A drafted plan may not call plan_and_execute (the depth guard would refuse it)."""
    return [
        f"step {step.label}: tool_name: a plan written for plan_and_execute cannot call it; "
        "use the catalog's tools"
        for step in plan.all_steps()
        if step.tool_name == PLAN_AND_EXECUTE
    ]


def _context_sections(settings: Any, context: str | None) -> dict[str, str]:
    """The workspace's `user:` section (who the planner works for) and the caller's context."""
    sections: dict[str, str] = {}
    user = getattr(settings, "user", None) or {}
    if user:
        sections["The user"] = "\n".join(f"{k}: {v}" for k, v in user.items())
    if context and context.strip():
        sections["Context"] = context.strip()
    return sections


# --- replanning -------------------------------------------------------------------------------


def replan_sections(plan_yaml: str, failure: Any, results: Mapping[str, Any]) -> dict[str, str]:
    """What the planner is told about a failed run: the plan, the failing step, the error and
    the keys of every result so far."""
    done = ", ".join(results) or "none"
    return {
        "The plan that failed": plan_yaml,
        "The failing step": f"{failure.step} ({failure.tool}) — the steps that completed before it: {done}",
        "The error": f"step {failure.step} ({failure.tool}): {failure.message}",
        "Available keys of the results so far": keys_digest(results),
    }


def keys_digest(results: Mapping[str, Any]) -> str:
    """One line a result: `E0: {category: string, items: [{id: string, name: string}] (3)}`."""
    lines = [f"{key}: {_keys(value, 0)}" for key, value in results.items()]
    text = "\n".join(lines) or "(no step completed)"
    return text if len(text) <= KEYS_CHARS else text[: KEYS_CHARS - 1] + "…"


def _keys(value: Any, depth: int) -> str:
    if isinstance(value, Mapping):
        if depth >= 3:
            return "{" + ", ".join(str(k) for k in list(value)[:20]) + "}"
        inner = [f"{k}: {_keys(v, depth + 1)}" for k, v in list(value.items())[:20]]
        more = ", …" if len(value) > 20 else ""
        return "{" + ", ".join(inner) + more + "}"
    if isinstance(value, list):
        if not value:
            return "[] (empty)"
        return f"[{_keys(value[0], depth + 1)}] ({len(value)})"
    return json_type(value) or type(value).__name__


def reusable(previous: Plan, plan: Plan, results: Mapping[str, Any]) -> dict[str, Any]:
    """The results of the identical prefix: leading steps of `plan` equal to `previous`'s (same
    id, tool and input) whose results exist. The first changed step ends the prefix."""
    kept: dict[str, Any] = {}
    for old, new in zip(previous.steps, plan.steps, strict=False):
        if old.id is None or old.id != new.id or old.tool_name != new.tool_name:
            break
        if _canonical(old.input) != _canonical(new.input) or old.id not in results:
            break
        kept[old.id] = results[old.id]
    return kept


def _canonical(value: Any) -> bytes:
    """JSON with sorted keys: equal inputs compare equal, and `5` is not `"5"` nor `true`."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)
