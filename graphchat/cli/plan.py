"""`graphchat plan run` (list/show/validate come from plan_inspect): inputs, the host's asker,
the executor, and the deliverable on stdout with the spec's exit codes."""

from __future__ import annotations

import argparse
from typing import Any

from graphchat.ci import memory_storage
from graphchat.cli.front import TerminalFront
from graphchat.cli.output import apply_input_flags, read_document_arg, warn
from graphchat.errors import EXIT_INPUT_NEEDED, GraphchatError
from graphchat.host import load_settings, needs_model
from graphchat.plans.discovery import find_plan
from graphchat.plans.inputs import input_keys_read, unknown_input_keys
from graphchat.plans.plan_tools import configured_servers
from graphchat.runs.plan import RunFlags, execute

# --- resolving a plan ------------------------------------------------------------------------


def resolve_plan(settings: Any, arg: str) -> Any:
    """NAME → the workspace's plan of that identifier; PATH → that file. Load errors exit 1."""
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

    settings = load_settings(args.home, model=args.model)
    plan = resolve_plan(settings, args.plan)
    inputs = plan_input(plan, args.document, args.input, strict=args.strict)

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
    return execute(settings, plan, inputs, flags, TerminalFront())
