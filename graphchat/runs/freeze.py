"""The freeze use case over a workspace: a thread of the workspace's store, frozen by
`graphchat.plans.freeze` (pure), then loaded and validated as `plan validate` would, and only
then written (atomically) to `plans/<identifier>.yaml`.

`plan freeze`, chat's `/freeze` and the workbench's `--from-thread` / `/workbench` all come here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.fsutil import write_atomic
from graphchat.plans.discovery import discover
from graphchat.plans.freeze import freeze
from graphchat.plans.loader import IDENTIFIER_RE, PlanLoadError, load_plan_text
from graphchat.plans.plan_tools import configured_servers
from graphchat.plans.splice_types import learned_shapes
from graphchat.plans.validate import known_servers, validate_against_catalog
from graphchat.sources import build_catalog
from graphchat.threads.store import ThreadStore

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog
    from graphchat.plans.freeze import Frozen
    from graphchat.plans.model import Plan


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
    warn: Callable[[str], None] = lambda _message: None,
    name: str | None = None,
    turns: str | None = None,
    finish: str | None = None,
    force: bool = False,
    write: bool = True,
    catalog: Catalog | None = None,
) -> Saved:
    """Freeze a thread of the workspace (the latest without `thread_arg`); the plan is checked
    before anything is written, and with `write=False` nothing is. The check reads `catalog`
    (a host's, whose warnings it said: `plan freeze`) or one built here, whose warnings
    `warn` is told."""
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
    plan = _checked(settings, frozen, path, warn, catalog)
    if not write:
        return Saved(frozen, plan, None)
    if path.exists() and not force:
        raise PlanExistsError(path)

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, frozen.text)
    plan.path = path
    return Saved(frozen, plan, path)


def _checked(
    settings: Any, frozen: Frozen, path: Path, warn: Callable[[str], None], catalog: Catalog | None
) -> Plan:
    """The frozen plan loaded and validated as `plan validate` would; problems are an error."""
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
    if catalog is None:
        catalog = build_catalog(settings, record_shapes=False)
        for message in catalog.warnings:
            warn(message)
    servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")

    shapes = learned_shapes(
        settings.catalog_dir / "shapes"
    )  # the checker's evidence, as plan validate has it
    problems = validate_against_catalog(plan, catalog, servers=servers, plans=index.plans, shapes=shapes)
    if problems:
        lines = "\n".join(f"  {problem}" for problem in problems)
        raise GraphchatError(f"the frozen plan would not run here, so it was not saved:\n{lines}")
    return plan
