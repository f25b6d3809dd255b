"""`graphchat plan run` (list/show/validate come from plan_inspect): inputs, the host's asker,
the executor, and the deliverable on stdout with the spec's exit codes."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphchat.plans.executor import PlanOutcome


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("plan", help="list, show, validate and run plans")
    plan_sub = parser.add_subparsers(dest="plan_command", metavar="SUBCOMMAND")
    run = plan_sub.add_parser(
        "run",
        help="run a plan",
        description="Run a plan by name (from the workspace's plans/) or by file path.",
    )
    run.add_argument("plan", metavar="NAME|PATH")
    run.add_argument("document", nargs="?", metavar="JSON|@file|-", help="the input object")
    run.add_argument(
        "--input", action="append", metavar="k=v", help="one input (v parsed as JSON when it parses)"
    )
    run.add_argument("--json", action="store_true", help="print the {answer, output, plan, …} envelope")
    run.add_argument(
        "--answers",
        metavar="FILE",
        help="answers to questions (YAML/JSON: step id or prompt → answer); others are asked on the terminal",
    )
    run.add_argument("--yes", action="store_true", help="approve every sensitive tool call of this run")
    run.add_argument("-m", "--model", metavar="M", help="use this model instead of the configured ones")
    run.add_argument(
        "--tree",
        action="store_true",
        help="when the run ends, draw the step tree with each step's status and time",
    )
    run.add_argument(
        "--no-park",
        action="store_true",
        help="a question nobody here can answer fails the run (as in graph) instead of parking it (exit 5)",
    )
    run.add_argument(
        "--strict",
        action="store_true",
        help="an input the plan never reads is an error (exit 3), not a warning",
    )
    run.set_defaults(func=run_command)
    from graphchat.cli.plan_draft import register_draft

    register_draft(plan_sub)
    from graphchat.cli.plan_freeze import register_freeze

    register_freeze(plan_sub)
    from graphchat.cli.plan_go import register_go

    register_go(plan_sub)
    from graphchat.cli.plan_inspect import register_inspect

    register_inspect(plan_sub)
    from graphchat.cli.plan_edit import register_edit

    register_edit(plan_sub)


# --- resolving a plan ------------------------------------------------------------------------


def resolve_plan(settings: Any, arg: str) -> Any:
    """NAME → the workspace's plan of that identifier; PATH → that file. Load errors exit 1."""
    from graphchat.cli.output import warn
    from graphchat.plans.discovery import find_plan

    plan = find_plan(arg, settings.plans_dir, warn=warn)
    for ignored in plan.warnings:  # fields graph ignores (e.g. `timeout:` on a step)
        warn(ignored)
    return plan


def plan_input(
    plan: Any, document_arg: str | None, pairs: list[str] | None, *, strict: bool = False
) -> dict[str, Any]:
    """The input object of `plan run`, as graph's `resolve_input` (graph-cli commands/input.rs):
    an empty document is `{}`; a document that is not an object and an `--input` without `=`
    are exit 1. A key the input_schema does not name: exit 3 from `--input`, a warning from a
    document (graph passes extra keys through)."""
    from graphchat.cli.output import apply_input_flags, read_document_arg, warn
    from graphchat.errors import EXIT_INPUT_NEEDED, GraphchatError
    from graphchat.plans.inputs import unknown_input_keys

    for pair in pairs or []:
        if "=" not in pair:
            raise GraphchatError(f"--input must be key=value, got: {pair}")
    source = (
        "stdin"
        if document_arg == "-"
        else (document_arg[1:] if document_arg and document_arg[:1] == "@" else "argument")
    )
    if document_arg is not None and not document_arg.strip():
        document: Any = {}
    else:
        try:
            document = read_document_arg(document_arg)
        except GraphchatError as exc:
            if document_arg is not None and document_arg[:1] == "@" and _empty_file(document_arg[1:]):
                document = {}
            else:  # a plan input that does not parse is an invalid input (exit 3)
                raise GraphchatError(exc.message, EXIT_INPUT_NEEDED, exc.hint) from None
    if document is None and document_arg in (None, "-"):  # none given, or an empty stdin
        document = {}
    if not isinstance(document, dict):
        import orjson

        shown = orjson.dumps(document).decode()
        raise GraphchatError(f"input from {source} must be a JSON object, got: {shown}")
    for key, close in unknown_input_keys(plan.input_schema, document):
        warn(
            f"input {key!r} is not an input of plan '{plan.identifier}'{_did_you_mean(close)}; passed through"
        )
    flags = {pair.partition("=")[0]: pair for pair in pairs or []}
    for key, close in unknown_input_keys(plan.input_schema, dict.fromkeys(flags)):
        raise GraphchatError(
            f"--input {flags[key]}: {key!r} is not an input of plan '{plan.identifier}'{_did_you_mean(close)}",
            EXIT_INPUT_NEEDED,
        )
    result: dict[str, Any] = apply_input_flags(document, pairs)
    unread_inputs(plan, list(flags) if plan_declares_inputs(plan) else list(result), strict=strict)
    return result


def plan_declares_inputs(plan: Any) -> bool:
    props = plan.input_schema.get("properties") if isinstance(plan.input_schema, dict) else None
    return isinstance(props, dict) and bool(props)


def unread_inputs(plan: Any, given: list[str], *, strict: bool) -> None:
    """Keys given that no template of the plan reads: a warning naming the keys it does read
    (graph accepts them); `--strict`: exit 3. For a plan that declares inputs, only `--input`
    keys are looked at (a document's undeclared keys are warned about above)."""
    from graphchat.cli.output import warn
    from graphchat.errors import EXIT_INPUT_NEEDED, GraphchatError
    from graphchat.plans.inputs import input_keys_read

    read = input_keys_read(plan)
    if read is None:
        return  # the plan reads its whole input
    unread = [key for key in dict.fromkeys(given) if key not in read]
    if not unread:
        return
    names = ", ".join(repr(k) for k in unread)
    reads = ", ".join(sorted(read)) if read else "none"
    declared = "" if plan_declares_inputs(plan) else " (it has no input_schema)"
    message = f"plan '{plan.identifier}'{declared} never reads input {names}; the inputs it reads: {reads}"
    if strict:
        raise GraphchatError(message, EXIT_INPUT_NEEDED)
    warn(f"{message} (ignored)")


def _did_you_mean(close: str | None) -> str:
    return f" (did you mean {close!r}?)" if close else ""


def _empty_file(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return not handle.read().strip()
    except OSError:
        return False


def check_tools_resolve(plan: Any, catalog: Any, settings: Any) -> None:
    """Before any step runs: every tool the plan names must resolve (no server is started)."""
    from graphchat.errors import GraphchatError
    from graphchat.plans.discovery import discover
    from graphchat.plans.splice_types import learned_shapes
    from graphchat.plans.validate import known_servers, validate_against_catalog

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
        from graphchat.cli.output import note

        for line in _located(plan, notes):
            note(f"note: {line}")
    if problems:
        lines = "\n".join(f"  {line}" for line in _located(plan, problems))
        raise GraphchatError(f"plan '{plan.identifier}' cannot run here:\n{lines}")


def _located(plan: Any, problems: list[str]) -> list[str]:
    """`<file>:<line>: <problem>` (the plan's file), or `<identifier>: <problem>`."""
    if plan.path is None:
        return [f"{plan.identifier}: {problem}" for problem in problems]
    from graphchat.plans.loader import locate

    return locate(plan.path, problems)


# --- running -----------------------------------------------------------------------------------


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


def run_command(args: argparse.Namespace) -> int:
    import os

    from graphchat.ci import memory_storage
    from graphchat.errors import GraphchatError
    from graphchat.host import load_settings, needs_model

    settings = load_settings(args.home, model=args.model)
    plan = resolve_plan(settings, args.plan)
    inputs = plan_input(plan, args.document, args.input, strict=args.strict)
    from graphchat.catalog.plan_tools import configured_servers

    missing = plan.missing_servers(configured_servers(settings)) if plan.requires_servers else []
    if missing:
        raise GraphchatError(
            f"plan '{plan.identifier}' needs MCP servers that are not configured: {', '.join(missing)}",
            hint=f"add them to {settings.catalog_dir / 'servers.yaml'}",
        )
    if plan.finish == "solver":
        needs_model(settings, "solver")  # no model configured: exit 2 now, before any step runs
    flags = RunFlags(
        json=args.json,
        yes=args.yes,
        model=args.model,
        answers=os.path.abspath(args.answers) if args.answers else None,
        park=not args.no_park and not memory_storage(),  # GRAPHCHAT_STORAGE=memory: no run record
        home=args.home,
        tree=args.tree,
    )
    return execute(settings, plan, inputs, flags)


def parking_for(settings: Any, plan: Any, inputs: Any, flags: RunFlags, events: Any) -> Any:
    """A fresh run's parking (issue 9): its record is written only if the run parks."""
    import os
    from dataclasses import asdict

    from graphchat.parked import PlanParking, RunRecord, plan_fingerprint
    from graphchat.requests import RequestStore

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


def execute(settings: Any, plan: Any, inputs: Any, flags: RunFlags, parking: Any = None) -> int:
    """Run `plan` and present its outcome: the deliverable on stdout, the exit code. A fresh
    run may park (`flags.park`); `parking` is given when a parked run resumes."""
    import asyncio

    from graphchat.ci import annotate
    from graphchat.cli.output import note, print_json
    from graphchat.errors import GraphchatError
    from graphchat.host import open_host
    from graphchat.plans.executor import llm_factory_for, run_plan

    host = open_host(settings, answers=flags.answers)
    events = host.events
    times = None
    if flags.tree:
        from graphchat.plans.picture import StepTimes

        times = StepTimes(events)
    if parking is None and flags.park:
        parking = parking_for(settings, plan, inputs, flags, events)
    elif parking is not None:
        parking.events = events
    ctx = host.context(surface="plan", assume_yes=flags.yes)
    streamed: list[str] = []

    from graphchat.display import safe

    shown = safe if sys.stdout.isatty() else str  # a terminal: escaped; a pipe: byte-exact

    def on_text(text: str) -> None:
        streamed.append(text)
        sys.stdout.write(shown(text))
        sys.stdout.flush()

    async def go() -> Any:
        try:
            check_tools_resolve(plan, host.catalog, settings)
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

    outcome = asyncio.run(go())
    if times is not None:
        from graphchat.plans.picture import tree

        sys.stderr.write("\n".join(tree(plan, times.status)) + "\n")
    if streamed and not streamed[-1].endswith("\n"):
        sys.stdout.write("\n")
        sys.stdout.flush()
    if outcome.usage:
        events.usage_summary(outcome.usage)
    if outcome.kind == "parked":
        for request in outcome.requests:  # GRAPHCHAT_EVENTS=github: the run waits (exit 5)
            annotate(
                "warning", f"plan '{plan.identifier}' waits for a person: {request['question']}",
                json=flags.json, title=f"request {request['id']}",
            )  # fmt: skip
        return report_parked(outcome.requests, json=flags.json, home=flags.home)
    if parking is not None:
        parking.finished()
    if flags.json and outcome.kind not in ("failed", "input"):  # as graph: no envelope then
        print_json(envelope(outcome))
    if outcome.kind == "input":
        import orjson

        annotate("error", outcome.error or "", json=flags.json)
        note(outcome.error or "")
        if outcome.input_schema:
            note("input schema:")
            note(orjson.dumps(outcome.input_schema, option=orjson.OPT_INDENT_2).decode())
        return exit_code(outcome)
    if outcome.kind == "failed":
        raise GraphchatError(outcome.error or "plan failed")
    if outcome.kind == "exit":
        assert outcome.exit is not None
        mark = "✓" if outcome.exit["status"] == "success" else "✗"
        note(f"{mark} {outcome.exit['message']}")
        if not flags.json and "output" in outcome.exit:
            print_json(outcome.exit["output"])
        if outcome.exit["status"] != "success":  # as graph: the exit's message, after the output
            annotate("error", str(outcome.exit["message"]), json=flags.json)
        return exit_code(outcome)
    if not flags.json:
        if plan.finish == "output":
            print_json(outcome.output)
        elif plan.finish == "solver" and not streamed and outcome.answer:
            sys.stdout.write(shown(outcome.answer.rstrip("\n")) + "\n")
    if plan.finish == "silent":
        note(f"✓ plan '{plan.identifier}' completed ({outcome.steps_executed} steps)")
    return 0


def report_parked(requests: list[dict[str, Any]], *, json: bool, home: str | None = None) -> int:
    """A parked run: each request, its question, what the answer may be and the exact command
    that answers it on stderr (`--json`: the `{parked, requests, resume}` object on stdout);
    exit 5."""

    from graphchat.ci import jsonl_events
    from graphchat.cli.output import note, print_json
    from graphchat.errors import EXIT_WAITING
    from graphchat.requests_text import answer_command, answer_help, approval_lines

    jsonl = jsonl_events()  # request_opened said it
    for request in [] if jsonl else requests:
        note(f"⏸ waiting for a person: request {request['id']}: {request['question']}")
        if request.get("hint"):
            note(f"    {request['hint']}")
        for line in approval_lines(request):
            note(f"    {line}")
        for i, option in enumerate(request.get("options") or [], 1):
            note(f"    {i}. {option}")
        note(f"  answer it: {answer_command(request, home)}")
        for line in answer_help(request, home):
            note(f"    {line}")
    if json:
        resume = answer_command(requests[0], home) if requests else ""
        print_json({"parked": True, "requests": requests, "resume": resume})
    return EXIT_WAITING


def exit_code(outcome: PlanOutcome) -> int:
    """The exit code of `plan run` for a run's outcome (0 ok, 1 failed, 3 input, 4 exit error,
    5 parked)."""
    if outcome.kind == "parked":
        return 5
    if outcome.kind == "ok":
        return 0
    if outcome.kind == "exit":
        return 0 if outcome.exit and outcome.exit["status"] == "success" else 4
    if outcome.kind == "input":
        return 3
    return 1


def envelope(outcome: PlanOutcome) -> dict[str, Any]:
    """The `--json` envelope of `plan run`: graph's result body (`PlanOutcome.body`).
    A failed run (exit 1) and a run that needs input (exit 3) print no envelope."""
    return outcome.body()
