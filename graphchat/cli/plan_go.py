"""`graphchat plan go GOAL`: `plan_and_execute` from the command line (graphchat.plans.planner):
the planner drafts a plan, it runs (replanned on repairable failures), the deliverable goes to
stdout; `--save ID` writes the final plan to plans/<ID>.yaml.

The run is kept in a new thread as an `ask` whose model called `plan_and_execute` would be (the
goal, the call, its result with the final plan, the answer), so `plan freeze` of that thread —
or `/freeze` in `chat --thread` on it — writes the plan that ran."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.cli.output import note, print_json, report_error, warn
from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.events import sink_for_environment
from graphchat.fsutil import write_atomic
from graphchat.host import open_host
from graphchat.llm.runtime import preload_in_background
from graphchat.plans.discovery import identifier_taken
from graphchat.plans.draft import plan_yaml
from graphchat.plans.loader import IDENTIFIER_RE, PLAN_FIELDS
from graphchat.plans.planner import PLAN_AND_EXECUTE, plan_and_execute
from graphchat.threads import lines as ev
from graphchat.threads.redact import settings_secrets
from graphchat.threads.store import ThreadStore
from graphchat.workspace import load_settings


def run_go(args: argparse.Namespace) -> int:
    import asyncio

    if not args.goal.strip():
        raise GraphchatError("GOAL is empty: say what to do", EXIT_USAGE)
    if args.save is not None and not IDENTIFIER_RE.match(args.save):
        raise GraphchatError(f"--save {args.save!r}: use only letters, digits, `_` and `-`", EXIT_USAGE)
    settings = load_settings(args.home, model_override=args.model)
    settings.model_for("planner")  # no model configured: exit 2 before anything else
    if args.save:
        # fail before spending model calls
        taken = identifier_taken(settings.plans_dir, args.save, args.force)
        if taken:
            raise GraphchatError(taken, hint="choose another identifier, or --force to replace it")

    preload_in_background()
    events = sink_for_environment()
    # the one host: --answers first, then the terminal; the catalog's warnings are said here
    host = open_host(settings, events=events, answers=args.answers)
    ctx = host.context(surface="plan", assume_yes=args.yes)
    streamed: list[str] = []

    def on_text(text: str) -> None:
        streamed.append(text)
        sys.stdout.write(text)
        sys.stdout.flush()

    async def go() -> Any:
        catalog = host.catalog
        try:
            failed = await catalog.prepare()  # the planner must see every server's tools
            for server, error in failed.items():
                warn(f"MCP server '{server}': {error}; its tools are not offered to the planner")
            return await plan_and_execute(
                args.goal,
                catalog=catalog,
                ctx=ctx,
                settings=settings,
                events=events,
                on_text=None if args.json else on_text,
            )
        finally:
            await host.aclose()

    kept = GoThread(settings, args.goal)
    try:
        run = asyncio.run(go())
    except BaseException as exc:
        kept.failed(exc)
        raise
    kept.finished(run, "".join(streamed))
    if streamed and not streamed[-1].endswith("\n"):
        sys.stdout.write("\n")
        sys.stdout.flush()
    if run.usage:
        events.usage_summary(run.usage)
    saved = None
    if args.save and run.ok and run.plan_doc is not None:
        saved = save_plan(settings, args.save, run.plan_doc, args.goal)
    if args.json:
        data = run.to_json()
        if run.usage:
            data["usage"] = run.usage
        if saved is not None:
            data["path"] = str(saved)
        data["thread_id"] = kept.thread.id
        print_json(data)
    if not run.ok:
        report_error(run.error or "plan_and_execute failed")
        return 1
    outcome = run.outcome
    if not args.json and outcome is not None:
        if outcome.kind == "exit" and outcome.exit is not None:
            mark = "✓" if outcome.exit["status"] == "success" else "✗"
            note(f"{mark} {outcome.exit['message']}")
            if "output" in outcome.exit:
                print_json(outcome.exit["output"])
        elif outcome.finish == "output":
            print_json(outcome.output)
        elif outcome.finish == "solver" and not streamed and outcome.answer:
            sys.stdout.write(outcome.answer.rstrip("\n") + "\n")
    if saved is not None:
        note(f"✓ plan saved to {saved}")
    if outcome is not None and outcome.kind == "exit" and outcome.exit is not None:
        if outcome.exit["status"] != "success":
            return 4
    note(f"✓ kept in thread {kept.thread.id}: `graphchat plan freeze {kept.thread.id}` saves this plan")
    return 0


class GoThread:
    """The thread a `plan go` run is kept in, written as the run goes: the goal (a user message),
    a `plan_and_execute` call (an assistant message), then its result, the answer and the turn's
    end — or the turn's failure. The turn lock is held throughout, as `ask` holds it."""

    CALL_ID = "call_plan_go"

    def __init__(self, settings: Any, goal: str) -> None:
        import orjson

        self.model = settings.model_for("planner").model
        store = ThreadStore(settings.threads_dir, secrets=settings_secrets(settings))
        self.thread = store.create()
        self.thread.try_lock_turn()  # a new thread: nobody else holds it
        self.thread.append(dict(ev.user(goal)))
        arguments = orjson.dumps({"query": goal}).decode()
        call: ev.ToolCallRecord = {"id": self.CALL_ID, "name": PLAN_AND_EXECUTE, "arguments": arguments}
        self.thread.append(dict(ev.assistant(None, [call])))

    def finished(self, run: Any, streamed: str) -> None:
        import orjson

        result = run.tool_result()
        content = orjson.dumps(result.value, default=str).decode()
        self.thread.append(
            dict(ev.tool_result(self.CALL_ID, PLAN_AND_EXECUTE, content, is_error=result.is_error))
        )
        outcome = run.outcome
        text = None
        if run.ok and outcome is not None:
            if outcome.kind == "exit" and outcome.exit is not None:
                text = str(outcome.exit.get("message") or "")
            elif outcome.finish == "solver":
                text = streamed or outcome.answer
            elif outcome.finish == "output":
                text = orjson.dumps(outcome.output, default=str).decode()
        if text and text.strip():
            self.thread.append(dict(ev.assistant(text)))
        if run.ok:
            self.thread.append(dict(ev.turn_end(run.usage or {}, self.model)))
        else:
            self.thread.append(dict(ev.turn_failed(run.error or "plan_and_execute failed")))
        self.thread.close()

    def failed(self, exc: BaseException) -> None:
        interrupted = isinstance(exc, KeyboardInterrupt)
        error = "interrupted (Ctrl-C)" if interrupted else (str(exc) or type(exc).__name__)
        self.thread.append(dict(ev.turn_failed(error, interrupted=interrupted)))
        self.thread.close()


def save_plan(settings: Any, identifier: str, doc: dict[str, Any], goal: str) -> Any:
    """plans/<identifier>.yaml: the final plan, its identifier forced to `identifier`."""
    body = {k: v for k, v in doc.items() if k != "identifier"}
    ordered = {"identifier": identifier, **body}
    ordered = {k: ordered[k] for k in PLAN_FIELDS if k in ordered} | {
        k: v for k, v in ordered.items() if k not in PLAN_FIELDS
    }
    path = settings.plans_dir / f"{identifier}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, plan_yaml(ordered, header=f"Planned and run by `graphchat plan go` for: {goal}"))
    return path
