"""`graphchat chat`: the interactive session (prompt_toolkit input, rich output)."""

from __future__ import annotations

import argparse

HISTORY_FILE = ".graphchat_history"


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
        "--thread",
        nargs="?",
        const="",
        default=None,
        metavar="ID",
        help="continue a thread (the latest one when no ID is given)",
    )
    p.add_argument("--model", metavar="M", help="model for this session (litellm model string)")
    p.add_argument("--yes", action="store_true", help="approve every sensitive tool call for this session")
    p.add_argument(
        "--answers", metavar="F", help="answer questions from a YAML/JSON map; others are asked inline"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from graphchat.errors import EXIT_USAGE, GraphchatError

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise GraphchatError(
            "chat needs a terminal", EXIT_USAGE, hint='for scripts use `graphchat ask "…"` (or pipe into it)'
        )
    import asyncio

    return asyncio.run(_chat(args))


async def _chat(args: argparse.Namespace) -> int:
    import asyncio

    from graphchat.agent.session import Session
    from graphchat.asks import ScriptedAsker, load_answers
    from graphchat.catalog.build import build_catalog
    from graphchat.chat.app import ChatApp, close_quietly, print_resume_hint
    from graphchat.chat.asker import ChatAsker
    from graphchat.chat.sink import ChatSink
    from graphchat.chat.ui import ChatUI
    from graphchat.threads.redact import settings_secrets
    from graphchat.threads.store import ThreadStore
    from graphchat.workspace import load_settings

    settings = load_settings(getattr(args, "home", None), model_override=args.model)
    settings.model_for("chat")  # no model configured: exit 2 before the screen is taken
    from graphchat.llm.runtime import preload_in_background

    preload_in_background()  # a model call is all but certain: import litellm while the person types
    answers = load_answers(args.answers) if args.answers else None
    store = ThreadStore(settings.threads_dir, secrets=settings_secrets(settings))
    thread = store.continued(args.thread)

    ui = ChatUI(history_path=settings.workspace / HISTORY_FILE)
    sink = ChatSink(ui)
    asker = ChatAsker(ui, events=sink)
    if answers is not None:
        asker = ScriptedAsker(answers, fallback=asker, events=sink)  # unlisted: asked inline
    catalog = build_catalog(settings, events=sink)
    session = Session(
        settings,
        thread_store=store,
        thread=thread,
        catalog=catalog,
        asker=asker,
        events=sink,
        model_override=args.model,
        assume_yes=args.yes,
    )
    app = ChatApp(ui, session, catalog, settings)
    if thread is not None:
        ui.print(f"continuing thread {thread.id}", style="dim", markup=False)
    elif args.thread is not None:
        ui.print("no thread yet: starting a new one", style="dim", markup=False)
    ui.print("/help for commands · Ctrl-D to leave", style="dim", markup=False)
    try:
        await app.run()
    except asyncio.CancelledError:
        pass
    finally:
        await close_quietly(session, catalog)
        print_resume_hint(session)
    return 0
