"""`graphchat workbench plan [NAME|PATH]` (alias `wb`): the full-screen plan workbench."""

from __future__ import annotations

import argparse

from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.host import load_settings, open_host
from graphchat.workbench import launch
from graphchat.workbench.lines import LineSink
from graphchat.workbench.pane_asker import PaneAsker


def run(args: argparse.Namespace) -> int:
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise GraphchatError(
            "the workbench is full-screen and needs a terminal",
            EXIT_USAGE,
            hint="to run a plan without one: `graphchat plan run NAME`",
        )
    import asyncio

    return asyncio.run(_workbench(args))


async def _workbench(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "home", None), model=args.model, needs="chat")
    log_path = settings.catalog_dir / "logs" / "workbench.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:  # the screen is the workbench's: stderr goes here

        def write(line: str) -> None:
            log.write(line + "\n")
            log.flush()

        pane = PaneAsker()  # the one asker: questions open in the workbench pane
        host = open_host(settings, events=LineSink(write), here=lambda events: pane)
        try:
            bench = launch.prepare(
                settings,
                host.catalog,
                target=args.target,
                thread=args.from_thread or None,
                from_thread=args.from_thread is not None,
                asker=host.asker,
            )
            await host.warm_up()
            await launch.show(bench)
        finally:
            await host.aclose()
    return 0
