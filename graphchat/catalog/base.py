"""The catalog: every tool in one namespace, called through one path.

`Catalog.call(name, arguments, ctx) -> ToolResult` is the only way the agent loop, the plan
executor and `tools call` reach a tool. Argument validation, approvals, events and shape
recording happen here, once, whatever kind of tool it is (MCP, plan, native).
"""

from __future__ import annotations

import builtins
import itertools
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from graphchat.errors import GraphchatError, close_matches, did_you_mean
from graphchat.fsutil import describe_failure
from graphchat.jsonschema_util import argument_problem

if TYPE_CHECKING:
    from graphchat.asks import Asker
    from graphchat.events import EventSink
    from graphchat.llm.types import Usage

FAMILIES = ("read", "write", "destructive")

# The numbering of one turn's tool calls in events (c1, c2, …), when a turn sets it: a warm
# helper runs many turns, some at once, on one catalog; each is numbered as in its own process.
TURN_CALL_IDS: ContextVar[Iterator[int] | None] = ContextVar("graphchat_turn_call_ids", default=None)
# (tool name, call id) of the call a source is running: its progress reports name that call.
CURRENT_CALL: ContextVar[tuple[str, str] | None] = ContextVar("graphchat_current_call", default=None)

# The catalog's logger (-vv / GRAPHCHAT_LOG, graphchat.logs), made at the first call: this
# module is imported where logging and asyncio are not (the warm client), and a call must not
# pay a getLogger (a map makes 100,000 calls).
_log: Any = None
INFO, TRACE = 20, 5  # logging.INFO; -vvv: arguments and results


def _catalog_log() -> Any:
    global _log
    if _log is None:
        import logging

        _log = logging.getLogger("graphchat.catalog")
    return _log


_argument_problem: Any = None  # graphchat.jsonschema_util.argument_problem, imported at the first call


@dataclass
class ToolSpec:
    """What a tool is: its catalog name, schemas and where it comes from."""

    name: str
    description: str
    input_schema: dict[str, Any]
    source: str  # "mcp:<server>", "plan", "native", "builtin:<pack>", "user", "core"
    family: str = "destructive"  # read | write | destructive (unannotated = destructive)
    output_schema: dict[str, Any] | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    def to_model_tool(self) -> dict[str, Any]:
        """The OpenAI-format tool definition litellm takes."""
        schema = self.input_schema or {"type": "object", "properties": {}}
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description or self.name,
                "parameters": schema,
            },
        }


@dataclass
class ToolResult:
    """One tool call's outcome: a JSON value, whether it is an error, and how long it took."""

    value: Any
    is_error: bool = False
    ms: float = 0.0
    # Not an error, yet not done either (a question nobody answered): shown `– tool note`.
    note: str | None = None
    # Content kept beside a structured value (an MCP image next to structured content): not
    # part of the value; the model is shown it (graphchat.media).
    media: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def error(cls, message: str, **extra: Any) -> ToolResult:
        return cls(value={"error": message, **extra}, is_error=True)

    @property
    def error_message(self) -> str:
        if isinstance(self.value, dict) and isinstance(self.value.get("error"), str):
            return self.value["error"]
        return str(self.value)

    def to_text(self) -> str:
        """The result as the string the model (and the thread) gets."""
        import orjson

        if isinstance(self.value, str):
            return self.value
        return orjson.dumps(self.value, default=str).decode()


@dataclass
class CallContext:
    """Who is calling and how questions and events reach the person.

    `chain` is the stack of plan identifiers being run (depth limit and cycle detection);
    `assume_yes` is --yes (approve every sensitive call for this run); `on_usage` is told the
    tokens and cost of model calls a tool makes itself (e.g. `builtin__infer`), so the session
    that called it can count them. Copy a context with `dataclasses.replace`.
    """

    asker: Asker | None = None
    events: EventSink | None = None
    chain: tuple[str, ...] = ()
    assume_yes: bool = False
    surface: str = "agent"  # agent | plan | cli | mcp
    on_usage: Callable[[Usage], None] | None = None
    # A debugger on the call path (the workbench's debug runs): told of every call before it
    # runs and of every failed one; None almost always.
    hook: CallHook | None = None
    # Where the plan this context calls parks when nobody can answer (`mcp serve`, issue 19):
    # for the top-level plan call only, so a plan inside it never takes its caller's record.
    parking: Any = None
    # The one tool a person permitted on a resumed turn (`graphchat permit`): that call's approval
    # is given and nothing else's — not a server's sampling inside it, not the calls of a plan
    # it runs (a plan run inside drops it, as it drops `parking`).
    permitted: str | None = None

    def child(self, plan_id: str) -> CallContext:
        """The context of a plan run inside this one (one plan deeper)."""
        return replace(self, chain=(*self.chain, plan_id), surface="plan", parking=None, permitted=None)


class CallHook(Protocol):
    """A debugger on `Catalog.call`, the one call path (graphchat.workbench.debug).

    `before_call` may pause: it returns a ToolResult to use instead of running the call (a
    result the person injected), True when the person let the call go at a pause (that pause
    is the call's approval; deny rules still win), False when it did not pause. `after_call`
    sees each failed result and returns the one to use (the same, or an injected one)."""

    async def before_call(
        self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext
    ) -> ToolResult | bool: ...

    async def after_call(
        self, spec: ToolSpec, arguments: dict[str, Any], result: ToolResult, ctx: CallContext
    ) -> ToolResult: ...


class ToolSource:
    """A provider of tools (MCP pool, plans, natives). `specs` must be cheap: no server start.

    The lifecycle methods are no-ops for sources whose tools are known without starting
    anything; a source backed by processes (the MCP pool) overrides them. Nothing outside
    `graphchat.catalog` needs to know which kind a source is: it asks the `Catalog`.

    `on_change` is set by the catalog that holds the source: a source whose tools change by
    themselves (an MCP server's `tools/list_changed`) calls it, and the next lookup sees them.
    """

    on_change: Callable[[], None] | None = None
    # the MCP pool: it also answers a server's requests beyond tools (resources, prompts,
    # subscriptions) through `request`; `Catalog.mcp_source` finds it without importing it
    serves_mcp_requests: bool = False

    def plans(self) -> dict[str, Any]:
        """The plans this source offers as tools, by identifier (the plan source's); none here."""
        return {}

    def specs(self) -> list[ToolSpec]:
        raise NotImplementedError

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None

    def unprepared(self, *, retry_failed: bool = False) -> list[str]:
        """Names of the groups (servers) whose tool lists are not known yet. A group whose last
        start failed under its current configuration is left out unless `retry_failed`: it is
        not retried by every command until its configuration changes or a refresh."""
        return []

    def failed(self) -> dict[str, str]:
        """Groups left out of `unprepared` because their last start failed: {group: error}."""
        return {}

    def groups(self) -> list[str]:
        """Names of every group (server) of this source, prepared or not."""
        return []

    def prestart(self, names: list[str] | None = None) -> None:
        """Start groups in the background (e.g. while the model library imports)."""
        return None

    def start_problem(self, name: str) -> str | None:
        """One line naming group `name` and why it cannot start, when that is known."""
        return None

    def unavailable(self, tool: str) -> str | None:
        """Why `tool`, a name not listed, is missing when its group cannot start (else None)."""
        return None

    async def prepare(self, names: list[str] | None = None, *, refresh: bool = False) -> dict[str, str]:
        """Make the tool lists of `names` (default: the unprepared ones; all with `refresh`)
        known; returns {group: error} for those that failed."""
        return {}

    def reload(self) -> None:
        """Forget what was read from the workspace (e.g. plans edited since), so the next
        `specs` reads it again. Running servers are not touched."""
        return None

    @property
    def collisions(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Catalog names that several real tools wanted (each one stays reachable)."""
        return []

    def warnings(self) -> list[str]:
        """Problems that did not stop the source (e.g. a server skipped for a bad config)."""
        return []


# An approval hook: returns None to run the call, or the refusal message for the model.
Approver = Callable[[ToolSpec, dict[str, Any], CallContext], Awaitable[str | None]]
# A shape recorder: called after every successful call, must not block (schedules work off-loop).
ShapeRecorder = Callable[[ToolSpec, Any], None]


class Catalog:
    """One namespace over several sources; `call` is the one call path."""

    def __init__(
        self,
        sources: Iterable[ToolSource] = (),
        *,
        approver: Approver | None = None,
        record_shape: ShapeRecorder | None = None,
    ) -> None:
        self.sources: list[ToolSource] = list(sources)
        for source in self.sources:
            source.on_change = self.invalidate
        self.approver = approver
        self.record_shape = record_shape
        self._index: dict[str, tuple[ToolSpec, ToolSource]] | None = None
        self._index_warnings: list[str] = []
        self._call_ids = itertools.count(1)
        self._closers: list[Callable[[], Awaitable[None]]] = []

    def on_close(self, closer: Callable[[], Awaitable[None]]) -> None:
        """Run `closer` when the catalog closes (after its sources): e.g. flush pending shapes."""
        self._closers.append(closer)

    def add_source(self, source: ToolSource) -> None:
        self.sources.append(source)
        source.on_change = self.invalidate
        self._index = None

    def invalidate(self) -> None:
        self._index = None

    # lifecycle: the one warm-up policy of every command ------------------------------------

    def unprepared(self, *, retry_failed: bool = False) -> builtins.list[str]:
        """Groups (MCP servers) whose tool lists are unknown: their tools are not listed yet.
        Groups whose last start failed (same configuration) only with `retry_failed`."""
        return [name for source in self.sources for name in source.unprepared(retry_failed=retry_failed)]

    def failed(self) -> dict[str, str]:
        """Groups whose last start failed and that are not retried: {group: error}."""
        out: dict[str, str] = {}
        for source in self.sources:
            out.update(source.failed())
        return out

    def mcp_source(self) -> Any:
        """The source of the configured MCP servers (resources, prompts, subscriptions go
        through its `request`); a one-line error when this catalog has none."""
        for source in self.sources:
            if source.serves_mcp_requests:
                return source
        raise GraphchatError("no MCP server is configured here (catalog/servers.yaml)")

    def groups(self) -> builtins.list[str]:
        """Every group (MCP server) of the catalog's sources."""
        return [name for source in self.sources for name in source.groups()]

    def prestart(self, names: builtins.list[str] | None = None) -> None:
        """Start groups in the background; errors surface on the calls that need them."""
        for source in self.sources:
            source.prestart(names)

    def start_problem(self, group: str) -> str | None:
        """One line naming `group` (an MCP server) and why it cannot start, or None."""
        return next((p for source in self.sources if (p := source.start_problem(group))), None)

    def unavailable(self, name: str) -> str | None:
        """For a tool name the catalog does not list: the line saying that its server cannot
        start, when that is why (never "unknown tool" for a tool of a broken server)."""
        return next((p for source in self.sources if (p := source.unavailable(name))), None)

    async def prepare(self, names: Iterable[str] | None = None, *, refresh: bool = False) -> dict[str, str]:
        """Make the tool lists of `names` (default: the unprepared groups; every group with
        `refresh`) known, concurrently, and let the catalog see the new tools. Returns
        {group: error} for the groups that failed; starts nothing when nothing is unknown."""
        import asyncio

        wanted = builtins.list(names) if names is not None else None
        if wanted is not None and not wanted:
            return {}
        if wanted is None and not refresh and not self.unprepared():
            return {}
        results = await asyncio.gather(*(source.prepare(wanted, refresh=refresh) for source in self.sources))
        self.invalidate()
        errors: dict[str, str] = {}
        for result in results:
            errors.update(result)
        return errors

    def reload(self) -> None:
        """Read the workspace again (plans added, edited or removed since) on the next lookup."""
        for source in self.sources:
            source.reload()
        self.invalidate()

    @property
    def collisions(self) -> builtins.list[tuple[str, builtins.list[tuple[str, str]]]]:
        return [c for source in self.sources for c in source.collisions]

    def _build(self) -> dict[str, tuple[ToolSpec, ToolSource]]:
        if self._index is None:
            index: dict[str, tuple[ToolSpec, ToolSource]] = {}
            warnings: list[str] = []
            for source in self.sources:
                for spec in source.specs():
                    if spec.name in index:
                        warnings.append(f"tool name {spec.name} is defined twice; the first one is kept")
                        continue
                    index[spec.name] = (spec, source)
            self._index = index
            self._index_warnings = warnings
        return self._index

    @property
    def warnings(self) -> builtins.list[str]:
        """What a person should know about the catalog (skipped servers, name clashes), once each."""
        self._build()
        found = [w for source in self.sources for w in source.warnings()] + self._index_warnings
        return builtins.list(dict.fromkeys(found))

    def list(self) -> list[ToolSpec]:
        return [spec for spec, _ in self._build().values()]

    def get(self, name: str) -> ToolSpec | None:
        entry = self._build().get(name)
        return entry[0] if entry else None

    def model_tools(
        self, patterns: Iterable[str] | None = None, *, in_plan: bool = False
    ) -> builtins.list[dict[str, Any]]:
        """Tool definitions for the model: every tool, optionally filtered by globs.

        `ask_user` is always kept (a big catalog must never push it out). `in_plan` (a plan's
        `agent` step): tools marked `meta.not_in_plans` (plan_and_execute) are left out.
        """
        from fnmatch import fnmatchcase

        pats = list(patterns) if patterns is not None else None
        tools = []
        for spec in self.list():
            if in_plan and spec.meta.get("not_in_plans"):
                continue
            if pats is not None and spec.name != "ask_user":
                if not any(fnmatchcase(spec.name, p) for p in pats):
                    continue
            tools.append(spec.to_model_tool())
        tools.sort(key=lambda t: (t["function"]["name"] != "ask_user",))
        return tools

    async def call(self, name: str, arguments: Any, ctx: CallContext | None = None) -> ToolResult:
        """Run one tool: validate, approve, call, time, record. Never raises for a tool problem."""
        import asyncio

        ctx = ctx or CallContext()
        events = ctx.events
        entry = self._build().get(name)
        started = time.perf_counter()
        if entry is None:
            result = ToolResult.error(self.unavailable(name) or unknown_tool(name, self._build()))
            if events:
                events.tool_finished(name, 0.0, True, result.error_message)
            return result
        spec, source = entry
        if arguments is None:
            arguments = {}
        problem = validate_arguments(spec, arguments)
        paused = False
        if problem is None and ctx.hook is not None:
            decided = await ctx.hook.before_call(spec, arguments, ctx)
            if isinstance(decided, ToolResult):  # skipped: the person's result stands for it
                if events:
                    events.tool_finished(name, 0.0, decided.is_error, "skipped: result injected")
                return decided
            paused = decided
        if problem is None and self.approver is not None:
            # a debug pause the person let through is the call's approval (deny rules still win)
            problem = await self.approver(spec, arguments, replace(ctx, assume_yes=True) if paused else ctx)
        if problem is not None:
            result = ToolResult.error(problem)
            if events:
                events.tool_finished(name, 0.0, True, problem)
            return result
        call = f"c{next(TURN_CALL_IDS.get() or self._call_ids)}"  # tells parallel calls apart in events
        log = _log or _catalog_log()
        logged = log.isEnabledFor(INFO)  # one check a call (a map makes 100,000 of them)
        if logged:
            log.debug("call %s (%s) from %s", name, call, ctx.surface)
            log.log(TRACE, "call %s arguments: %.2000r", name, arguments)
        if events:
            events.tool_started(name, arguments, call)
        current = CURRENT_CALL.set((name, call))
        try:
            result = await source.call(spec, arguments, ctx)
        except asyncio.CancelledError:
            if events:
                events.tool_finished(name, (time.perf_counter() - started) * 1000, True, "cancelled", call)
            raise
        except Exception as exc:  # a tool must never take the round down
            result = ToolResult.error(f"{name}: {describe_failure(exc)}")
        finally:
            CURRENT_CALL.reset(current)
        if result.is_error and ctx.hook is not None:
            result = await ctx.hook.after_call(spec, arguments, result, ctx)
        result.ms = (time.perf_counter() - started) * 1000
        if logged:
            log.info("%s %s in %.0f ms", name, "failed" if result.is_error else "done", result.ms)
            log.log(TRACE, "%s result: %.2000r", name, result.value)
        if events:
            events.tool_finished(
                name,
                result.ms,
                result.is_error,
                result.error_message if result.is_error else result.note,
                call,
            )
        # A result with a note is not what the tool returns when done (a parked plan): not learned.
        if (
            not result.is_error
            and result.note is None
            and self.record_shape is not None
            and spec.source != "core"
        ):
            try:
                self.record_shape(spec, result.value)
            except Exception:  # shape learning is best-effort, never a failed call
                pass
        return result

    async def aclose(self) -> None:
        for source in self.sources:
            try:
                await source.aclose()
            except Exception:
                pass
        for closer in self._closers:
            try:
                await closer()
            except Exception:
                pass


def similar_tools(name: str, names: Iterable[str]) -> list[str]:
    """Catalog names a mistyped or bare tool name may have meant, at most three: those whose
    tool part is `name` (`lookup` -> `probe__lookup`), then the close ones (difflib, cutoff
    0.6) by whole name or by tool part. Nothing is corrected."""
    known = builtins.list(dict.fromkeys(names))
    found = [n for n in known if n.endswith(f"__{name}")]
    parts: dict[str, builtins.list[str]] = {}
    for n in known:
        parts.setdefault(n.partition("__")[2] or n, []).append(n)
    found += close_matches(name, known)
    found += [n for part in close_matches(name.partition("__")[2] or name, parts) for n in parts[part]]
    return builtins.list(dict.fromkeys(found))[:3]


def unknown_tool(name: str, names: Iterable[str]) -> str:
    """`unknown tool: x`, with the names it may have meant."""
    guess = did_you_mean(name, (), close=similar_tools(name, names))
    return f"unknown tool: {name}" + (f" ({guess})" if guess else "")


def validate_arguments(spec: ToolSpec, arguments: Any) -> str | None:
    """None when the arguments fit the tool's input schema, else a message the model can act on."""
    if not isinstance(arguments, dict):
        return f"{spec.name}: arguments must be a JSON object, got {type(arguments).__name__}"
    schema = spec.input_schema
    if not schema:
        return None
    global _argument_problem
    if _argument_problem is None:  # a from-import in every call would cost more than the check
        _argument_problem = argument_problem
    problem = _argument_problem(schema, arguments)  # the schema's compiled check, cached
    if problem is None:
        return None
    refused, message = problem
    if refused:
        return f"{spec.name} cannot be called: its input schema {message}"
    return f"invalid arguments for {spec.name}: {message}"
