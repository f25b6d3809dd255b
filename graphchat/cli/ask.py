"""`graphchat ask MESSAGE`: one question; the answer streams to stdout and nothing else does."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

STDIN_CONTEXT_HEADER = "Context (piped input):"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "ask",
        help="ask one question; the answer streams to stdout",
        description="Ask one question. The answer streams to stdout; tool activity goes to stderr. "
        "Piped stdin is appended to the message as context.",
    )
    parser.add_argument("message", metavar="MESSAGE", help="the question")
    parser.add_argument(
        "--thread",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="continue a thread: the most recent one, or ID (default: a new thread)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print {content, thread_id, tool_calls_made, usage}"
    )
    parser.add_argument("--model", metavar="M", help="model for this question (a litellm model string)")
    parser.add_argument("--no-stream", action="store_true", help="print the answer once it is complete")
    parser.add_argument("--answers", metavar="F", help="answers to questions, from a YAML/JSON file")
    parser.add_argument("--yes", action="store_true", help="approve every sensitive tool call of this run")
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="fail at once if another process is running a turn on the thread",
    )
    parser.set_defaults(func=run)


def _message_with_stdin(message: str) -> str:
    """Piped stdin (not a terminal) is appended to the message as context."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or stdin.isatty():
        return message
    data = stdin.read()
    if not data.strip():
        return message
    if not message.strip():  # `… | graphchat ask ""`: the piped text is the question
        return data.strip()
    return f"{message}\n\n{STDIN_CONTEXT_HEADER}\n{data.rstrip()}"


def run(args: argparse.Namespace) -> int:
    from graphchat.workspace import load_settings

    settings = load_settings(getattr(args, "home", None), model_override=args.model)
    settings.model_for("chat")  # no model configured: exit 2 before anything starts
    from graphchat.llm import preload_in_background

    preload_in_background()  # a model call is certain: overlap litellm's import with the rest
    message = _message_with_stdin(args.message)
    if not message.strip():
        from graphchat.errors import EXIT_USAGE, GraphchatError

        raise GraphchatError(
            "nothing to ask: the message is empty", EXIT_USAGE, hint='graphchat ask "your question"'
        )
    import asyncio

    return asyncio.run(_ask(args, settings, message))


async def _ask(args: argparse.Namespace, settings: Any, message: str) -> int:
    from graphchat.agent.session import Session
    from graphchat.asks import host_asker
    from graphchat.catalog.build import build_catalog
    from graphchat.cli.output import print_json, warn
    from graphchat.events import sink_for_environment
    from graphchat.threads.redact import settings_secrets
    from graphchat.threads.store import ThreadStore

    events = sink_for_environment()
    store = ThreadStore(settings.threads_dir, secrets=settings_secrets(settings))
    thread = store.continued(args.thread)
    if thread is None and args.thread is not None:
        warn("there is no thread to continue yet: starting a new one")
    asker = host_asker(answers_file=args.answers, events=events)
    catalog = build_catalog(settings, events=events)
    session = None
    try:
        session = Session(
            settings,
            thread_store=store,
            thread=thread,
            catalog=catalog,
            asker=asker,
            events=events,
            model_override=args.model,
            assume_yes=args.yes,
        )
        session.stream = not args.no_stream
        session.wait_for_thread = not args.no_wait
        await _warm_up_servers(catalog, events)
        streaming = not (args.json or args.no_stream)
        writer = _StdoutWriter() if streaming else None
        try:
            result = await session.turn(
                message,
                on_text=writer.write if writer else None,
                on_tools=writer.narration if writer else None,
            )
        except BaseException:
            if writer is not None:
                writer.finish()  # on a terminal, the error line must not start after a partial answer
            raise
        if args.json:
            print_json(
                {
                    "content": result.content,
                    "thread_id": result.thread_id,
                    "tool_calls_made": result.tool_calls_made,
                    "usage": result.usage,
                }
            )
        elif writer is not None:
            writer.finish()
        else:
            sys.stdout.write(result.content)
            if sys.stdout.isatty() and not result.content.endswith("\n"):
                sys.stdout.write("\n")
            sys.stdout.flush()
        events.usage_summary(result.usage)  # after the answer: on a terminal, its own line
        return 0
    finally:
        if session is not None:
            await session.aclose()
        await catalog.aclose()  # no server process is left behind, whatever happened


async def _warm_up_servers(catalog: Any, events: Any) -> None:
    """Start the workspace's MCP servers while litellm imports in the background.

    A tool round is the likely reason to ask, and a server start (0.3-2 s) overlapping the
    import is free, while one started at the first tool call adds to the answer's wait. The
    tool lists of servers not cached yet are awaited (the model must see their tools); the
    others warm up in the background. A server that fails to start is reported, not fatal.
    """
    for message in catalog.warnings:
        events.warning(message)
    catalog.prestart()
    for server, error in (await catalog.prepare()).items():
        events.warning(f"MCP server {server}: {error}")


class _StdoutWriter:
    """The answer's text on stdout, and nothing else there.

    On a terminal the text streams as it arrives; text the model wrote before calling tools
    (narration) is ended with its own line break, so a tool line never glues to it. Elsewhere
    (a pipe, a file) each round's text is held until it is known to be the answer: narration
    goes to stderr (dimmed on a terminal), so stdout is the final answer byte for byte.
    """

    def __init__(self) -> None:
        self.stream = sys.stdout
        self.tty = self.stream.isatty()
        self.last = ""
        self.held: list[str] = []

    def write(self, text: str) -> None:
        if not self.tty:
            self.held.append(text)
            return
        self.stream.write(text)
        self.stream.flush()
        self.last = text[-1:] or self.last

    def narration(self, text: str) -> None:
        """The round's text was narration: tools run next."""
        if self.tty:
            if self.last and self.last != "\n":
                self.stream.write("\n")
                self.stream.flush()
                self.last = "\n"
            return
        self.held.clear()
        said = text.strip()
        if said:
            err = sys.stderr
            paint = err.isatty() and "NO_COLOR" not in os.environ
            err.write(f"\033[2m{said}\033[0m\n" if paint else f"{said}\n")
            err.flush()

    def finish(self) -> None:
        if self.held:
            self.stream.write("".join(self.held))
            self.held.clear()
        if self.tty and self.last and self.last != "\n":
            self.stream.write("\n")
        self.stream.flush()
