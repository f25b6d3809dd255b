"""`graphchat plan freeze [THREAD]`: a thread's successful tool calls, saved as a plan.

The use case (read the thread, freeze, check, write) is `graphchat.runs.freeze`;
here are only the command's arguments and what it prints.
"""

from __future__ import annotations

import argparse
import sys

from graphchat.cli.output import note


def register_freeze(plan_sub: argparse._SubParsersAction) -> None:
    p = plan_sub.add_parser(
        "freeze",
        help="turn a thread's successful tool calls into a plan",
        description=(
            "Freeze the successful tool calls of a thread (the latest one when none is named) into "
            "plans/<ID>.yaml: values from earlier results become references, values you typed become "
            "inputs, a round of calls over an earlier array becomes a map. Prints the file's path."
        ),
    )
    p.add_argument("thread", nargs="?", metavar="THREAD", help="thread id (or a unique prefix)")
    p.add_argument("--name", metavar="ID", help="the plan's identifier (default: from the first message)")
    p.add_argument("--turns", metavar="A..B", help="freeze only these turns (1-based, inclusive)")
    p.add_argument(
        "--finish",
        choices=("solver", "output", "silent"),
        help="how the plan ends (default: solver when the chat ended in a written answer, else output)",
    )
    p.add_argument("--stdout", action="store_true", help="print the plan's YAML and write nothing")
    p.add_argument("--force", action="store_true", help="overwrite an existing plans/<ID>.yaml")
    p.set_defaults(func=run_freeze)


def run_freeze(args: argparse.Namespace) -> int:
    from graphchat.host import open_host  # command dispatch
    from graphchat.runs.freeze import freeze_to_workspace
    from graphchat.workspace import load_settings

    settings = load_settings(getattr(args, "home", None))
    # the one host: the catalog's warnings (skipped servers, names wanted twice) said there
    catalog = open_host(settings, record_shapes=False).catalog
    saved = freeze_to_workspace(
        settings,
        args.thread,
        name=args.name,
        turns=args.turns,
        finish=args.finish,
        force=args.force,
        write=not args.stdout,
        catalog=catalog,
    )
    frozen = saved.frozen
    if args.stdout:
        sys.stdout.write(frozen.text)
        for item in frozen.notes:
            note(f"note: {item}")
        return 0
    note(f"✓ froze {len(frozen.steps)} step(s) into plan '{frozen.identifier}' ({frozen.finish} finish)")
    for item in frozen.dropped:
        note(f"  left out: {item}")
    for item in frozen.notes:
        note(f"  note: {item}")
    sys.stdout.write(f"{saved.path}\n")
    return 0
