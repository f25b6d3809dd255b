"""`graphchat chat`: the interactive session (prompt_toolkit input, rich output)."""

from __future__ import annotations

import argparse
from typing import Any

from graphchat.asks import TURN_FRAMES, Question, ask_by_lines
from graphchat.catalog.approvals import OPTIONS, argument_text
from graphchat.chat.app import ChatApp, close_quietly, print_resume_hint
from graphchat.chat.asker import ChatAsker, ChatLineReader
from graphchat.chat.sink import ChatSink
from graphchat.chat.ui import ChatUI
from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.host import load_settings, open_host
from graphchat.runs.answers import settle
from graphchat.runs.parked import RunRecord, waiting_on
from graphchat.runs.requests import AlreadySettled, RequestStore
from graphchat.runs.turn import end_run, keep_frames, resumed_results
from graphchat.threads.lines import text_of

HISTORY_FILE = ".graphchat_history"


def run(args: argparse.Namespace) -> int:
    import sys

    if args.continue_latest:
        if args.thread:
            raise GraphchatError(
                "-c continues the latest thread; it cannot be used with --thread ID", EXIT_USAGE
            )
        args.thread = ""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise GraphchatError(
            "chat needs a terminal", EXIT_USAGE, hint='for scripts use `graphchat ask "…"` (or pipe into it)'
        )
    import asyncio

    return asyncio.run(_chat(args))


def recap_lines(events: list[dict], width: int = 100, lines: int = 3) -> list[str]:
    """The last exchange of a thread, shortened: `you: …` and `model: …` (a resumed chat
    starts where the person left it)."""
    last_user = max((i for i, e in enumerate(events) if e.get("kind") == "user"), default=None)
    if last_user is None:
        return []
    answer = ""
    for event in events[last_user + 1 :]:
        if event.get("kind") == "assistant" and event.get("content"):
            answer = str(event["content"])

    def short(label: str, text: str) -> list[str]:
        rows = [r for r in text.strip().splitlines() if r.strip()][:lines] or [""]
        out = [f"{label}{rows[0]}"] + [" " * len(label) + r for r in rows[1:]]
        out = [r if len(r) <= width else r[: width - 1] + "…" for r in out]
        if len(text.strip().splitlines()) > lines:
            out.append(" " * len(label) + "…")
        return out

    recap = short("  you: ", text_of(events[last_user].get("content")))
    if answer:
        recap += short("model: ", answer)
    return recap


async def _chat(args: argparse.Namespace) -> int:
    import asyncio

    # No model configured: exit 2 before the screen is taken; litellm imports while the person types.
    settings = load_settings(getattr(args, "home", None), model=args.model, needs="chat")
    ui = ChatUI(history_path=settings.workspace / HISTORY_FILE)
    sink = ChatSink(ui)
    # Questions the --answers file does not answer are asked inline.
    host = open_host(
        settings, events=sink, here=lambda events: ChatAsker(ui, events=events), answers=args.answers
    )
    thread = host.continued(args.thread)
    session = host.session(thread, model_override=args.model, assume_yes=args.yes)
    app = ChatApp(ui, session, host.catalog, settings)
    # prompt_toolkit: imported when used, not at start-up
    from graphchat.chat.complete import completer_for

    ui.prompt_session.completer = completer_for(app)
    model = session.model_config().model
    ui.print(f"graphchat · {model} · workspace {settings.workspace}", style="dim", markup=False)
    if thread is not None:
        ui.print(f"continuing thread {thread.id}", style="dim", markup=False)
        for line in recap_lines(thread.events()):
            ui.print(line, style="dim", markup=False)
    elif args.thread is not None:
        ui.print("no thread yet: starting a new one", style="dim", markup=False)
    ui.print("/help for commands · Tab completes · Ctrl-D to leave", style="dim", markup=False)
    if thread is not None:
        app.on_start = lambda: answer_waiting(app, host, session, thread)
    try:
        await app.run()
    except asyncio.CancelledError:
        pass
    finally:
        await close_quietly(host)
        print_resume_hint(session)
    return 0


async def answer_waiting(app: Any, host: Any, session: Any, thread: Any) -> None:
    """A continued thread whose turn waits for a person (a headless `ask` parked it): show the
    waiting question first, take the answer inline, and go on with the turn here — the model
    receives the answer. Not answered (Ctrl-D, a blank line): the request stays open and the
    chat goes on in a new thread, so the waiting call never gets a made-up result."""
    waiting = waiting_on(thread)
    if not waiting:
        return
    ui = app.ui
    store = RequestStore(host.settings.workspace)
    found = [store.find(i) for i in waiting]
    requests = [r for r in found if r is not None]
    first = found[0]
    record = RunRecord.load(store, first.run) if first is not None and first.run else None

    def elsewhere(why: str) -> None:
        ui.print(f"{why}; this chat goes on in a new thread", style="yellow", markup=False)
        session.new_thread()

    if record is None or len(requests) != len(found):
        elsewhere(f"thread {thread.id} waits on request {', '.join(waiting)}, whose run is gone")
        return
    ui.print(
        f"⏸ this thread waits for your answer (request {', '.join(waiting)})", style="yellow", markup=False
    )
    reader = ChatLineReader(ui)
    try:
        for request in requests:
            if request.state != "open":
                continue
            if request.kind == "approval":
                source = request.source or {}
                arguments = source.get("arguments")
                if not isinstance(arguments, dict):
                    arguments = {}
                question = Question(
                    request.question, options=list(OPTIONS), kind="approval", detail=argument_text(arguments)
                )
            else:
                question = Question(
                    request.question, schema=request.schema, options=request.options, hint=request.hint
                )
            answer = await ask_by_lines(question, reader)
            if not answer.answered:
                elsewhere(f"request {request.id} stays open (graphchat answer {request.id} VALUE)")
                return
            if request.kind != "approval":
                settle(store, request.id, "answered", answer.value)
            elif answer.value == "refuse":
                settle(store, request.id, "declined", {"approved": False}, reason="denied")
            else:
                settle(store, request.id, "answered", {"approved": True, "always": answer.value == "always"})
        record.lock(waiting[0])
    except (AlreadySettled, GraphchatError) as exc:
        elsewhere(f"request {waiting[0]}: {exc.message}")
        return

    async def resume() -> Any:
        await app.tools_ready()
        frames = keep_frames(host.settings, thread.id)  # a plan call it waited on resumes inside its frames
        try:
            results = await resumed_results(host, store, record)
        finally:
            TURN_FRAMES.reset(frames)
        end_run(record, 0)  # kept as finished; the thread holds the answers: the turn goes on in it
        return await session.resume(results, on_text=ui.on_text)

    await app.run_live(resume)
