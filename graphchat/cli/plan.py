"""`graphchat plan run` (list/show/validate come from plan_inspect): inputs, the host's asker,
the executor, and the deliverable on stdout with the spec's exit codes."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from graphchat.cli.output import apply_input_flags, note, print_json, read_document_arg, warn
from graphchat.cli.plan_draft import register_draft
from graphchat.cli.plan_edit import register_edit
from graphchat.cli.plan_freeze import register_freeze
from graphchat.cli.plan_go import register_go
from graphchat.cli.plan_inspect import register_inspect
from graphchat.errors import EXIT_INPUT_NEEDED, EXIT_WAITING, GraphchatError

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

    register_draft(plan_sub)

    register_freeze(plan_sub)

    register_go(plan_sub)

    register_inspect(plan_sub)

    register_edit(plan_sub)


# --- resolving a plan ------------------------------------------------------------------------


def resolve_plan(settings: Any, arg: str) -> Any:
    """NAME → the workspace's plan of that identifier; PATH → that file. Load errors exit 1."""
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


def run_command(args: argparse.Namespace) -> int:
    import os

    from graphchat.ci import memory_storage
    from graphchat.host import load_settings, needs_model

    settings = load_settings(args.home, model=args.model)
    plan = resolve_plan(settings, args.plan)
    inputs = plan_input(plan, args.document, args.input, strict=args.strict)
    from graphchat.plans.plan_tools import configured_servers

    missing = plan.missing_servers(configured_servers(settings)) if plan.requires_servers else []
    if missing:
        raise GraphchatError(
            f"plan '{plan.identifier}' needs MCP servers that are not configured: {', '.join(missing)}",
            hint=f"add them to {settings.catalog_dir / 'servers.yaml'}",
        )
    if plan.finish == "solver":
        needs_model(settings, "solver")  # no model configured: exit 2 now, before any step runs
    from graphchat.cli.front import TerminalFront
    from graphchat.runs.plan import RunFlags, execute

    flags = RunFlags(
        json=args.json,
        yes=args.yes,
        model=args.model,
        answers=os.path.abspath(args.answers) if args.answers else None,
        park=not args.no_park and not memory_storage(),  # GRAPHCHAT_STORAGE=memory: no run record
        home=args.home,
        tree=args.tree,
    )
    return execute(settings, plan, inputs, flags, TerminalFront())


def report_parked(requests: list[dict[str, Any]], *, json: bool, home: str | None = None) -> int:
    """A parked run: each request, its question, what the answer may be and the exact command
    that answers it on stderr (`--json`: the `{parked, requests, resume}` object on stdout);
    exit 5."""
    from graphchat.ci import jsonl_events
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
