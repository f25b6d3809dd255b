"""Debug runs of the workbench: pauses on the one call path, answered by the person.

A `Debugger` is the `CallHook` of a run's CallContext (`Catalog.call` asks it before each call
and after each failed one) and wraps the run's models (a breakpoint on a `decide` / `agent`
step pauses its model's calls). It pauses before every call while stepping, else only in the
top-level steps that hold a breakpoint (a breakpoint on a `map` holds its body's calls), and
always on a failed call. At a pause the person decides (`Decision`): step (run it, pause at the
next), continue (run to the next breakpoint or failure), skip (the call does not run; the
typed JSON is its result; before a model call, the typed answer is the model's), abort (the
run is cancelled: nothing after the pause runs). Nothing here knows the screen: `show` is told
each pause, and whoever shows it calls `answer`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSpec
from graphchat.errors import GraphchatError
from graphchat.jsonschema_util import errors
from graphchat.llm.types import Completion
from graphchat.plans.executor import CURRENT_STEP

if TYPE_CHECKING:
    from graphchat.events import EventSink
    from graphchat.llm.types import ModelClient
    from graphchat.plans.runtime import LLMFactory

ACTIONS = ("step", "continue", "skip", "abort")


@dataclass
class Pause:
    """One pause: `kind` before (a tool call about to run) | failed (a call that failed) |
    model (a model call of a decide/agent step about to run)."""

    kind: str
    step: str  # the step path the call is made in (`E2/do/E0`), "" outside any step
    tool: str
    arguments: Any = None
    error: str | None = None
    schema: dict[str, Any] | None = None  # a model call's answer schema (what a skip must fit)
    answered: asyncio.Future[Decision] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )

    @property
    def top(self) -> str:
        """The top-level step the pause is in (what the plan tab marks)."""
        return self.step.split("/", 1)[0]

    def describe(self) -> str:
        import json

        where = f"in {self.step}" if self.step else "outside the steps"
        if self.kind == "model":
            head = f"⏸ before a model call ({self.tool}) {where}"
        elif self.kind == "failed":
            head = f"✗ {self.tool} failed {where}: {self.error}"
        else:
            head = f"⏸ before {self.tool} {where}"
        if self.arguments is None:
            return head
        shown = json.dumps(self.arguments, ensure_ascii=False, indent=2, default=str)
        return f"{head}\narguments:\n{shown}"


@dataclass
class Decision:
    action: str  # one of ACTIONS
    value: Any = None  # skip: the injected result


class Debugger:
    """The pauses of one debug run. `breakpoints` is the bench's live set of top-level step
    ids (a breakpoint set during the run counts from the next call on)."""

    def __init__(
        self,
        breakpoints: set[str],
        show: Callable[[Pause], None],
        *,
        on_abort: Callable[[], None] | None = None,
    ) -> None:
        self.breakpoints = breakpoints
        self.stepping = not breakpoints  # no breakpoint: pause before every call
        self.show = show
        self.on_abort = on_abort
        self.pause: Pause | None = None
        self.aborted = False
        self.pauses = 0
        self._lock = asyncio.Lock()  # one pause at a time (a map's items run concurrently)

    def wants(self, step: str) -> bool:
        return self.stepping or step.split("/", 1)[0] in self.breakpoints

    async def _wait(self, pause: Pause) -> Decision:
        async with self._lock:
            if self.aborted:
                raise asyncio.CancelledError("aborted at a pause")
            self.pause = pause
            self.pauses += 1
            self.show(pause)
            try:
                decision = await pause.answered
            finally:
                self.pause = None
        if decision.action == "abort":
            self.aborted = True
            if self.on_abort is not None:
                self.on_abort()
            raise asyncio.CancelledError("aborted at a pause")
        if decision.action == "continue":
            self.stepping = False
        elif decision.action == "step":
            self.stepping = True
        return decision

    def answer(self, decision: Decision) -> None:
        """The person's decision at the current pause (ignored when nothing is paused)."""
        if decision.action not in ACTIONS:
            raise ValueError(f"unknown debug action {decision.action!r}: {', '.join(ACTIONS)}")
        if self.pause is not None and not self.pause.answered.done():
            self.pause.answered.set_result(decision)

    # -- the CallHook of Catalog.call --

    async def before_call(
        self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext
    ) -> ToolResult | bool:
        step = CURRENT_STEP.get() or ""
        if self.aborted:
            raise asyncio.CancelledError("aborted at a pause")
        if not self.wants(step):
            return False
        decision = await self._wait(Pause("before", step, spec.name, arguments))
        if decision.action == "skip":
            return ToolResult(decision.value)
        return True

    async def after_call(
        self, spec: ToolSpec, arguments: dict[str, Any], result: ToolResult, ctx: CallContext
    ) -> ToolResult:
        step = CURRENT_STEP.get() or ""
        decision = await self._wait(Pause("failed", step, spec.name, arguments, result.error_message))
        if decision.action == "skip":
            return ToolResult(decision.value)
        return result  # step / continue: the call stays failed

    # -- models (decide / agent steps) --

    def models(self, factory: LLMFactory) -> LLMFactory:
        """`factory` whose models pause before each call made under a breakpoint."""

        def made(role: str, model: str | None, events: EventSink | None) -> ModelClient:
            return PausingModel(factory(role, model, events), self)  # type: ignore[return-value]

        return made

    async def before_model(
        self, site: str, messages: list[dict[str, Any]], schema: dict[str, Any] | None = None
    ) -> Decision | None:
        """A pause before a model call under a breakpoint: the decision when it is a skip (the
        call does not run; the typed result is its answer), else None (it runs)."""
        step = CURRENT_STEP.get() or ""
        if self.aborted:
            raise asyncio.CancelledError("aborted at a pause")
        if not step or step.split("/", 1)[0] not in self.breakpoints:
            return None  # models pause at breakpoints only, not at every step
        asked = next((m.get("content") for m in reversed(messages) if m.get("role") == "user"), None)
        shown = {"prompt": asked[:600]} if isinstance(asked, str) else None
        decision = await self._wait(Pause("model", step, site, shown, schema=schema))
        return decision if decision.action == "skip" else None


class PausingModel:
    """A model whose calls ask the debugger first; everything else is the model's own."""

    def __init__(self, inner: ModelClient, debugger: Debugger) -> None:
        self._inner = inner
        self._debugger = debugger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> Any:
        skipped = await self._debugger.before_model(str(kwargs.get("site", "chat")), messages)
        if skipped is not None:
            return _answer(skipped.value)
        return await self._inner.complete(messages, **kwargs)

    async def structured(self, messages: list[dict[str, Any]], schema: dict[str, Any], **kwargs: Any) -> Any:
        skipped = await self._debugger.before_model(str(kwargs.get("site", "structured")), messages, schema)
        if skipped is not None:  # the pause checked it against the schema; this is the backstop
            problems = errors(schema, skipped.value) if isinstance(skipped.value, dict) else ["not an object"]
            if problems:
                raise GraphchatError("the injected answer of the skipped model call: " + "; ".join(problems))
            return skipped.value
        return await self._inner.structured(messages, schema, **kwargs)

    async def complete_with_schema(
        self, messages: list[dict[str, Any]], schema: dict[str, Any], **kwargs: Any
    ) -> Any:
        skipped = await self._debugger.before_model(str(kwargs.get("site", "structured")), messages)
        if skipped is not None:
            return _answer(skipped.value)
        return await self._inner.complete_with_schema(messages, schema, **kwargs)


def _answer(value: Any) -> Any:
    """A skipped model call's completion: the injected text (a JSON value as its JSON)."""
    import json

    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return Completion(content=text, model="(skipped: answer injected)")
