"""The inline asker: questions from tools running inside a turn (ask_user, approvals, plan `ask`
steps) are answered right in the conversation.

Questions arrive from tool tasks while the turn's live region is drawing; the UI stops that
region for the prompt and restarts it after. The base Asker's lock keeps questions one at a time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from graphchat.asks import Answer, Asker, LineReader, Question, ask_by_lines
from graphchat.chat.ui import ANSWER_PROMPT

if TYPE_CHECKING:
    from graphchat.chat.ui import ChatUI
    from graphchat.events import EventSink

# ask_by_lines prompts "> " for a one-line answer; in a conversation that reads like the message
# prompt, so the chat says what is expected.
_PLAIN_PROMPT = "> "


class ChatLineReader(LineReader):
    """Lines of a question go above the live region; the answer is typed at `answer> `."""

    def __init__(self, ui: ChatUI) -> None:
        self.ui = ui

    def say(self, text: str) -> None:
        from rich.text import Text

        self.ui.commit_text()
        style = "bold yellow" if text.startswith("? ") else ""
        self.ui.print(Text(text, style=style))

    def size(self) -> tuple[int, int]:
        size = self.ui.console.size
        return size.width, size.height

    async def prompt(self, text: str) -> str | None:
        return await self.ui.read_answer(ANSWER_PROMPT if text == _PLAIN_PROMPT else text)

    async def secret(self, text: str) -> str | None:
        return await self.ui.read_answer(text, secret=True)


class ChatAsker(Asker):
    """Asks inline in the chat; every question can be answered (the person is right there)."""

    def __init__(self, ui: ChatUI, events: EventSink | None = None) -> None:
        super().__init__(events)
        self.reader = ChatLineReader(ui)

    async def _ask(self, question: Question) -> Answer:
        return await ask_by_lines(question, self.reader)
