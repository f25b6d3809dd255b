"""The workbench's asker: the one asker of its runs and its agent. Questions (a plan's `ask`
steps, approvals, ask_user) open in the workbench pane, one at a time (the base Asker's lock);
nothing parks. Without a screen attached nobody can answer (the question is unavailable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from graphchat.asks import APPROVAL_WORDS, Answer, Asker, Question, coerce
from graphchat.jsonschema_util import errors
from graphchat.workbench.runs import parse_json


class PaneAsker(Asker):
    """Asks through `show` (set by the screen: it opens the question, the person's answer comes back)."""

    lasting_answers = True

    def __init__(self) -> None:
        super().__init__(None)
        self.show: Callable[[Question], Awaitable[Answer]] | None = None

    @property
    def can_answer(self) -> bool:
        return self.show is not None

    async def _ask(self, question: Question) -> Answer:
        if self.show is None:
            return Answer.unavailable()
        return await self.show(question)


def read_answer(question: Question, text: str) -> tuple[Any, str | None]:
    """The value a typed answer gives `question`, or (None, why it does not fit)."""
    text = text.strip()
    if question.options:
        if text.isdigit() and 1 <= int(text) <= len(question.options):
            return question.options[int(text) - 1], None
        for option in question.options:
            if option.lower() == text.lower():
                return option, None
        if question.kind == "approval":
            if text.lower() in APPROVAL_WORDS:
                return question.options[APPROVAL_WORDS[text.lower()]], None
        return None, "choose one of: " + ", ".join(question.options)
    if question.schema:
        value, problem = parse_json(text)
        if problem is None and not isinstance(value, dict):
            problem = "the answer must be a JSON object"
        if problem is None:
            found = errors(dict(question.schema), value)
            problem = "; ".join(found) if found else None
        return (value, None) if problem is None else (None, problem)
    if not text:
        return None, "type an answer (Escape declines)"
    try:
        return coerce(text, {"type": "string"}), None
    except ValueError as exc:
        return None, str(exc)
