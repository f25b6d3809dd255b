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
    parser.set_defaults(func=run)


# Piped stdin is put in the message; more than this is refused (`yes | graphchat ask` would
# otherwise fill the memory, and no model takes 4 million characters in one message).
MAX_STDIN_CHARS = 4_000_000


def _message_with_stdin(message: str) -> str:
    """Piped stdin (not a terminal) is appended to the message as context."""
    stdin = sys.stdin
    if stdin is None or stdin.closed or stdin.isatty():
        return message
    from graphchat.cli.output import read_piped_text

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
    from graphchat.errors import EXIT_USAGE, GraphchatError

    if args.continue_latest:
        if args.thread:
            raise GraphchatError(
                "-c continues the latest thread; it cannot be used with --thread ID", EXIT_USAGE
            )
        args.thread = ""


def _message_taken_for_a_thread(args: argparse.Namespace, settings: Any) -> None:
    """`ask --thread "and the docs?"`: argparse gave the message to --thread."""
    from graphchat.errors import EXIT_USAGE, GraphchatError
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
    from graphchat.host import load_settings

    _thread_flags(args)
    _attachments(args)
    if args.message is None and args.thread:
        _message_taken_for_a_thread(args, load_settings(getattr(args, "home", None)))
    piped = None
    if args.message is None:  # the question can only come from stdin: a usage error before all else
        piped = "" if sys.stdin is None or sys.stdin.isatty() else _message_with_stdin("")
        if not piped.strip():
            from graphchat.errors import EXIT_USAGE, GraphchatError

            raise GraphchatError(
                "the question is missing",
                EXIT_USAGE,
                hint='usage: graphchat ask [-c | --thread=ID] "your question" (or pipe text into it)',
            )

    # This workspace's warm helper, when one runs, takes the question (graphchat.warm).
    from graphchat.warm.client import hand_over

    # -v/GRAPHCHAT_LOG: the logs are this process's, so the turn runs here (graphchat.logs)
    logging = bool(getattr(args, "verbose", 0)) or any(
        os.environ.get(v) for v in ("GRAPHCHAT_LOG", "GRAPH_LOG")
    )
    code, message = (None, None) if logging else hand_over(args, piped)
    if code is not None:
        return code
    # No model configured: exit 2 before anything starts; litellm imports meanwhile.
    settings = load_settings(getattr(args, "home", None), model=args.model, needs="chat")
    if message is None:
        message = piped if piped is not None else _message_with_stdin(args.message)
    check_message(message)
    import asyncio

    code = asyncio.run(ask_turn(settings, flags(args), message, args.thread, TerminalFront()))
    from graphchat.warm.control import start_in_background

    start_in_background(settings)  # settings.warm: auto — the next questions go to a warm helper
    return code


def _attachments(args: argparse.Namespace) -> None:
    """`--attach SERVER:URI`: a usage error before anything starts when one is not that."""
    from graphchat.catalog.mcp_features import parse_attach

    for ref in getattr(args, "attach", None) or []:
        parse_attach(ref)


def check_message(message: str) -> None:
    if not message.strip():
        from graphchat.errors import EXIT_USAGE, GraphchatError

        raise GraphchatError(
            "nothing to ask: the message is empty",
            EXIT_USAGE,
            hint='usage: graphchat ask [-c | --thread=ID] "your question" (or pipe text into it)',
        )


def flags(args: argparse.Namespace) -> dict[str, Any]:
    """The flags that change what a turn does (kept in a parked turn's record, and handed to a
    warm helper with the question)."""
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


def _open(settings: Any, flags: dict[str, Any], front: Any, catalog: Any = None) -> tuple[Any, Any]:
    """The host of `ask`; headless (nobody can answer here), its asker parks what it cannot
    answer (issue 9). Returns (host, the parking asker or None). `catalog`: a catalog kept by
    a warm helper (the host uses it and leaves it running)."""
    from graphchat.host import open_host

    if not flags.get("park"):
        return open_host(
            settings, events=front.sink(), here=front.here, answers=flags.get("answers"), catalog=catalog
        ), None
    from graphchat.parked import ParkingAsker
    from graphchat.requests import RequestStore

    made: list[ParkingAsker] = []

    def here(sink: Any) -> Any:
        inner = front.here(sink)
        if inner.can_answer:
            return inner
        made.append(ParkingAsker(inner, RequestStore(settings.workspace), sink))
        return made[0]

    host = open_host(settings, events=front.sink(), answers=flags.get("answers"), here=here, catalog=catalog)
    return host, (made[0] if made else None)


def refuse_parked_thread(thread: Any, workspace: Any = None, home: str | None = None) -> None:
    """`ask --thread ID` / `ask -c` on a thread whose turn waits for a person: exit 1 naming the
    request, its question and the exact command that answers it (an answered one: the command
    that resumes it). A new message would leave the waiting call without its answer."""
    from graphchat.errors import GraphchatError
    from graphchat.parked import waiting_on

    waiting = waiting_on(thread)
    if not waiting:
        return
    ids = ", ".join(waiting)
    request = None
    if workspace is not None:
        from graphchat.requests import RequestStore

        request = RequestStore(workspace).find(waiting[0])
    if request is None:
        hint = f"answer it first: graphchat answer {waiting[0]} VALUE (or permit/deny/decline it)"
        raise GraphchatError(f"thread {thread.id} waits on request {ids}", hint=hint)
    from graphchat.requests_text import answer_command, answer_help

    where = f" --home {home}" if home else ""
    if request.state == "open":
        lines = [f"answer it: {answer_command(request.public(), home)}"]
        lines += [f"  {line}" for line in answer_help(request.public(), home)]
        lines.append(f"(or in a chat: graphchat{where} chat --thread {thread.id})")
    else:
        lines = [f"it was {request.state}; resume the turn: graphchat{where} resume {request.id}"]
    raise GraphchatError(
        f"thread {thread.id} waits on request {ids}: {request.question}", hint="\n  ".join(lines)
    )


async def ask_turn(
    settings: Any,
    flags: dict[str, Any],
    message: str,
    thread_flag: str | None,
    front: Any,
    *,
    catalog: Any = None,
    cwd: str | None = None,
) -> int:
    """One `ask` turn on `settings`, shown through `front` (this terminal: TerminalFront; a
    warm helper's client: graphchat.warm.helper.RemoteFront). `catalog`: the helper's running
    catalog; `cwd`: the asking process's working directory (a helper never changes its own)."""
    import itertools

    from graphchat.catalog.base import TURN_CALL_IDS

    TURN_CALL_IDS.set(itertools.count(1))  # this turn's tool calls: c1, c2, … (a helper runs many)
    host, parking = _open(settings, flags, front, catalog)
    try:
        thread = host.continued(thread_flag)
        if thread is None and thread_flag is not None:
            front.warn("there is no thread to continue yet: starting a new one")
        if thread is not None:
            refuse_parked_thread(thread, settings.workspace, flags.get("home"))
        session = host.session(thread, model_override=flags.get("model"), assume_yes=bool(flags.get("yes")))
        session.stream = not flags["no_stream"]
        session.wait_for_thread = flags.get("wait", True)
        if parking is not None:
            parking.thread_id = session.thread.id
        await host.warm_up()
        if flags.get("attach"):  # the resources' contents go into the message (and the thread)
            from graphchat.catalog.mcp_features import parse_attach, with_attachments

            refs = [parse_attach(ref) for ref in flags["attach"]]
            message = await with_attachments(host.catalog, message, refs, settings.max_tool_result_chars)
        return await _turn(host, session, flags, lambda **kw: session.turn(message, **kw), front, cwd=cwd)
    finally:
        await host.aclose()  # no server process is left behind, whatever happened


async def _turn(
    host: Any,
    session: Any,
    flags: dict[str, Any],
    start: Any,
    front: Any,
    record: Any = None,
    cwd: str | None = None,
) -> int:
    """Run (or resume) the turn and present it: the answer on stdout; a parked turn exit 5."""
    from graphchat.agent.session import TurnParked

    streaming = not (flags["json"] or flags["no_stream"])
    front.begin(streaming)
    try:
        result = await start(
            on_text=front.text if streaming else None,
            on_tools=front.narration if streaming else None,
        )
    except TurnParked as parked:
        front.finish()
        return park_turn(host, flags, parked, front, record, cwd=cwd)
    except BaseException:
        # on a terminal the error line must not start after a partial answer; elsewhere a
        # partial answer is not the deliverable: stdout stays empty (the thread keeps it)
        front.finish(complete=False)
        raise
    if record is not None:
        record.delete()  # the resumed turn ended
    payload = None
    if flags["json"]:
        payload = {
            "content": result.content,
            "thread_id": result.thread_id,
            "tool_calls_made": result.tool_calls_made,
            "usage": result.usage,
        }
    front.answer(result.content, payload)
    host.events.usage_summary(result.usage)  # after the answer: on a terminal, its own line
    return 0


class TerminalFront:
    """Where an `ask` turn shows itself in this process: the answer on stdout (and nothing
    else there), activity and errors on stderr, questions on the terminal when there is one.
    A warm helper runs the same turn against a RemoteFront, whose client replays every call
    on this class: the same code renders both."""

    def __init__(self) -> None:
        self.writer: _StdoutWriter | None = None
        self._sink: Any = None

    def sink(self) -> Any:
        """This process's activity sink: terminal lines on stderr, or JSONL (one, made once)."""
        if self._sink is None:
            from graphchat.events import sink_for_environment

            self._sink = sink_for_environment()
        return self._sink

    def here(self, sink: Any) -> Any:
        from graphchat.asks import host_asker

        return host_asker(sink)

    def begin(self, streaming: bool) -> None:
        self.writer = _StdoutWriter(self.sink()) if streaming else None

    def text(self, text: str) -> None:
        if self.writer is not None:
            self.writer.write(text)

    def narration(self, text: str) -> None:
        if self.writer is not None:
            self.writer.narration(text)

    def finish(self, complete: bool = True) -> None:
        if self.writer is not None:
            self.writer.finish(complete)

    def answer(self, content: str, payload: dict[str, Any] | None) -> None:
        """The turn's answer: the --json object, the end of the streamed text, or the text."""
        if payload is not None:
            from graphchat.cli.output import print_json

            print_json(payload)
        elif self.writer is not None:
            self.writer.finish()
        else:
            sys.stdout.write(content)
            if content and not content.endswith("\n"):
                sys.stdout.write("\n")
            sys.stdout.flush()

    def warn(self, message: str) -> None:
        from graphchat.cli.output import warn

        warn(message)

    def parked(self, requests: list[dict[str, Any]], json: bool, home: str | None) -> int:
        from graphchat.cli.plan import report_parked

        return report_parked(requests, json=json, home=home)


def park_turn(
    host: Any,
    flags: dict[str, Any],
    parked: Any,
    front: Any,
    record: Any = None,
    *,
    cwd: str | None = None,
) -> int:
    """Keep a parked turn's position (the calls, which wait, the others' results) and report
    it (exit 5)."""
    from graphchat.parked import RunRecord
    from graphchat.requests import RequestStore

    store = RequestStore(host.settings.workspace)
    round = parked.round
    data = {
        "command": "ask",
        "flags": flags,
        "cwd": cwd or os.getcwd(),
        "workspace": str(host.settings.workspace),
        "thread": parked.thread_id,
        "calls": [call.to_event() for call in round.calls],
        "parked": {str(k): r["id"] for k, r in round.parked.items()},
        "held": {str(k): {"value": r.value, "is_error": r.is_error} for k, r in round.held.items()},
        "requests": [round.parked[k]["id"] for k in sorted(round.parked)],
    }
    if record is None:
        record = RunRecord.new(store, data)
    else:
        record.data = data
    record.save()
    for request_id in data["requests"]:
        request = store.get(request_id)
        request.run = record.id
        store.save(request)
    requests = [store.get(i).public() for i in data["requests"]]
    return int(front.parked(requests, flags["json"], flags.get("home")))


async def _resumed_results(host: Any, store: Any, record: Any) -> list[dict[str, Any]]:
    """The results of the calls a parked turn waited on, in call order: an approved call runs
    now, a refused one is a refusal, an answered `ask_user` gets its answer as typed."""
    from graphchat.catalog.approvals import remember_allow
    from graphchat.catalog.base import CallContext, ToolResult
    from graphchat.threads import lines as ev

    data = record.data
    calls = data["calls"]
    parked = {int(k): v for k, v in data["parked"].items()}
    held = {int(k): v for k, v in data["held"].items()}
    events: list[dict[str, Any]] = []
    for k in range(min(parked), len(calls)):
        call = calls[k]
        name = call["name"]
        if k in held:
            result = ToolResult(held[k]["value"], bool(held[k]["is_error"]))
        else:
            request = store.get(parked[k])
            if request.kind == "approval":
                if request.state == "answered":
                    if isinstance(request.answer, dict) and request.answer.get("always"):
                        remember_allow(host.settings, name)
                    import json

                    try:
                        arguments = json.loads(call.get("arguments") or "{}")
                    except ValueError:
                        arguments = {}
                    ctx = CallContext(asker=host.asker, events=host.events, assume_yes=True, surface="agent")
                    result = await host.catalog.call(name, arguments, ctx)
                else:
                    why = f" ({request.reason})" if request.reason and request.reason != "denied" else ""
                    result = ToolResult.error(
                        f"{name} was not run: the user refused it{why}. "
                        "Do not retry it; continue without it or tell the user what you wanted to do."
                    )
            elif request.state == "answered":
                result = ToolResult({"answer": request.answer, "answered": True})
            else:
                result = ToolResult({"answered": False, "reason": request.state})
        events.append(
            dict(ev.tool_result(call.get("id") or "", name, result.to_text(), is_error=result.is_error))
        )
    return events


def resume_ask(store: Any, record: Any) -> int:
    """Resume a parked `ask` turn in this process (issue 9)."""
    import asyncio

    from graphchat.host import load_settings

    flags = record.data["flags"]
    settings = load_settings(record.data["workspace"], model=flags.get("model"), needs="chat")

    async def go() -> int:
        front = TerminalFront()
        host, parking = _open(settings, flags, front)
        try:
            thread = host.threads.open(record.data["thread"])
            session = host.session(
                thread, model_override=flags.get("model"), assume_yes=flags.get("yes", False)
            )
            session.stream = not flags.get("no_stream")
            if parking is not None:
                parking.thread_id = thread.id
            await host.warm_up()
            results = await _resumed_results(host, store, record)
            return await _turn(
                host, session, flags, lambda **kw: session.resume(results, **kw), front, record
            )
        finally:
            await host.aclose()

    return asyncio.run(go())


class _StdoutWriter:
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
