"""`graphchat plan draft GOAL`: the `planner` model role writes a plan (graphchat.plans.draft),
validated as `plan validate` validates; saved to plans/<identifier>.yaml, or printed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ATTEMPTS = 3  # model calls at most (issue 8: after the third failed draft nothing is saved)


def register_draft(plan_sub: argparse._SubParsersAction) -> None:
    p = plan_sub.add_parser(
        "draft",
        help="have the planner model write a plan for a goal",
        description="The `planner` model role writes a plan for GOAL over the catalog; every draft is "
        "validated like `plan validate` and the problems are sent back (3 attempts). The plan is "
        "saved to plans/<ID>.yaml and its path printed.",
    )
    p.add_argument("goal", metavar="GOAL", help="what the plan should do")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-thread", metavar="ID", help="start from this thread's exchange")
    start.add_argument("--from-plan", metavar="NAME", help="start from this plan (name or path)")
    p.add_argument("--name", metavar="ID", help="the plan's identifier (and file name)")
    p.add_argument("--stdout", action="store_true", help="print the plan's YAML; write nothing")
    p.add_argument("--json", action="store_true", help="print {ok, plan, path, attempts, problems}")
    p.add_argument("--force", action="store_true", help="overwrite an existing plan file")
    p.add_argument("-m", "--model", metavar="M", help="use this model instead of the planner role's")
    p.set_defaults(func=run_draft)


def _starting_points(args: argparse.Namespace, settings: Any) -> dict[str, str]:
    """The thread or plan to start from, as a context section for the planner."""
    if args.from_thread:
        from graphchat.plans.draft import thread_exchange
        from graphchat.threads.store import ThreadStore

        store = ThreadStore(settings.threads_dir)
        thread = store.open(args.from_thread)
        events = thread.events()
        return {f"The conversation to start from (thread {thread.id})": thread_exchange(events)}
    if args.from_plan:
        from graphchat.cli.output import warn
        from graphchat.plans.discovery import find_plan

        plan = find_plan(args.from_plan, settings.plans_dir, warn=warn)
        text = plan.path.read_text(encoding="utf-8") if plan.path else ""
        return {f"The plan to start from ({plan.identifier})": text}
    return {}


def _taken(settings: Any, identifier: str, force: bool) -> str | None:
    """Why plans/<identifier>.yaml cannot be written, or None. --force replaces that file, never
    another file's plan of the same identifier (two plans of one identifier: one is skipped)."""
    from graphchat.plans.discovery import discover

    path = settings.plans_dir / f"{identifier}.yaml"
    if path.exists() and not force:
        return f"{path} already exists"
    other = discover(settings.plans_dir).plans.get(identifier)
    if other is not None and other.path is not None and other.path.resolve() != path.resolve():
        return f"plan '{identifier}' already exists in {other.path}"
    return None


def run_draft(args: argparse.Namespace) -> int:
    import asyncio

    from graphchat.catalog.build import build_catalog
    from graphchat.cli.output import print_json, report_error, warn
    from graphchat.errors import EXIT_USAGE, GraphchatError
    from graphchat.events import sink_for_environment
    from graphchat.plans.loader import IDENTIFIER_RE
    from graphchat.workspace import load_settings

    if not args.goal.strip():
        raise GraphchatError("GOAL is empty: say what the plan should do", EXIT_USAGE)
    if args.name is not None and not IDENTIFIER_RE.match(args.name):
        raise GraphchatError(f"--name {args.name!r}: use only letters, digits, `_` and `-`", EXIT_USAGE)
    settings = load_settings(args.home, model_override=args.model)
    config = settings.model_for("planner")  # no model configured: exit 2 before anything else
    from graphchat.llm import LLM, preload_in_background

    preload_in_background()
    saving = not args.stdout
    if args.name and saving:
        taken = _taken(settings, args.name, args.force)  # fail before spending model calls
        if taken:
            raise GraphchatError(
                taken, hint="choose another identifier with --name ID, or --force to replace it"
            )
    context = _starting_points(args, settings)
    events = sink_for_environment()
    llm = LLM(config, events=events)

    def check(plan: Any) -> list[str]:
        """An identifier the planner chose that is taken goes back to it like a problem."""
        if not saving or args.name:
            return []
        taken = _taken(settings, plan.identifier, args.force)
        return [f"identifier: {taken}: choose another identifier"] if taken else []

    def on_attempt(n: int, problems: list[str]) -> None:
        if problems and n < ATTEMPTS:
            count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
            events.info(f"✗ draft {n}: {count}; sent back to the planner")

    async def go() -> Any:
        from graphchat.plans.draft import draft_plan

        catalog = build_catalog(settings, events=events, record_shapes=False)
        try:
            failed = await catalog.prepare()  # the planner must see every server's tools
            for server, error in failed.items():
                warn(f"MCP server '{server}': {error}; its tools are not offered to the planner")
            for message in catalog.warnings:  # skipped servers, names wanted twice
                warn(message)
            from graphchat.llm.budget import budget_scope

            async with budget_scope(settings, "run") as _:  # the run's budgets (calls, cost, clock)
                return await draft_plan(
                    args.goal,
                    llm=llm,
                    catalog=catalog,
                    settings=settings,
                    context=context,
                    identifier=args.name,
                    attempts=ATTEMPTS,
                    header=f"Drafted by `graphchat plan draft` for: {args.goal}",
                    check=check,
                    on_attempt=on_attempt,
                )
        finally:
            await catalog.aclose()

    result = asyncio.run(go())
    if result.usage is not None and result.usage.calls:
        events.usage_summary(result.usage.to_dict())
    path: Path | None = None
    if result.ok and saving:
        assert result.yaml is not None and result.plan is not None
        path = settings.plans_dir / f"{result.plan.identifier}.yaml"
        from graphchat.fsutil import write_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, result.yaml)
    if args.json:
        print_json(
            {
                "ok": result.ok,
                "plan": result.plan_doc,
                "path": str(path) if path else None,
                "attempts": result.attempts,
                "problems": result.problems,
            }
        )
    elif result.ok and args.stdout:
        sys.stdout.write(result.yaml or "")
    elif path is not None:
        sys.stdout.write(f"{path}\n")
    if not result.ok:
        report_error(
            f"the planner's draft still does not validate after {result.attempts} attempts; nothing saved"
        )
        for problem in result.problems:
            sys.stderr.write(f"  {problem}\n")
        return 1
    assert result.plan is not None
    events.info(
        f"✓ plan '{result.plan.identifier}' drafted in {result.attempts} attempt"
        f"{'s' if result.attempts != 1 else ''} ({len(result.plan.steps)} steps, {result.plan.finish} finish)"
    )
    return 0
