"""Budgets a turn or a plan run cannot pass: model calls, cost, wall-clock time.

One `Budget` is open for each `ask`/`chat` turn and each top-level plan run (a plan run inside
a turn, or inside another plan, spends the enclosing one). It travels with the turn's or the
run's context (a context variable, so every task the turn starts — a round's tool calls, a
map's items — spends the same one), and `LLM` charges it before every model request it makes:
planner, solver, judge, agent rounds, `builtin__infer`, prompt tools, each retry after a broken
stream and each fallback attempt. Once a limit is reached, every later request of the turn or
run fails at once with `BudgetExceeded` (exit 1): nothing can spend past it, whichever layer
catches the first error.

The per-answer limits (`settings.model_timeout`, `settings.max_output_tokens`) belong to each
call and travel with its `ModelConfig` (see `graphchat.llm.client`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphchat.errors import EXIT_FAILURE, GraphchatError

if TYPE_CHECKING:
    from graphchat.events import EventSink

# Generous defaults: no bundled plan, graph example or test comes near them (docs/cli.md).
MAX_MODEL_CALLS = 1000
MAX_MAP_ITEMS = 100_000
MODEL_TIMEOUT = 120.0  # seconds without a byte from the model
MAX_OUTPUT_TOKENS = 100_000  # of one answer


class BudgetExceeded(GraphchatError):
    """A turn or a run reached one of its budgets: exit 1 (the configuration is fine, the run
    went past its limit). The message names the setting."""

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_FAILURE)


@dataclass
class Budget:
    """What a turn or a run may spend, and what it spent so far."""

    what: str = "run"  # turn | run: the word the messages use
    max_model_calls: int = MAX_MODEL_CALLS
    max_cost_usd: float | None = None
    max_run_seconds: float | None = None
    calls: int = 0
    cost_usd: float = 0.0
    _unpriced: set[str] = field(default_factory=set, repr=False)
    _timeout: asyncio.Timeout | None = field(default=None, repr=False)
    _hit: str | None = field(default=None, repr=False)

    def charge(self, model: str) -> None:
        """Count one model request about to be sent; BudgetExceeded when none may be."""
        if self._hit is not None:
            raise BudgetExceeded(self._hit)
        if self.calls >= self.max_model_calls:
            self._stop(
                f"the {self.what} reached settings.max_model_calls ({self.max_model_calls:,} model calls); "
                "it stops here"
            )
        if self.max_cost_usd is not None and self.cost_usd >= self.max_cost_usd:
            self._stop(
                f"the {self.what} reached settings.max_cost_usd (${self.cost_usd:.4f} spent of "
                f"${self.max_cost_usd:g}); it stops here"
            )
        self.calls += 1

    def spent(self, cost_usd: float | None, model: str, events: EventSink | None = None) -> None:
        """Add a finished call's cost (None: no price known for `model`, said once a model)."""
        if cost_usd is not None:
            self.cost_usd += cost_usd
        elif self.max_cost_usd is not None and model not in self._unpriced:
            self._unpriced.add(model)
            if events is not None:
                events.warning(
                    f"settings.max_cost_usd: no price is known for {model}, its calls are not counted "
                    "(set input_cost_per_token and output_cost_per_token for it under models:)"
                )

    def _stop(self, message: str) -> None:
        self._hit = message
        raise BudgetExceeded(message)

    @property
    def timed_out(self) -> bool:
        """Whether the wall-clock budget ran out (what is being cancelled now is cancelled for it)."""
        return self._timeout is not None and self._timeout.expired()

    def deadline_message(self) -> str:
        return f"the {self.what} reached settings.max_run_seconds ({self.max_run_seconds:g} s); it stops here"


_current: ContextVar[Budget | None] = ContextVar("graphchat_budget", default=None)


def current() -> Budget | None:
    """The budget of the turn or run this code runs in (None outside any)."""
    return _current.get()


@asynccontextmanager
async def spending(budget: Budget | None) -> AsyncIterator[None]:
    """Run the code inside on `budget` (work done on behalf of a turn from another task: an MCP
    server's sampling request is served in the connection's task, for the call in flight)."""
    token = _current.set(budget)
    try:
        yield
    finally:
        _current.reset(token)


def budget_for(settings: Any, what: str) -> Budget:
    """A fresh budget with the limits of `settings` (the defaults when it is None)."""
    if settings is None:
        return Budget(what)
    return Budget(
        what,
        max_model_calls=getattr(settings, "max_model_calls", MAX_MODEL_CALLS),
        max_cost_usd=getattr(settings, "max_cost_usd", None),
        max_run_seconds=getattr(settings, "max_run_seconds", None),
    )


@asynccontextmanager
async def budget_scope(
    settings: Any, what: str, *, fresh: bool = False
) -> AsyncIterator[tuple[Budget, bool]]:
    """The budget for the code inside: the enclosing one (a plan run inside a turn), or a new
    one from `settings` when there is none or `fresh` (each turn). Yields (budget, owned).

    The owner also enforces `max_run_seconds`: the work inside is cancelled when it runs out
    (`budget.timed_out` tells a cancellation handler why) and BudgetExceeded is raised here.
    """
    enclosing = _current.get()
    if enclosing is not None and not fresh:
        yield enclosing, False
        return
    budget = budget_for(settings, what)
    token = _current.set(budget)
    try:
        if budget.max_run_seconds is None:
            yield budget, True
            return
        try:
            async with asyncio.timeout(budget.max_run_seconds) as timeout:
                budget._timeout = timeout
                yield budget, True
        except TimeoutError:
            if not budget.timed_out:
                raise
            budget._hit = budget.deadline_message()
            raise BudgetExceeded(budget._hit) from None
    finally:
        _current.reset(token)
