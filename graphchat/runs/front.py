"""How a run reaches whoever is there (issue 19): a terminal (`cli.front.TerminalFront`), a
warm helper's client (`warm.helper.RemoteFront`), a chat. The use cases in `graphchat.runs`
talk to the outside only through a `Front`: answers and text out, events to its sink,
questions to its asker, a parked run's requests, a plan's outcome."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from graphchat.asks import Asker
    from graphchat.events import EventSink
    from graphchat.plans.executor import PlanOutcome


class Front(Protocol):
    def sink(self) -> EventSink:
        """Where activity goes (one sink, made once)."""
        ...

    def here(self, sink: EventSink) -> Asker:
        """Who answers questions here (an asker whose `can_answer` is False: nobody)."""
        ...

    def begin(self, streaming: bool) -> None: ...

    def text(self, text: str) -> None:
        """A piece of the answer (a turn's streamed text, a plan's solver text)."""
        ...

    def narration(self, text: str) -> None: ...

    def finish(self, complete: bool = True) -> None: ...

    def answer(self, content: str, payload: dict[str, Any] | None) -> None:
        """A turn's answer: `payload` is its --json object."""
        ...

    def warn(self, message: str) -> None: ...

    def note(self, message: str) -> None:
        """One line of activity (stderr on a terminal)."""
        ...

    def error(self, message: str, hint: str | None = None) -> None: ...

    def parked(
        self, requests: list[dict[str, Any]], json: bool, home: str | None, what: str = "the run"
    ) -> int:
        """The run (`what`: "plan 'x'") waits for a person: show each request and how to answer
        it; the exit code."""
        ...

    def plan_outcome(self, plan: Any, outcome: PlanOutcome, flags: Any, streamed: list[str]) -> int:
        """A plan run ended (not parked): show its deliverable; the exit code."""
        ...
