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
    parser.add_argument(
        "--answers",
        metavar="F",
        help="answer questions from a YAML/JSON map; others are asked on the terminal",
    )
    parser.add_argument("--yes", action="store_true", help="approve every sensitive tool call of this run")
    parser.set_defaults(func=run)


# Piped stdin is put in the message; more than this is refused (`yes | graphchat ask` would
# otherwise fill the memory, and no model takes 4 million characters in one message).
MAX_STDIN_CHARS = 4_000_000


def _message_with_stdin(message: str) -> str:
    """Piped stdin (not a terminal) is appended to the message as context."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or stdin.isatty():
        return message
    data = stdin.read(MAX_STDIN_CHARS + 1)  # never more than the limit in memory
    if len(data) > MAX_STDIN_CHARS:
        from graphchat.errors import EXIT_USAGE, GraphchatError

        raise GraphchatError(
            f"piped input is too long: ask reads at most {MAX_STDIN_CHARS:,} characters from stdin",
            EXIT_USAGE,
            hint="pipe a smaller part (head -c, a grep), or give the file's path in the message for a tool to read",
        )
    if not data.strip():
        return message
    if not message.strip():  # `… | graphchat ask ""`: the piped text is the question
        return data.strip()
    return f"{message}\n\n{STDIN_CONTEXT_HEADER}\n{data.rstrip()}"


def run(args: argparse.Namespace) -> int:
    from graphchat.host import load_settings

    # No model configured: exit 2 before anything starts; litellm imports meanwhile.
    settings = load_settings(getattr(args, "home", None), model=args.model, needs="chat")
    message = _message_with_stdin(args.message)
    if not message.strip():
        from graphchat.errors import EXIT_USAGE, GraphchatError

        raise GraphchatError(
            "nothing to ask: the message is empty", EXIT_USAGE, hint='graphchat ask "your question"'
        )
    import asyncio

    return asyncio.run(_ask(args, settings, message))


async def _ask(args: argparse.Namespace, settings: Any, message: str) -> int:
    from graphchat.cli.output import print_json, warn
    from graphchat.host import open_host

    host = open_host(settings, answers=args.answers)
    try:
        thread = host.continued(args.thread)
        if thread is None and args.thread is not None:
            warn("there is no thread to continue yet: starting a new one")
        session = host.session(thread, model_override=args.model, assume_yes=args.yes)
        session.stream = not args.no_stream
        await host.warm_up()
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
            from graphchat.display import safe

            # On a terminal a person reads it: escaped; on a pipe the answer stays byte-exact.
            sys.stdout.write(safe(result.content) if sys.stdout.isatty() else result.content)
            if sys.stdout.isatty() and not result.content.endswith("\n"):
                sys.stdout.write("\n")
            sys.stdout.flush()
        host.events.usage_summary(result.usage)  # after the answer: on a terminal, its own line
        return 0
    finally:
        await host.aclose()  # no server process is left behind, whatever happened


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
        from graphchat.display import safe

        self.stream.write(safe(text))  # a terminal acts on control characters: escaped
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
        from graphchat.display import safe

        said = safe(text.strip())
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
