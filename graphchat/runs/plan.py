"""Run a plan, park it, resume it (issue 19): the use cases behind `plan run`, `resume` and
`answer`. Shown through a `Front`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.errors import GraphchatError
from graphchat.host import load_settings, open_host
from graphchat.plans.discovery import discover, find_plan
from graphchat.plans.executor import llm_factory_for, run_plan
from graphchat.plans.loader import locate
from graphchat.plans.picture import StepTimes, tree
from graphchat.plans.splice_types import learned_shapes
from graphchat.plans.validate import known_servers, validate_against_catalog
from graphchat.runs.parked import PlanAsker, PlanParking, RunRecord, plan_change, plan_fingerprint
from graphchat.runs.requests import RequestStore

if TYPE_CHECKING:
    from graphchat.runs.front import Front


@dataclass
class RunFlags:
    """The flags that change what a run does (kept in a parked run's record)."""

    json: bool = False
    yes: bool = False
    model: str | None = None
    answers: str | None = None  # an absolute path
    park: bool = True
    home: str | None = None  # --home as given (for the command that answers)
    tree: bool = False


def parking_for(settings: Any, plan: Any, inputs: Any, flags: RunFlags, events: Any) -> Any:
    """A fresh run's parking (issue 9): its record is written only if the run parks."""
    import os
    from dataclasses import asdict

    store = RequestStore(settings.workspace)
    record = RunRecord.new(
        store,
        {
            "command": "plan run",
            "flags": asdict(flags),
            "cwd": os.getcwd(),
            "workspace": str(settings.workspace),
            "plan": plan_fingerprint(plan),
            "inputs": inputs,
        },
    )
    return PlanParking(store, record, events)


def execute(settings: Any, plan: Any, inputs: Any, flags: RunFlags, front: Front, parking: Any = None) -> int:
    """Run `plan` and show its outcome through `front`; the exit code. A fresh run may park
    (`flags.park`); `parking` is given when a parked run resumes."""
    import asyncio

    host = open_host(settings, answers=flags.answers)
    events = host.events
    times = None
    if flags.tree:
        times = StepTimes(events)
    if parking is None and flags.park:
        parking = parking_for(settings, plan, inputs, flags, events)
        parking.start()  # journaled from its first step (issue 19): `graphchat runs` lists it
    elif parking is not None:
        parking.events = events
    ctx = host.context(surface="plan", assume_yes=flags.yes)
    if parking is not None:  # an approval nobody here can give parks the run (issue 19)
        from dataclasses import replace

        if ctx.asker is not None:
            ctx = replace(ctx, asker=PlanAsker(ctx.asker))
    streamed: list[str] = []

    def on_text(text: str) -> None:
        streamed.append(text)
        front.text(text)

    async def go() -> Any:
        try:
            check_tools_resolve(plan, host.catalog, settings, front.note)
            return await run_plan(
                plan,
                inputs,
                catalog=host.catalog,
                ctx=ctx,
                llm_factory=llm_factory_for(settings),
                events=times or events,
                on_text=None if flags.json else on_text,
                settings=settings,
                parking=parking,
            )
        finally:
            await host.aclose()

    try:
        outcome = asyncio.run(go())
    except GraphchatError as error:  # the run cannot go on (a tool that does not resolve, …)
        if parking is not None:
            parking.finished(error.exit_code, error.message)
        raise
    finally:
        if parking is not None:  # the journal's last batch is on disk before the process goes
            parking.close_journal()
    if times is not None:
        import sys

        sys.stderr.write("\n".join(tree(plan, times.status)) + "\n")  # --tree: activity, on stderr
    if streamed and not streamed[-1].endswith("\n"):
        front.text("\n")
    if outcome.usage:
        events.usage_summary(outcome.usage)
    if outcome.kind == "parked":
        return front.parked(outcome.requests, flags.json, flags.home, f"plan '{plan.identifier}'")
    try:
        code = front.plan_outcome(plan, outcome, flags, streamed)
    except GraphchatError as error:  # a failed run: kept as failed, with its line
        if parking is not None:
            parking.finished(error.exit_code, error.message)
        raise
    if parking is not None:
        parking.finished(code, _failure(outcome) if code else None)
    return code


def _failure(outcome: Any) -> str | None:
    """The line of a run that ended with a nonzero exit (an input problem, an `error` exit)."""
    if outcome.kind == "exit" and outcome.exit is not None:
        return str(outcome.exit.get("message") or "the plan's error exit fired")
    return outcome.error or None


def check_tools_resolve(plan: Any, catalog: Any, settings: Any, note: Any) -> None:
    """Before any step runs: every tool the plan names must resolve (no server is started);
    what is only doubtful goes to `note`."""
    index = discover(settings.plans_dir, warn=lambda _message: None)
    # Servers never started here have no cached tool list yet: they count as configured (and
    # are started by the run itself), only unconfigured ones are problems.
    servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")
    shapes = learned_shapes(settings.catalog_dir / "shapes")
    # Only certain failures stop a run before its first step; what depends on evidence (a
    # learned shape, an open declared schema) is a note: a shape cache never makes a working
    # plan unrunnable.
    notes: list[str] = []
    problems = validate_against_catalog(
        plan, catalog, servers=servers, plans=index.plans, shapes=shapes, at_run=True, notes=notes
    )
    if notes:
        for line in _located(plan, notes):
            note(f"note: {line}")
    if problems:
        lines = "\n".join(f"  {line}" for line in _located(plan, problems))
        raise GraphchatError(f"plan '{plan.identifier}' cannot run here:\n{lines}")


def _located(plan: Any, problems: list[str]) -> list[str]:
    """`<file>:<line>: <problem>` (the plan's file), or `<identifier>: <problem>`."""
    if plan.path is None:
        return [f"{plan.identifier}: {problem}" for problem in problems]

    return locate(plan.path, problems)


def plan_of(record: Any, warn: Any = None) -> Any:
    """The parked run's plan, loaded again; a changed plan file is refused, naming the change."""
    saved = record.data["plan"]
    if not saved.get("path"):
        raise GraphchatError(f"plan '{saved.get('identifier')}' has no file to resume from")
    plan = find_plan(saved["path"], Path(record.data["workspace"]) / "plans", warn=warn)
    change = plan_change(saved, plan_fingerprint(plan))
    if change is not None:
        raise GraphchatError(
            f"plan '{saved['identifier']}' changed since the run parked ({saved['path']}): {change}",
            hint="put the plan back as it was, or run it again from the start with `graphchat plan run`",
        )
    return plan


def resume_plan(store: Any, record: Any, front: Front) -> int:
    """Resume a parked `plan run` in this process."""
    data = record.data
    flags = RunFlags(**data["flags"])
    settings = load_settings(data["workspace"], model=flags.model)
    plan = plan_of(record, front.warn)
    parking = PlanParking(store, record, None, resumed=True)
    record.data["state"] = "running"
    record.save()
    return execute(settings, plan, data.get("inputs"), flags, front, parking)
