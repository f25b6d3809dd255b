"""`graphchat workbench plan [NAME|PATH]` (alias `wb`): the full-screen plan workbench."""

from __future__ import annotations

import argparse

from graphchat.errors import EXIT_USAGE, GraphchatError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "workbench",
        aliases=["wb"],
        help="full-screen plan workbench: a chat agent edits a plan draft beside its step tree",
        description="Full-screen workbenches (they need a terminal).",
    )
    wsub = p.add_subparsers(dest="workbench_command", metavar="WHAT")
    plan = wsub.add_parser(
        "plan",
        help="edit, validate, run and save a plan with a chat agent beside it",
        description=(
            "Two panes: the chat agent (the chat's model and catalog plus workbench__* tools that "
            "edit the draft) and the plan / context / run tabs. Keys: v validate, r run, g debug run "
            "(pauses before each call, or only at breakpoints), b breakpoint on the selected step, "
            "u undo, Ctrl-S save, q quit. Without NAME|PATH: a new draft."
        ),
    )
    plan.add_argument(
        "target", nargs="?", metavar="NAME|PATH", help="the plan to open (default: a new draft)"
    )
    plan.add_argument(
        "--from-thread",
        nargs="?",
        const="",
        metavar="ID",
        help="freeze a chat's thread (the latest without ID) as `plan freeze` does and open it "
        "as an unsaved draft",
    )
    plan.add_argument("-m", "--model", metavar="M", help="model for the agent (litellm model string)")
    plan.set_defaults(func=run)


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
    from graphchat.host import load_settings, open_host
    from graphchat.workbench import launch
    from graphchat.workbench.bench import LineSink
    from graphchat.workbench.pane_asker import PaneAsker

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
