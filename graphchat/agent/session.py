"""A conversation over a thread: what `ask` (one turn) and `chat` (many turns) both drive.

A turn appends the user message, replays the thread (repaired, trimmed to the model's window),
runs the loop with every event appended as it happens, and closes with `turn_end` — or
`turn_failed` on an error or a cancellation, which is then re-raised.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphchat.agent.loop import run_loop
from graphchat.agent.tool_offer import offered_tools
from graphchat.asks import Parked
from graphchat.catalog.base import CallContext
from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.events import RoleUsage, by_model_rows
from graphchat.fsutil import describe_failure
from graphchat.interrupts import reason
from graphchat.jsonschema_util import preload_in_background
from graphchat.llm.budget import budget_scope
from graphchat.llm.client import LLM, context_window, count_tokens
from graphchat.llm.runtime import alitellm_module
from graphchat.llm.types import Usage
from graphchat.threads import lines as ev
from graphchat.threads.limits import capped_recorder
from graphchat.threads.repair import to_model_messages
from graphchat.threads.window import fit_to_window

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from graphchat.asks import Asker
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.events import EventSink
    from graphchat.llm.budget import Budget
    from graphchat.llm.client import LLM
    from graphchat.threads.store import Thread, ThreadStore
    from graphchat.workspace import ModelConfig, Settings

# Room kept free in the window for the reply (and the tool list, counted separately).
REPLY_RESERVE_TOKENS = 4096


@dataclass
class TurnResult:
    content: str
    thread_id: str
    tool_calls_made: int
    usage: dict[str, Any] = field(default_factory=dict)


class Session:
    """Turns over one thread at a time. The thread is created on first use (no empty threads)."""

    def __init__(
        self,
        settings: Settings,
        *,
        thread_store: ThreadStore,
        thread: Thread | None = None,
        catalog: Catalog,
        asker: Asker | None,
        events: EventSink | None,
        model_override: str | None = None,
        assume_yes: bool = False,
    ) -> None:
        self.settings = settings
        self.thread_store = thread_store
        self._thread = thread
        self.catalog = catalog
        self.asker = asker

        self.events = RoleUsage(events)  # counts each turn's model calls per role
        self.assume_yes = assume_yes
        self._model_name = model_override
        self._llm: LLM | None = None
        self._usage = Usage()
        self.stream = True  # False: plain (non-streaming) model calls, e.g. `ask --no-stream`
        self.wait_for_thread = True  # False: a thread busy with another process's turn is an error
        self.model_config()  # fail early (exit 2) when no model is configured

    # -- thread ----------------------------------------------------------------------------------

    @property
    def thread(self) -> Thread:
        """The current thread (created on first access)."""
        if self._thread is None:
            self._thread = self.thread_store.create()
        return self._thread

    @property
    def thread_id(self) -> str | None:
        """The current thread's id, or None while no thread was created yet."""
        return self._thread.id if self._thread is not None else None

    def last_message(self) -> str | None:
        """The person's latest message in the current thread (what chat's /retry and /edit
        resend), or None while there is none."""
        if self._thread is None:
            return None
        for event in reversed(self._thread.events()):
            if event.get("kind") == ev.USER:
                return ev.text_of(event.get("content"))
        return None

    def new_thread(self) -> None:
        """Start a fresh thread for the next turn (created when that turn starts)."""
        self._thread = None

    # -- model -----------------------------------------------------------------------------------

    def model_config(self) -> ModelConfig:
        return self.settings.model_for("chat", override=self._model_name)

    @property
    def model(self) -> str:
        return self.model_config().model

    def set_model(self, name: str) -> None:
        """Use model `name` (a litellm model string) from the next turn on."""
        self._model_name = name
        self._llm = None
        if self._thread is not None:
            self._thread.append(dict(ev.meta(model=name)))

    def llm(self) -> LLM:
        if self._llm is None:
            self._llm = LLM(self.model_config(), events=self.events)
        return self._llm

    @property
    def usage_total(self) -> dict[str, Any]:
        """`{calls, input_tokens, output_tokens, cost_usd?}` over every turn of this session."""
        return self._usage.to_dict()

    def _offered(self, tools: list[dict[str, Any]], message: str) -> list[dict[str, Any]]:
        """At most `settings.max_tools_offered` tools, the most relevant to `message` first;
        a warning says how many were left out."""
        limit = self.settings.max_tools_offered
        offered, left_out = offered_tools(tools, message, limit)
        if left_out and self.events is not None:
            self.events.warning(
                f"{left_out:,} of {len(tools):,} tools were not offered to the model (at most {limit:,}: "
                "settings.max_tools_offered; the ones most relevant to the message were kept)"
            )
        return offered

    # -- turns -----------------------------------------------------------------------------------

    async def turn(
        self,
        message: str,
        *,
        on_text: Callable[[str], None] | None = None,
        on_tools: Callable[[str], None] | None = None,
        replace_last: bool = False,
    ) -> TurnResult:
        """`replace_last`: the thread's latest turn is taken back first (`turn_retracted`: the
        chat's /retry and /edit), so the model sees this message in its place."""
        thread = self.thread
        # One turn at a time a thread, across processes: held from the user's message (and the
        # replay it starts) to the turn's closing event.

        try:
            async with thread.turn_lock(wait=self.wait_for_thread, on_wait=self._say):
                if replace_last:
                    thread.append(dict(ev.turn_retracted()))
                thread.append(dict(ev.user(message)))
                return await self._run(thread, on_text, on_tools, message)
        except GraphchatError as exc:
            if exc.exit_code == EXIT_USAGE and self._only_this_turn(thread):
                # a configuration mistake (no key, a rejected key, an unknown model) before
                # anything was answered: no thread is left for `ask -c` to continue
                self._forget(thread)
            raise

    def _only_this_turn(self, thread: Thread) -> bool:
        """The thread holds this turn alone, which failed with no answer from the model."""
        kinds = [e.get("kind") for e in thread.events()]
        return kinds.count(ev.USER) == 1 and not any(
            k in (ev.TURN_END, ev.TURN_PARKED, ev.TURN_RESUMED, ev.ASSISTANT, ev.TOOL_RESULT) for k in kinds
        )

    def _forget(self, thread: Thread) -> None:
        import contextlib

        thread.close()
        with contextlib.suppress(Exception):
            self.thread_store.remove(thread.id)
        self._thread = None

    def _say(self, message: str) -> None:
        if self.events is not None:
            self.events.info(message)
        else:
            print(message, file=sys.stderr, flush=True)

    async def resume(
        self,
        results: list[dict[str, Any]] | Callable[[CallContext], Awaitable[list[dict[str, Any]]]],
        *,
        on_text: Callable[[str], None] | None = None,
        on_tools: Callable[[str], None] | None = None,
    ) -> TurnResult:
        """Go on with a parked turn (issue 9): `results` (tool_result events) are the answers
        of the calls it waited on — or an async function of the turn's call context that makes
        them (calls made again on resume: their usage is this turn's); the model goes on from
        there."""
        thread = self.thread
        async with thread.turn_lock(wait=self.wait_for_thread, on_wait=self._say):
            thread.append(dict(ev.turn_resumed()))
            if not callable(results):
                for event in results:
                    thread.append(event)
                return await self._run(thread, on_text, on_tools)
            return await self._run(thread, on_text, on_tools, resumed=results)

    async def _run(
        self,
        thread: Thread,
        on_text: Callable[[str], None] | None,
        on_tools: Callable[[str], None] | None,
        message: str | None = None,
        resumed: Callable[[CallContext], Awaitable[list[dict[str, Any]]]] | None = None,
    ) -> TurnResult:
        """One turn's rounds, within the turn's own budget (model calls, cost, wall clock:
        graphchat.llm.budget). `message`: the person's message when the caller has it (a
        resumed turn finds it in the thread), what the offered tools are ranked against;
        `resumed`: makes the results of a resumed turn's waiting calls (see `resume`)."""
        async with budget_scope(self.settings, "turn", fresh=True) as (budget, _owned):
            return await self._rounds(thread, on_text, on_tools, message, budget, resumed)

    async def _rounds(
        self,
        thread: Thread,
        on_text: Callable[[str], None] | None,
        on_tools: Callable[[str], None] | None,
        message: str | None,
        budget: Budget,
        resumed: Callable[[CallContext], Awaitable[list[dict[str, Any]]]] | None = None,
    ) -> TurnResult:
        preload_in_background()  # tool calls validate their arguments: import that while we wait
        llm = self.llm()
        before = llm.usage
        roles_before = self.events.snapshot()
        servers_before = self.events.snapshot(servers=True)
        models_before = self.events.snapshot(models=True)
        extra_usage: list[Usage] = []
        ctx = CallContext(
            asker=self.asker,
            events=self.events,
            assume_yes=self.assume_yes,
            surface="agent",
            on_usage=extra_usage.append,
        )
        try:
            await alitellm_module()  # the import may still run: wait without blocking Ctrl-C
            for event in await resumed(ctx) if resumed is not None else []:
                thread.append(event)
            ranked_by = message if message is not None else _last_user_text(thread)
            tools = self._offered(self.catalog.model_tools(), ranked_by)
            history = await asyncio.to_thread(self._history, thread, llm, tools)
            result = await run_loop(
                llm=llm,
                catalog=self.catalog,
                messages=history,
                ctx=ctx,
                max_iterations=self.settings.max_agent_iterations,
                on_text=on_text,
                on_tools=on_tools,
                tools=tools,
                record=capped_recorder(thread.append, self.settings.max_thread_result_chars),
                max_tool_result_chars=self.settings.max_tool_result_chars,
                stream=self.stream,
            )
        except Parked as parked:  # the turn waits for a person: it stays open, marked
            self._spent(llm, before, extra_usage)
            thread.append(dict(ev.turn_parked([r["id"] for r in parked.requests])))
            parked.thread_id = thread.id
            raise
        except asyncio.CancelledError:
            if budget.timed_out:  # settings.max_run_seconds: the turn failed, nobody interrupted it
                self._close_failed(thread, budget.deadline_message(), llm, before, extra_usage)
                raise

            self._close_failed(
                thread, f"interrupted ({reason()})", llm, before, extra_usage, interrupted=True
            )
            raise
        except GraphchatError as exc:
            self._close_failed(thread, exc.message, llm, before, extra_usage)
            raise
        except Exception as exc:
            self._close_failed(thread, describe_failure(exc), llm, before, extra_usage)
            raise
        usage = self._spent(llm, before, extra_usage).to_dict()
        roles = self.events.since(roles_before)
        if set(roles) - {"chat"}:  # other roles worked in this turn (a planner, a solver): by role
            usage["by_role"] = roles
        by_server = self.events.since(servers_before, servers=True)
        if by_server:  # MCP servers' sampling requests this turn served (issue 25)
            usage["by_server"] = by_server
        models = self.events.since(models_before, models=True)
        if len(models) > 1 or any(m.get("failed") for m in models.values()):  # a fallback answered
            usage["by_model"] = by_model_rows(models)
        thread.append(dict(ev.turn_end(usage, llm.model)))
        return TurnResult(result.content, thread.id, len(result.tool_calls_made), usage)

    def _spent(self, llm: LLM, before: Usage, extra: list[Usage]) -> Usage:
        usage = llm.usage - before
        for item in extra:
            usage = usage + item
        self._usage = self._usage + usage
        return usage

    def _close_failed(
        self,
        thread: Thread,
        error: str,
        llm: LLM,
        before: Usage,
        extra: list[Usage],
        *,
        interrupted: bool = False,
    ) -> None:
        self._spent(llm, before, extra)
        try:
            thread.append(dict(ev.turn_failed(error, interrupted=interrupted)))
        except OSError:  # the turn's failure matters more than its record
            pass

    def _history(self, thread: Thread, llm: LLM, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The thread replayed for the model, trimmed to its context window (oldest turns first)."""
        messages = to_model_messages(
            thread.events(), max_tool_result_chars=self.settings.max_tool_result_chars
        )
        if self.settings.system_prompt:  # standing instructions: sent first, never stored in the thread
            messages = [{"role": "system", "content": self.settings.system_prompt}, *messages]
        window = context_window(llm.config)
        if not window:
            return messages
        import orjson

        tools_tokens = len(orjson.dumps(tools)) // 3 if tools else 0
        budget = max(1024, window - min(REPLY_RESERVE_TOKENS, window // 4) - tools_tokens)
        chars = sum(len(orjson.dumps(m, default=str)) for m in messages)
        if chars < budget:  # a token is at least one character: certainly fits, skip the tokenizer
            return messages
        fitted, omitted = fit_to_window(
            messages, max_tokens=budget, count_tokens=lambda m: count_tokens(llm.model, m)
        )
        if omitted and self.events is not None:
            self.events.info(
                f"note: {omitted} earlier messages were left out to fit the model's context window"
            )
        return fitted

    async def aclose(self) -> None:
        """Release the session's resources (the catalog belongs to the caller)."""
        if self._thread is not None:
            self._thread.close()


def _last_user_text(thread: Thread) -> str:
    """The person's latest message (what the offered tools are ranked against)."""
    for event in reversed(thread.events()):
        if event.get("kind") == "user":
            return ev.text_of(event.get("content"))
    return ""
