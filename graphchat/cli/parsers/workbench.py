"""`graphchat workbench`: its arguments (its code: `cli/workbench.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


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
    plan.set_defaults(func=Command("graphchat.cli.workbench:run"))
