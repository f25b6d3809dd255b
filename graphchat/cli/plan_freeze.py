"""`graphchat plan freeze [THREAD]`: a thread's successful tool calls, saved as a plan.

The use case (read the thread, freeze, check, write) is `graphchat.runs.freeze`;
here are only the command's arguments and what it prints.
"""

from __future__ import annotations

import argparse
import sys

from graphchat.cli.output import note
from graphchat.host import open_host
from graphchat.runs.freeze import freeze_to_workspace
from graphchat.workspace import load_settings


def run_freeze(args: argparse.Namespace) -> int:
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
