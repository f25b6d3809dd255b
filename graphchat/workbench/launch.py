"""Opening the workbench over a catalog that is already up: `graphchat workbench plan` (its own
host) and chat's `/workbench` (the chat's catalog, on the chat's loop) both come here.

What is opened (a plan, a frozen thread) is opened before the screen is taken, so a plan or a
thread that cannot be opened is said as a one-line error instead.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphchat.errors import EXIT_USAGE, GraphchatError

if TYPE_CHECKING:
    from graphchat.asks import Asker
    from graphchat.catalog.base import Catalog
    from graphchat.workbench.bench import Bench
    from graphchat.workspace import Settings


def prepare(
    settings: Settings,
    catalog: Catalog,
    *,
    target: str | None = None,
    thread: str | None = None,
    from_thread: bool = False,
    asker: Asker | None = None,
) -> Bench:
    """A bench with plan `target`, or the thread (`thread`, else the latest) frozen as a draft."""
    # ruamel: imported when used, not at start-up
    from graphchat.plans.authoring import AuthoringError, EditRefused
    from graphchat.workbench.bench import Bench

    if target and from_thread:
        raise GraphchatError("give a plan or --from-thread, not both", EXIT_USAGE)
    bench = Bench(settings, catalog, asker=asker)
    try:
        if from_thread:
            bench.open_thread(thread)
        elif target:
            try:
                bench.draft.load(target)
            except (AuthoringError, EditRefused) as exc:
                raise GraphchatError(str(exc), EXIT_USAGE) from None
    except BaseException:
        bench.close()
        raise
    return bench


async def show(bench: Bench) -> None:
    """The full-screen app over `bench` until it quits; the bench is closed after."""
    # rich, ruamel, textual: imported when used, not at start-up
    from graphchat.workbench.app import WorkbenchApp

    try:
        await WorkbenchApp(bench).run_async()
    finally:
        bench.close()
