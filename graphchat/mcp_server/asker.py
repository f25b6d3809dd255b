"""The asker of `mcp serve`: questions go to the MCP client as form elicitations.

One of the hosts of the one asker (`graphchat.asks`: the terminal; `graphchat.chat.asker`: the
chat). No elicitation capability → unavailable; accept → the answer; decline/cancel →
declined; a client error or timeout → unavailable.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from graphchat.asks import Answer, Asker, Question, answer_schema
from graphchat.display import safe

if TYPE_CHECKING:
    from graphchat.events import EventSink

ANSWER_FIELD = "answer"  # the one form field of a question that has no schema of its own


def elicit_timeout() -> float:
    """Seconds to wait for the client's answer to one question (then: unavailable)."""
    try:
        return float(os.environ.get("GRAPHCHAT_ELICIT_TIMEOUT", "600"))
    except ValueError:
        return 600.0


# Sends one form elicitation, returns the client's ElicitResult (raises on a client error).
Elicit = Callable[[str, dict[str, Any]], Awaitable[Any]]


def question_schema(question: Question) -> tuple[dict[str, Any], str | None]:
    """The form schema of a question, and the field to unwrap from the answer (None: the whole
    form is the answer). Options and free-text questions become one `answer` field."""
    if question.schema is not None:
        schema = dict(answer_schema(question.schema))  # a `multiple` field: an array of its options
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema, None
    field: dict[str, Any] = {"type": "string", "title": "Answer"}
    if question.options:
        field["enum"] = list(question.options)
    return {"type": "object", "properties": {ANSWER_FIELD: field}, "required": [ANSWER_FIELD]}, ANSWER_FIELD


def elicitation_message(question: Question) -> str:
    """The message of a question's elicitation: the prompt, then its detail (an approval's
    arguments) in full — the client shows what it is asked to approve, never a cut of it."""
    message = safe(question.prompt)
    if question.hint:  # a plan ask step's hint, under the question
        message += f"\n{safe(question.hint)}"
    if question.detail is None:
        return message
    return f"{message}\n\n{safe(question.detail)}"


class ElicitationAsker(Asker):
    """The one asker, hosted by an MCP client: questions go out as form elicitations.

    `elicit` is None when the client did not declare the form elicitation capability. An
    "always" answered by a client lasts for this serve session only (never written to
    graphchat.yaml)."""

    lasting_answers = False

    def __init__(
        self, elicit: Elicit | None, events: EventSink | None = None, timeout: float | None = None
    ) -> None:
        super().__init__(events)
        self.elicit = elicit
        self.timeout = elicit_timeout() if timeout is None else timeout

    @property
    def can_answer(self) -> bool:
        return self.elicit is not None

    async def _ask(self, question: Question) -> Answer:
        if self.elicit is None:
            return Answer.unavailable()
        schema, unwrap = question_schema(question)
        try:
            async with asyncio.timeout(self.timeout):
                result = await self.elicit(elicitation_message(question), schema)
        except asyncio.CancelledError:
            raise
        except Exception:  # a client error or a timeout: nobody could answer
            return Answer.unavailable()
        action = getattr(result, "action", None)
        if action != "accept":
            return Answer.declined()  # decline or cancel
        content = dict(getattr(result, "content", None) or {})
        if unwrap is None:
            return Answer(True, content)
        if content.get(unwrap) is None:
            return Answer.declined()  # accepted an empty form: nothing was chosen
        return Answer(True, content[unwrap])


def form_elicitation_declared(capabilities: Any) -> bool:
    """A bare `elicitation: {}` (before modes existed) counts as form support; url-only does not."""
    elicitation = getattr(capabilities, "elicitation", None) if capabilities is not None else None
    return elicitation is not None and (elicitation.form is not None or elicitation.url is None)
