"""`graphchat ask`: its arguments (its code: `cli/ask.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "ask",
        help="ask one question; the answer streams to stdout",
        description="Ask one question. The answer streams to stdout; tool activity goes to stderr. "
        "Piped stdin is appended to the message as context.",
    )
    parser.add_argument("message", metavar="MESSAGE", nargs="?", help="the question")
    parser.add_argument(
        "-c",
        "--continue",
        dest="continue_latest",
        action="store_true",
        help="continue the most recent thread",
    )
    parser.add_argument(
        "--thread",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="continue thread ID (write --thread=ID; a bare --thread continues the most recent one, "
        "like -c); default: a new thread",
    )
    parser.add_argument(
        "--json", action="store_true", help="print {content, thread_id, tool_calls_made, usage}"
    )
    parser.add_argument("-m", "--model", metavar="M", help="model for this question (a litellm model string)")
    parser.add_argument("--no-stream", action="store_true", help="print the answer once it is complete")
    parser.add_argument(
        "--answers",
        metavar="F",
        help="answer questions from a YAML/JSON map whose keys are a question's exact text "
        "(or a plan ask step's id); others are asked on the terminal",
    )
    parser.add_argument("--yes", action="store_true", help="approve every sensitive tool call of this run")
    parser.add_argument(
        "--attach",
        action="append",
        default=[],
        metavar="SERVER:URI",
        help="attach an MCP server's resource to the message (repeatable; `graphchat mcp resources` lists them)",
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once if another process is running a turn on the thread",
    )
    parser.add_argument(
        "--no-park",
        action="store_true",
        help="a question or approval nobody here can answer is refused (instead of parking the turn, exit 5)",
    )
    parser.set_defaults(func=Command("graphchat.cli.ask:run"))
