"""Tab completion in the chat's input: slash commands, tool names after `/tools`, the
`plan__<id>` names of the workspace's plans anywhere in a message, and an MCP server's prompts:
`/SERVER:` + Tab lists its prompt names, then the prompt's argument names (`department=`) and,
through the server's completion API, their values (`department=Eng` → `department=Engineering`,
the arguments already typed given as its context)."""

from __future__ import annotations

import shlex
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator
from typing import Any

from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document

from graphchat.catalog.mcp.features import argument_values, prompt_choices
from graphchat.chat.commands import COMMANDS

Prompts = Callable[[str], Awaitable[list[dict[str, Any]]]]  # server → its prompt_rows
Values = Callable[[str, str, str, str, dict[str, str]], Awaitable[list[str]]]


class ChatCompleter(Completer):
    """`commands`: the slash commands; `tool_names()`: the catalog's names, read when asked
    (the catalog fills in as servers start, so never cached here); `servers()`: the configured
    MCP servers; `prompts` and `values` ask one of them (mcp_features) — awaited on the chat's
    loop, where the servers' connections live."""

    def __init__(
        self,
        commands: Iterable[str],
        tool_names: Callable[[], list[str]],
        servers: Callable[[], list[str]] = list,
        prompts: Prompts | None = None,
        values: Values | None = None,
    ) -> None:
        self.commands = list(commands)
        self.tool_names = tool_names
        self.servers = servers
        self.prompts = prompts
        self.values = values

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text:
            typed = text[1:].lower()
            for name in self.commands:
                if name.startswith(typed):
                    yield Completion(f"/{name}", start_position=-len(text))
            if ":" not in typed:  # `/ev` → `/everything:` (its prompts come on the next Tab)
                for server in self._safe(self.servers):
                    if server.lower().startswith(typed):
                        yield Completion(f"/{server}:", start_position=-len(text))
            return
        if text.startswith("/tools ") and " " not in text[len("/tools ") :]:
            typed = text[len("/tools ") :]
            yield from self._names(typed, self._safe(self.tool_names))
            return
        word = document.get_word_before_cursor(WORD=True)
        if word.startswith("plan__") or (len(word) >= 3 and "plan__".startswith(word)):
            yield from self._names(word, [n for n in self._safe(self.tool_names) if n.startswith("plan__")])

    async def get_completions_async(
        self, document: Document, complete_event: CompleteEvent
    ) -> AsyncGenerator[Completion, None]:
        text = document.text_before_cursor
        head = text[1:].split(" ", 1)[0] if text.startswith("/") else ""
        server, colon, prompt = head.partition(":")
        if not colon or self.prompts is None or server not in self._safe(self.servers):
            for completion in self.get_completions(document, complete_event):
                yield completion
            return
        rows = await self.prompts(server)
        if " " not in text:  # the prompt's name
            for row in rows:
                if row["name"].startswith(prompt):
                    yield Completion(f"/{server}:{row['name']}", start_position=-len(text))
            return
        found = [r for r in rows if r["name"] == prompt]
        if not found:
            return
        row = found[0]
        rest = text[len(head) + 2 :]
        word = "" if rest[-1:].isspace() else rest.split()[-1]
        given = _arguments(rest[: len(rest) - len(word)])
        name, equals, typed = word.partition("=")
        if not equals:  # an argument's name
            for argument in row["arguments"]:
                if argument["name"].startswith(word) and argument["name"] not in given:
                    yield Completion(f"{argument['name']}=", start_position=-len(word))
            return
        if self.values is None or name not in {a["name"] for a in row["arguments"]}:
            return
        for value in await self.values(server, prompt, name, typed.strip("'\""), given):
            yield Completion(f"{name}={shlex.quote(value)}", start_position=-len(word))

    @staticmethod
    def _safe(names: Callable[[], list[str]]) -> list[str]:
        try:
            return sorted(names())
        except Exception:  # completion must never break typing
            return []

    @staticmethod
    def _names(typed: str, names: list[str]) -> Iterator[Completion]:
        for name in names:
            if name.startswith(typed):
                yield Completion(name, start_position=-len(typed))


def _arguments(text: str) -> dict[str, str]:
    """The `k=v` arguments typed so far (what does not parse yet is left out)."""
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    return dict(t.split("=", 1) for t in tokens if "=" in t and not t.startswith("="))


def completer_for(app: Any) -> ChatCompleter:
    def servers() -> list[str]:
        return list(app.catalog.groups()) if app.catalog is not None else []

    return ChatCompleter(
        COMMANDS,
        lambda: [spec.name for spec in app.catalog.list()],
        servers,
        lambda server: prompt_choices(app.catalog, server),
        lambda server, prompt, name, typed, given: argument_values(
            app.catalog, server, prompt, name, typed, given
        ),
    )
