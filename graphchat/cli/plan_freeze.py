"""`graphchat plan freeze [THREAD]`: a thread's successful tool calls, saved as a plan.

The plan itself comes from `graphchat.plans.freeze` (pure); here the thread is read, the plan is
checked with the same loader and validator as `plan validate`, and only then written
(atomically) to `plans/<identifier>.yaml`. `/freeze` in chat uses `freeze_to_workspace` too.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.errors import GraphchatError

if TYPE_CHECKING:
    from graphchat.plans.freeze import Frozen
    from graphchat.plans.model import Plan


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


class PlanExistsError(GraphchatError):
    """The plan file is there already (and --force was not given)."""

    def __init__(self, path: Path) -> None:
        super().__init__(
            f"{path} already exists",
            hint="use --force to overwrite it, or --name to choose another identifier",
        )
        self.path = path


@dataclass
class Saved:
    frozen: Frozen
    plan: Plan
    path: Path | None  # None with write=False


def freeze_to_workspace(
    settings: Any,
    thread_arg: str | None,
    *,
    name: str | None = None,
    turns: str | None = None,
    finish: str | None = None,
    force: bool = False,
    write: bool = True,
) -> Saved:
    """Freeze a thread of the workspace; the plan is checked before anything is written."""
    from graphchat.catalog.plan_tools import configured_servers
    from graphchat.errors import EXIT_USAGE
    from graphchat.plans.freeze import freeze
    from graphchat.plans.loader import IDENTIFIER_RE
    from graphchat.threads.store import ThreadStore

    if name is not None and not IDENTIFIER_RE.match(name):
        raise GraphchatError(f"--name {name!r}: use only letters, digits, `_` and `-`", EXIT_USAGE)
    store = ThreadStore(settings.threads_dir)
    if thread_arg:
        thread = store.open(thread_arg)
    else:
        latest = store.latest()
        if latest is None:
            raise GraphchatError(
                "there are no threads yet: nothing to freeze", hint="start one with `graphchat chat`"
            )
        thread = latest
    frozen = freeze(
        thread.events(),
        thread_id=thread.id,
        name=name,
        turns=turns,
        finish=finish,
        servers=configured_servers(settings),
    )
    path = settings.plans_dir / f"{frozen.identifier}.yaml"
    plan = _checked(settings, frozen, path)
    if not write:
        return Saved(frozen, plan, None)
    if path.exists() and not force:
        raise PlanExistsError(path)
    from graphchat.fsutil import write_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, frozen.text)
    plan.path = path
    return Saved(frozen, plan, path)


def _checked(settings: Any, frozen: Frozen, path: Path) -> Plan:
    """The frozen plan loaded and validated as `plan validate` would; problems are an error."""
    from graphchat.catalog.build import build_catalog
    from graphchat.plans.discovery import discover
    from graphchat.plans.loader import PlanLoadError, load_plan_text
    from graphchat.plans.validate import known_servers, validate_against_catalog

    try:
        plan = load_plan_text(frozen.text, str(path))
    except PlanLoadError as err:  # a bug in the freezer: say so rather than save it
        raise GraphchatError("the frozen plan does not load:\n  " + "\n  ".join(err.problems)) from None
    index = discover(settings.plans_dir, warn=lambda _message: None)
    other = index.plans.get(plan.identifier)
    if other is not None and other.path is not None and other.path.resolve() != path.resolve():
        raise GraphchatError(
            f"plan '{plan.identifier}' is already defined in {other.path}", hint="choose another --name"
        )
    catalog = build_catalog(settings, record_shapes=False)
    from graphchat.cli.output import warn_catalog

    warn_catalog(catalog)
    servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")
    from graphchat.plans.splice_types import learned_shapes

    shapes = learned_shapes(
        settings.catalog_dir / "shapes"
    )  # the checker's evidence, as plan validate has it
    problems = validate_against_catalog(plan, catalog, servers=servers, plans=index.plans, shapes=shapes)
    if problems:
        lines = "\n".join(f"  {problem}" for problem in problems)
        raise GraphchatError(f"the frozen plan would not run here, so it was not saved:\n{lines}")
    return plan


def run_freeze(args: argparse.Namespace) -> int:
    from graphchat.cli.output import note
    from graphchat.workspace import load_settings

    settings = load_settings(getattr(args, "home", None))
    saved = freeze_to_workspace(
        settings,
        args.thread,
        name=args.name,
        turns=args.turns,
        finish=args.finish,
        force=args.force,
        write=not args.stdout,
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
