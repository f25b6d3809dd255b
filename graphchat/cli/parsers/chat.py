"""`graphchat chat`: its arguments (its code: `cli/chat.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "chat",
        help="interactive session: history, multi-line input, slash commands, inline questions",
        description=(
            "Talk with the model; it calls tools and plans, showing each call live. Enter sends, "
            "Alt-Enter adds a line, /help lists the commands. Ctrl-C cancels the running turn, "
            "Ctrl-D leaves."
        ),
    )
    p.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the most recent thread",
    )
    p.add_argument(
        "--thread",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="continue thread ID (a bare --thread continues the most recent one, like -c)",
    )
    p.add_argument("-m", "--model", metavar="M", help="model for this session (litellm model string)")
    p.add_argument("--yes", action="store_true", help="approve every sensitive tool call for this session")
    p.add_argument(
        "--answers",
        metavar="F",
        help="answer questions from a YAML/JSON map whose keys are a question's exact text "
        "(or a plan ask step's id); others are asked inline",
    )
    p.set_defaults(func=Command("graphchat.cli.chat:run"))
