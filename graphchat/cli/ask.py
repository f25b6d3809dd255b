"""`graphchat ask MESSAGE`: one question; the answer streams to stdout and nothing else does."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from graphchat.cli.output import read_piped_text
from graphchat.errors import EXIT_USAGE, GraphchatError

STDIN_CONTEXT_HEADER = "Context (piped input):"


# Piped stdin is put in the message; more than this is refused (`yes | graphchat ask` would
# otherwise fill the memory, and no model takes 4 million characters in one message).
MAX_STDIN_CHARS = 4_000_000


def _message_with_stdin(message: str) -> str:
    """Piped stdin (not a terminal) is appended to the message as context."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or stdin.isatty():
        return message

    # binary input or more than the limit: a usage error, nothing written
    data = _read_with_notice(stdin, lambda s: read_piped_text(s, limit=MAX_STDIN_CHARS))
    if not data.strip():
        if message.strip() and _person_reads_stderr():
            sys.stderr.write("note: piped stdin was empty; asking the message alone\n")
        return message
    if not message.strip():  # `… | graphchat ask ""`: the piped text is the question
        return data.strip()
    return f"{message}\n\n{STDIN_CONTEXT_HEADER}\n{data.rstrip()}"


def _person_reads_stderr() -> bool:
    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.ci import jsonl_events

    err = sys.stderr
    return err is not None and err.isatty() and not jsonl_events()


def _read_with_notice(stdin: Any, read: Any) -> str:
    """Read piped stdin whole; when that takes over a second (a pipe nobody closes), say so on
    a terminal, so a waiting `ask` never looks hung."""
    import threading

    timer = None
    if _person_reads_stderr():

        def notice() -> None:
            sys.stderr.write("reading stdin… (it is still open: end it with Ctrl-D, or pipe a file)\n")
            sys.stderr.flush()

        timer = threading.Timer(1.0, notice)
        timer.daemon = True
        timer.start()
    try:
        return str(read(stdin))
    finally:
        if timer is not None:
            timer.cancel()


def _thread_flags(args: argparse.Namespace) -> None:
    """`-c` is `--thread` without an id. `ask --thread "and the docs?"` (the message taken for a
    thread id) is told so, naming -c, before anything starts."""
    if args.continue_latest:
        if args.thread:
            raise GraphchatError(
                "-c continues the latest thread; it cannot be used with --thread ID", EXIT_USAGE
            )
        args.thread = ""


def _message_taken_for_a_thread(args: argparse.Namespace, settings: Any) -> None:
    """`ask --thread "and the docs?"`: argparse gave the message to --thread."""
    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.threads.store import ThreadStore

    try:
        ThreadStore(settings.threads_dir).resolve(args.thread)
        known = True
    except GraphchatError:
        known = False
    if known:
        raise GraphchatError(
            "the question is missing", EXIT_USAGE, hint='usage: graphchat ask --thread=ID "your question"'
        )
    raise GraphchatError(
        f"there is no thread {args.thread!r} (--thread takes a thread id)",
        EXIT_USAGE,
        hint=f"to continue the latest thread: graphchat ask -c {_quoted(args.thread)}",
    )


def _quoted(text: str) -> str:
    import shlex

    return shlex.quote(text)


def run(args: argparse.Namespace) -> int:
    # Until the turn is handed to a warm helper, import only what that needs (the warm client's
    # budget: tests/warm/test_wire_json.py); the turn's own modules come after.
    _thread_flags(args)
    _attachments(args)
    if args.message is None and args.thread:
        # `ask` hands its turn to a warm helper before it imports the turn's modules
        from graphchat.host import load_settings

        _message_taken_for_a_thread(args, load_settings(getattr(args, "home", None)))
    piped = None
    if args.message is None:  # the question can only come from stdin: a usage error before all else
        piped = "" if sys.stdin is None or sys.stdin.isatty() else _message_with_stdin("")
        if not piped.strip():
            raise GraphchatError(
                "the question is missing",
                EXIT_USAGE,
                hint='usage: graphchat ask [-c | --thread=ID] "your question" (or pipe text into it)',
            )

    # This workspace's warm helper, when one runs, takes the question (graphchat.warm).
    from graphchat.cli.front import TerminalFront

    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.warm.client import hand_over

    front = TerminalFront()
    turn_flags = flags(args)

    def read_message() -> str:
        text = piped if piped is not None else _message_with_stdin(args.message)
        check_message(text)
        return text

    # -v/GRAPHCHAT_LOG: the logs are this process's, so the turn runs here (graphchat.logs)
    logging = bool(getattr(args, "verbose", 0)) or any(
        os.environ.get(v) for v in ("GRAPHCHAT_LOG", "GRAPH_LOG")
    )
    code, message = (None, None) if logging else hand_over(args, turn_flags, read_message, front)
    if code is not None:
        return code
    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.host import load_settings
    from graphchat.runs.turn import ask_turn

    # No model configured: exit 2 before anything starts; litellm imports meanwhile.
    settings = load_settings(getattr(args, "home", None), model=args.model, needs="chat")
    if message is None:
        message = piped if piped is not None else _message_with_stdin(args.message)
    check_message(message)
    import asyncio

    code = asyncio.run(ask_turn(settings, turn_flags, message, args.thread, front))
    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.warm.control import start_in_background

    start_in_background(settings)  # settings.warm: auto — the next questions go to a warm helper
    return code


def _attachments(args: argparse.Namespace) -> None:
    """`--attach SERVER:URI`: a usage error before anything starts when one is not that."""
    refs = getattr(args, "attach", None) or []
    if not refs:
        return
    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.catalog.mcp.features import parse_attach

    for ref in refs:
        parse_attach(ref)


def check_message(message: str) -> None:
    if not message.strip():
        raise GraphchatError(
            "nothing to ask: the message is empty",
            EXIT_USAGE,
            hint='usage: graphchat ask [-c | --thread=ID] "your question" (or pipe text into it)',
        )


def flags(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that change what a turn does (kept in a parked turn's record, and handed to a
    warm helper with the question)."""
    # `ask` hands its turn to a warm helper before it imports the turn's modules
    from graphchat.ci import memory_storage

    return {
        "json": bool(args.json),
        "yes": bool(args.yes),
        "model": args.model,
        "answers": os.path.abspath(args.answers) if args.answers else None,
        "no_stream": bool(args.no_stream),
        "park": not getattr(args, "no_park", False) and not memory_storage(),  # no run record kept
        "home": getattr(args, "home", None),
        "wait": not getattr(args, "no_wait", False),
        "attach": list(getattr(args, "attach", None) or []),
    }


class StdoutWriter:
    """The answer's text on stdout, and nothing else there.

    On a terminal the text streams as it arrives: finished markdown blocks are printed for
    good, the block still being written is shown live below them (the growing tail, redrawn
    at each piece of text, as the chat shows it); text the model wrote before calling tools
    (narration) is ended with its own line break, so a tool line never glues to it. Elsewhere
    (a pipe, a file) each round's text is held until the round ends and it is known to be
    the answer (no tool call follows), then written at once: narration goes to stderr
    (dimmed on a terminal; a `narration` event on a JSONL sink), so stdout is the final
    answer byte for byte, ended with a newline when the answer lacks one.
    """

    def __init__(self, events: Any = None) -> None:
        self.events = events  # the command's activity sink
        self.stream = sys.stdout
        self.tty = self.stream.isatty()
        self.last = ""
        self.held: list[str] = []
        self.markdown: Any = None
        if self.tty and os.environ.get("TERM") != "dumb":
            self.markdown = LiveMarkdown(self.stream)  # rendered as the chat renders it

    def write(self, text: str) -> None:
        if not self.tty:
            self.held.append(text)
            return
        # `ask` hands its turn to a warm helper before it imports the turn's modules
        from graphchat.display import safe

        if self.markdown is not None:
            self.markdown.write(safe(text))  # a terminal acts on control characters: escaped
            self.stream.flush()
            return
        self.stream.write(safe(text))  # a terminal acts on control characters: escaped
        self.stream.flush()
        self.last = text[-1:] or self.last

    def narration(self, text: str) -> None:
        """The round's text was narration: tools run next."""
        if self.tty:
            if self.markdown is not None:
                self.markdown.end()  # printed whole, ending its line, before the tool line
                self.stream.flush()
                return
            if self.last and self.last != "\n":
                self.stream.write("\n")
                self.stream.flush()
                self.last = "\n"
            return
        self.held.clear()
        if self.events is not None and not self.events.human:  # JSONL: stderr stays JSON lines
            if text.strip():
                self.events.emit("narration", text=text.strip())
            return
        # `ask` hands its turn to a warm helper before it imports the turn's modules
        from graphchat.display import safe

        said = safe(text.strip())
        if said:
            err = sys.stderr
            paint = err.isatty() and "NO_COLOR" not in os.environ
            err.write(f"\033[2m{said}\033[0m\n" if paint else f"{said}\n")
            err.flush()

    def finish(self, complete: bool = True) -> None:
        """The answer ended; `complete` False: it broke off (an error, an interrupt), and text
        held back for a pipe is dropped rather than passed off as the answer."""
        if self.markdown is not None:
            self.markdown.end()
            self.stream.flush()
            return
        if self.held and complete:
            answer = "".join(self.held)
            self.stream.write(answer)
            self.last = answer[-1:] or self.last
        self.held.clear()
        if self.last and self.last != "\n" and (complete or self.tty):
            self.stream.write("\n")
            self.last = "\n"
        self.stream.flush()


class LiveMarkdown:
    """Markdown streamed on a terminal: finished blocks printed once (MarkdownStream), the
    block still growing drawn below them in a transient region, cropped to the screen, and
    redrawn at every piece of text (never from a timer: the same text gives the same bytes,
    warm or local). What stays on the screen is the whole text rendered at once."""

    def __init__(self, stream: Any) -> None:
        # `ask` hands its turn to a warm helper before it imports the turn's modules
        from graphchat.chat.render import MarkdownStream

        self.blocks = MarkdownStream(stream)
        self.console = self.blocks.console
        self.live: Any = None

    def write(self, text: str) -> None:
        self.blocks.write(text)
        tail = self.blocks.pending
        if not tail.strip():
            if self.live is not None:
                self.live.update("", refresh=True)
            return
        # `ask` hands its turn to a warm helper before it imports the turn's modules
        from graphchat.chat.render import CODE_THEME, TailView

        view = TailView(
            tail,
            [],
            max_lines=self.console.height - 2,
            code_theme=CODE_THEME,
            gap=bool(self.blocks.segment.strip()),
        )
        if self.live is None:
            from rich.live import Live

            self.live = Live(
                view,
                console=self.console,
                auto_refresh=False,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                vertical_overflow="crop",
            )
            self.live.start(refresh=True)
        else:
            self.live.update(view, refresh=True)

    def end(self) -> None:
        """The tail's region goes; what was pending is printed for good."""
        if self.live is not None:
            live, self.live = self.live, None
            live.update("", refresh=False)
            live.stop()
        self.blocks.end()
