"""Tab completion in the chat's input: slash commands, tool names after `/tools`, and the
`plan__<id>` names of the workspace's plans anywhere in a message."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document


class ChatCompleter(Completer):
    """`commands`: the slash commands; `tool_names()`: the catalog's names, read when asked
    (the catalog fills in as servers start, so never cached here)."""

    def __init__(self, commands: Iterable[str], tool_names: Callable[[], list[str]]) -> None:
        self.commands = list(commands)
        self.tool_names = tool_names

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            typed = text[1:].lower()
            for name in self.commands:
                if name.startswith(typed):
                    yield Completion(f"/{name}", start_position=-len(text))
            return
        if text.startswith("/tools ") and " " not in text[len("/tools ") :]:
            typed = text[len("/tools ") :]
            yield from self._names(typed, self._safe_names())
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("plan__") or (len(word) >= 3 and "plan__".startswith(word)):
            yield from self._names(word, [n for n in self._safe_names() if n.startswith("plan__")])

    def _safe_names(self) -> list[str]:
        try:
            return sorted(self.tool_names())
        except Exception:  # completion must never break typing
            return []

    @staticmethod
    def _names(typed: str, names: list[str]) -> Iterator[Completion]:
        for name in names:
            if name.startswith(typed):
                yield Completion(name, start_position=-len(typed))


def completer_for(app: Any) -> ChatCompleter:
    from graphchat.chat.commands import COMMANDS

    return ChatCompleter(COMMANDS, lambda: [spec.name for spec in app.catalog.list()])
