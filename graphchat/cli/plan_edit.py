"""`graphchat plan new/set/unset/step …`: graph's authoring verbs over `plans/authoring.py`.

Each command applies one edit to a plan file and writes it back; a rejected edit leaves the
file byte for byte. `--json` prints graph's envelope on stdout (also on a rejection, before the
exit 1); without it one result line goes to stderr and stdout stays empty.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graphchat.cli.output import print_json, read_document_arg
from graphchat.cli.parsers.plan import VALUE_HELP
from graphchat.errors import EXIT_FAILURE, EXIT_USAGE, GraphchatError
from graphchat.host import open_host
from graphchat.plans import authoring
from graphchat.workspace import load_settings

# --- resolving the file --------------------------------------------------------------------------


def _settings(args: argparse.Namespace) -> Any:
    return load_settings(getattr(args, "home", None))


def plan_file(settings: Any, target: str) -> Path:
    try:
        return authoring.locate(settings.plans_dir, target)
    except authoring.AuthoringError as exc:
        raise GraphchatError(str(exc), EXIT_USAGE) from None


def _value(text: str, what: str) -> Any:
    try:
        return read_document_arg(text, what=what)
    except GraphchatError as exc:
        raise GraphchatError(exc.message, EXIT_USAGE, exc.hint) from None


# --- running an edit -----------------------------------------------------------------------------


def _edit(args: argparse.Namespace, edit: Any, renames: dict[str, str] | None = None) -> int:
    settings = _settings(args)
    path = plan_file(settings, args.target)
    try:
        done = authoring.apply_edit(path, edit, renames=renames)
    except authoring.AuthoringError as exc:
        raise GraphchatError(str(exc), EXIT_USAGE) from None
    except authoring.EditRefused as exc:
        return _refused(args, str(exc), exc.details)
    except authoring.EditRejected as exc:
        return _rejected(args, exc)
    except OSError as exc:
        raise GraphchatError(f"cannot write {path}: {exc.strerror or exc}") from None
    return _accepted(args, settings, done)


def _accepted(args: argparse.Namespace, settings: Any, done: Any) -> int:
    # the one host: the catalog's warnings (skipped servers, names wanted twice) said there
    catalog = open_host(settings, record_shapes=False).catalog
    notes = authoring.catalog_notes(done.path, catalog, settings)
    if args.json:
        print_json(authoring.envelope(done, notes))
        return 0
    what = _describe(args, done.summary)
    line = f"✓ {what} → {done.path}"
    if done.renamed_from is not None:
        line += f" (new file; {done.renamed_from} is left as it was)"
    sys.stderr.write(line + "\n")
    for problem in done.pre_existing:
        sys.stderr.write(f"still to fix: {problem}\n")
    for note in notes:
        sys.stderr.write(f"note: {note}\n")
    return 0


def _rejected(args: argparse.Namespace, exc: Any) -> int:
    if args.json:
        print_json(authoring.rejection(exc))
        return EXIT_FAILURE
    sys.stderr.write(
        f"error: edit rejected — it would add {len(exc.introduced)} problem(s); the file is unchanged\n"
    )
    for problem in exc.introduced:
        sys.stderr.write(f"  {problem}\n")
    return EXIT_FAILURE


def _refused(args: argparse.Namespace, message: str, details: dict[str, Any]) -> int:
    if args.json:
        print_json({"ok": False, "error": message, **details})
    else:
        sys.stderr.write(f"error: {message}\n")
    return EXIT_FAILURE


def _describe(args: argparse.Namespace, summary: dict[str, Any]) -> str:
    command = args.func.__name__.removeprefix("run_")
    if command == "set":
        return f"set {args.attribute}"
    if command == "unset":
        return f"unset {args.attribute}"
    if command == "step_add":
        return f"step {summary['id']} added ({_steps(summary['steps'])})"
    if command == "step_update":
        return f"step {args.id}: {args.attribute} updated"
    if command == "step_rename":
        return f"step {args.id} renamed to {args.new_id}, references rewritten"
    if command == "step_unset":
        return f"step {args.id}: {args.attribute} removed"
    if command == "step_rm":
        return f"step {args.id} removed ({_steps(summary['steps'])} left)"
    return command


def _steps(count: int) -> str:
    return f"{count} step" if count == 1 else f"{count} steps"


# --- the verbs -----------------------------------------------------------------------------------


def run_new(args: argparse.Namespace) -> int:
    settings = _settings(args)
    path = Path(args.output).expanduser() if args.output else settings.plans_dir / f"{args.id}.yaml"
    try:
        done = authoring.new_plan(path, args.id, args.name, args.description)
    except authoring.AuthoringError as exc:
        raise GraphchatError(str(exc), EXIT_USAGE) from None
    except authoring.EditRefused as exc:
        return _refused(args, str(exc), exc.details)
    except OSError as exc:
        raise GraphchatError(f"cannot write {path}: {exc.strerror or exc}") from None

    if args.json:
        print_json(
            {
                "ok": True,
                "id": args.id,
                "steps": 0,
                "savedTo": str(path),
                "preExistingProblems": done.pre_existing,
            }
        )
    else:
        sys.stderr.write(
            f"✓ plan '{args.id}' created → {path} (add steps with `graphchat plan step add {args.id} …`)\n"
        )
    return 0


def run_set(args: argparse.Namespace) -> int:
    if args.attribute in authoring.JSON_ATTRIBUTES:
        if len(args.values) != 1:
            raise GraphchatError(f"{args.attribute} takes one value ({VALUE_HELP})", EXIT_USAGE)
        values = [_value(args.values[0], args.attribute)]
    else:
        values = list(args.values)
    return _edit(args, lambda data: authoring.set_attribute(data, args.attribute, values))


def run_unset(args: argparse.Namespace) -> int:
    return _edit(args, lambda data: authoring.unset_attribute(data, args.attribute))


def run_step_add(args: argparse.Namespace) -> int:
    inputs = _value(args.input, "input")
    return _edit(
        args,
        lambda data: authoring.add_step(
            data, args.id, args.tool, inputs, reasoning=args.reasoning, before=args.before, after=args.after
        ),
    )


def run_step_update(args: argparse.Namespace) -> int:
    value: Any = _value(args.value, "input") if args.attribute == "input" else args.value
    return _edit(args, lambda data: authoring.update_step(data, args.id, args.attribute, value))


def run_step_rename(args: argparse.Namespace) -> int:
    return _edit(
        args, lambda data: authoring.rename_step(data, args.id, args.new_id), renames={args.id: args.new_id}
    )


def run_step_unset(args: argparse.Namespace) -> int:
    return _edit(args, lambda data: authoring.unset_step(data, args.id, args.attribute))


def run_step_rm(args: argparse.Namespace) -> int:
    return _edit(args, lambda data: authoring.remove_step(data, args.id))
