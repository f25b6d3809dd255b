"""`graphchat threads list|show|rm|export`: look at, keep or delete past conversations."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.cli.output import print_json
from graphchat.display import safe
from graphchat.threads import lines as ev
from graphchat.threads.export import to_markdown, usage_line
from graphchat.threads.store import ThreadStore
from graphchat.workspace import find_workspace

SHOW_RESULT_CHARS = 600
SHOW_RESULT_LINES = 12
SHOW_ARGS_CHARS = 300
# A message longer than this is shown cut (rendering 10 MB of Markdown takes minutes);
# `threads export` has it whole.
SHOW_MESSAGE_CHARS = 50_000


def _store(args: argparse.Namespace) -> Any:
    return ThreadStore(find_workspace(getattr(args, "home", None)) / "threads")


def _local_time(ts: str) -> str:
    from datetime import datetime

    try:
        return datetime.fromisoformat(ts).astimezone().strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return ts[:16]


def run_list(args: argparse.Namespace) -> int:
    infos = _store(args).list()
    if args.json:
        print_json({"threads": [i.to_json() for i in infos], "count": len(infos)})
        return 0
    if not infos:
        print("no threads yet", file=sys.stderr)
        return 0

    rows = [
        f"{i.id}  {_local_time(i.updated_at):16}  {i.message_count:>5}  {safe(i.title or '(no title)', newlines=False)}"
        for i in infos
    ]
    sys.stdout.write("\n".join(rows) + "\n")
    return 0


def run_show(args: argparse.Namespace) -> int:
    thread = _store(args).open(args.id)
    events = thread.events()
    if args.json:
        print_json(events)
        return 0
    _render(thread.info(), events)
    return 0


def run_rm(args: argparse.Namespace) -> int:
    removed = _store(args).remove(args.id)
    print(f"removed thread {removed}", file=sys.stderr)
    return 0


def run_export(args: argparse.Namespace) -> int:
    thread = _store(args).open(args.id)
    events = thread.events()
    info = thread.info()
    if args.format == "json":
        print_json({**info.to_json(), "created_at": info.created_at, "events": events})
        return 0

    sys.stdout.write(safe(to_markdown(info, events)))  # a document for people: no control characters
    return 0


def _shorten(text: str, max_chars: int, max_lines: int) -> str:
    lines = text.splitlines()
    short = "\n".join(lines[:max_lines])[:max_chars]
    if len(short) < len(text.rstrip("\n")):
        short += f"\n… ({len(text) - len(short):,} more characters)"
    return short


def _message_view(text: str) -> str:
    """A message as `threads show` shows it: whole up to SHOW_MESSAGE_CHARS, then cut with a note."""
    if len(text) <= SHOW_MESSAGE_CHARS:
        return text
    left = len(text) - SHOW_MESSAGE_CHARS
    return (
        f"{text[:SHOW_MESSAGE_CHARS]}\n\n… ({left:,} more characters: `graphchat threads export` shows them)"
    )


def _render(info: Any, events: list[dict[str, Any]]) -> None:
    """The thread for a reader: user turns, assistant markdown, tool calls and shortened results."""
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.rule import Rule
    from rich.text import Text

    console = Console(highlight=False, soft_wrap=False)
    console.print(Text(safe(info.title or "(no title)"), style="bold"))
    console.print(
        Text(
            f"thread {info.id} · {info.message_count} message{'' if info.message_count == 1 else 's'}"
            f" · updated {_local_time(info.updated_at)}",
            "dim",
        )
    )
    for event in events:
        kind = event.get("kind")
        if kind == ev.USER:
            console.print(Rule(Text("you", style="bold cyan"), align="left", style="cyan"))
            console.print(Text(safe(_message_view(ev.text_of(event.get("content"))))))
        elif kind == ev.ASSISTANT:
            console.print(Rule(Text("assistant", style="bold green"), align="left", style="green"))
            if event.get("content"):
                console.print(Markdown(safe(_message_view(str(event["content"])))))
            for call in event.get("tool_calls") or []:
                if not isinstance(call, dict):
                    continue
                arguments = call.get("arguments")
                arguments = arguments if isinstance(arguments, str) else str(arguments)
                line = Text("→ ", style="yellow")
                line.append(safe(str(call.get("name", "")), newlines=False), style="bold yellow")
                line.append(" " + safe(_shorten(arguments, SHOW_ARGS_CHARS, 3)), style="yellow")
                console.print(line)
        elif kind == ev.TOOL_RESULT:
            failed = bool(event.get("is_error"))
            line = Text("✗ " if failed else "✓ ", style="red" if failed else "green")
            line.append(safe(str(event.get("name", "")), newlines=False), style="bold")
            if isinstance(event.get("ms"), int | float):
                line.append(f" {event['ms'] / 1000:.1f}s", style="dim")
            console.print(line)
            content = str(event.get("content", ""))
            console.print(Text(safe(_shorten(content, SHOW_RESULT_CHARS, SHOW_RESULT_LINES)), style="dim"))
        elif kind == ev.TURN_END:
            usage = usage_line(event)
            if usage:
                console.print(Text(usage, style="dim italic"))
        elif kind == ev.TURN_FAILED:
            console.print(Text(safe(f"turn failed: {event.get('error', '')}"), style="bold red"))
        elif kind == ev.TURN_PARKED:
            waiting = ", ".join(str(r) for r in event.get("requests") or [])
            console.print(Text(safe(f"waiting for a person: request {waiting}"), style="yellow"))
        elif kind == ev.TURN_RETRACTED:
            console.print(Text("↻ the turn above was taken back (/retry or /edit)", style="dim"))
        elif kind == ev.META and event.get("title"):
            console.print(Text(safe(f"title: {event['title']}"), style="dim"))
