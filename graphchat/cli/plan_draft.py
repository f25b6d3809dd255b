"""`graphchat plan draft GOAL`: the `planner` model role writes a plan (graphchat.plans.draft),
validated as `plan validate` validates; saved to plans/<identifier>.yaml, or printed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graphchat.cli.output import print_json, report_error, warn
from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.events import sink_for_environment
from graphchat.fsutil import write_atomic
from graphchat.host import open_host
from graphchat.llm.budget import budget_scope
from graphchat.llm.client import LLM
from graphchat.llm.runtime import preload_in_background
from graphchat.plans.discovery import find_plan, identifier_taken
from graphchat.plans.draft import draft_plan, salvage, thread_exchange
from graphchat.plans.loader import IDENTIFIER_RE
from graphchat.threads.store import ThreadStore
from graphchat.workspace import load_settings

ATTEMPTS = 3  # model calls at most (issue 8: after the third failed draft nothing is saved)


def _starting_points(args: argparse.Namespace, settings: Any) -> dict[str, str]:
    """The thread or plan to start from, as a context section for the planner."""
    if args.from_thread:
        store = ThreadStore(settings.threads_dir)
        thread = store.open(args.from_thread)
        events = thread.events()
        return {f"The conversation to start from (thread {thread.id})": thread_exchange(events)}
    if args.redraft:
        plan = _redrafted(args, settings)
        text = plan.path.read_text(encoding="utf-8") if plan.path else ""
        title = (
            f"The plan to redraft ({plan.identifier}): keep its identifier, name, description and "
            "input_schema; write every step anew"
        )
        return {title: text}
    if args.from_plan:
        plan = find_plan(args.from_plan, settings.plans_dir, warn=warn)
        text = plan.path.read_text(encoding="utf-8") if plan.path else ""
        return {f"The plan to start from ({plan.identifier})": text}
    return {}


def _redrafted(args: argparse.Namespace, settings: Any) -> Any:
    """The plan `--from` names (loaded once)."""
    if getattr(args, "_redrafted", None) is None:
        args._redrafted = find_plan(args.redraft, settings.plans_dir, warn=warn)
    return args._redrafted


def _identity(plan: Any) -> dict[str, Any]:
    """What `--from` keeps of a plan: graph's identity (identifier, name, description, input
    schema)."""
    identity: dict[str, Any] = {"name": plan.name, "description": plan.description}
    if plan.input_schema is not None:
        identity["input_schema"] = plan.input_schema
    return identity


def _target(args: argparse.Namespace, settings: Any, identifier: str) -> Path:
    """Where the plan is written: --output, else the --from plan's own file, else
    plans/<identifier>.yaml."""
    if args.output:
        return Path(args.output).expanduser().resolve()
    if args.redraft and _redrafted(args, settings).path is not None:
        return Path(_redrafted(args, settings).path)
    return settings.plans_dir / f"{identifier}.yaml"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)


def run_draft(args: argparse.Namespace) -> int:
    import asyncio

    if not args.goal.strip():
        raise GraphchatError("GOAL is empty: say what the plan should do", EXIT_USAGE)
    if args.name is not None and not IDENTIFIER_RE.match(args.name):
        raise GraphchatError(f"--name {args.name!r}: use only letters, digits, `_` and `-`", EXIT_USAGE)
    if args.redraft and args.name:
        raise GraphchatError("--from keeps that plan's identifier: --name cannot change it", EXIT_USAGE)
    if args.stdout and args.output:
        raise GraphchatError("--stdout writes no file: give --stdout or --output, not both", EXIT_USAGE)
    settings = load_settings(args.home, model_override=args.model)
    config = settings.model_for("planner")  # no model configured: exit 2 before anything else

    preload_in_background()
    saving = not args.stdout
    identity = None
    identifier = args.name
    if args.redraft:
        redrafted = _redrafted(args, settings)  # a plan that does not load: its error, now
        identifier, identity = redrafted.identifier, _identity(redrafted)
    if args.output and saving and Path(args.output).exists() and not args.force:
        raise GraphchatError(f"{args.output} already exists", hint="--force replaces it")
    if args.name and saving and not args.output:
        taken = identifier_taken(settings.plans_dir, args.name, args.force)  # fail before any model call
        if taken:
            raise GraphchatError(
                taken, hint="choose another identifier with --name ID, or --force to replace it"
            )
    context = _starting_points(args, settings)
    events = sink_for_environment()
    llm = LLM(config, events=events)

    def check(plan: Any) -> list[str]:
        """An identifier the planner chose that is taken goes back to it like a problem."""
        if not saving or identifier or args.output:
            return []
        taken = identifier_taken(settings.plans_dir, plan.identifier, args.force)
        return [f"identifier: {taken}: choose another identifier"] if taken else []

    def on_attempt(n: int, problems: list[str]) -> None:
        if problems and n < ATTEMPTS:
            count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
            events.info(f"✗ draft {n}: {count}; sent back to the planner")

    async def go() -> Any:
        # the one host: the catalog's warnings (skipped servers, names wanted twice) said there
        host = open_host(settings, events=events, record_shapes=False)
        catalog = host.catalog
        said = set(catalog.warnings)
        try:
            failed = await catalog.prepare()  # the planner must see every server's tools
            for server, error in failed.items():
                warn(f"MCP server '{server}': {error}; its tools are not offered to the planner")
            for message in catalog.warnings:  # what the servers just started added
                if message not in said:
                    events.warning(message)

            async with budget_scope(settings, "run") as _:  # the run's budgets (calls, cost, clock)
                result = await draft_plan(
                    args.goal,
                    llm=llm,
                    catalog=catalog,
                    settings=settings,
                    context=context,
                    identifier=identifier,
                    identity=identity,
                    attempts=ATTEMPTS,
                    header=header,
                    check=check,
                    on_attempt=on_attempt,
                )
            kept = None
            if not result.ok and args.salvage and result.last_doc is not None:
                kept = salvage(result.last_doc, catalog, settings, header=header)  # graph's salvage
            return result, kept
        finally:
            await host.aclose()

    header = f"Drafted by `graphchat plan draft` for: {args.goal}"
    result, kept = asyncio.run(go())
    if result.usage is not None and result.usage.calls:
        events.usage_summary(result.usage.to_dict())
    path: Path | None = None
    if result.ok and saving:
        assert result.yaml is not None and result.plan is not None
        path = _target(args, settings, result.plan.identifier)
        _write(path, result.yaml)
    if kept is not None and saving:
        path = _target(args, settings, str(kept.doc.get("identifier") or "draft"))
        _write(path, kept.yaml)
    if args.json:
        body: dict[str, Any] = {
            "ok": result.ok,
            "plan": result.plan_doc,
            "path": str(path) if path else None,
            "attempts": result.attempts,
            "problems": result.problems,
        }
        if kept is not None:  # graph's salvage keys beside graphchat's
            body.update(
                plan=kept.doc,
                salvaged={"steps": kept.kept, "of": kept.of, "dropped": kept.dropped},
            )
        print_json(body)
    elif (result.ok or kept is not None) and args.stdout:
        sys.stdout.write(result.yaml if result.ok else kept.yaml if kept is not None else "")
    elif path is not None:
        sys.stdout.write(f"{path}\n")
    if not result.ok:
        said = "; nothing saved" if kept is None else ""
        report_error(f"the planner's draft still does not validate after {result.attempts} attempts{said}")
        for problem in result.problems:
            sys.stderr.write(f"  {problem}\n")
        if kept is not None:
            where = "printed" if not saving else f"saved to {path}"
            dropped = f" (without its {' and '.join(kept.dropped)})" if kept.dropped else ""
            sys.stderr.write(
                f"salvaged: the valid first {kept.kept} of {kept.of} steps of the last draft{dropped}, {where}; "
                "finish it with `graphchat plan step add` rather than redrafting\n"
            )
        elif args.salvage:
            sys.stderr.write("salvaged: nothing (not even the last draft's first step validates)\n")
        return 1
    assert result.plan is not None
    events.info(
        f"✓ plan '{result.plan.identifier}' drafted in {result.attempts} attempt"
        f"{'s' if result.attempts != 1 else ''} ({len(result.plan.steps)} steps, {result.plan.finish} finish)"
    )
    return 0
