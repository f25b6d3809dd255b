"""`graphchat mcp serve`: the handlers over one catalog, and the stdio entry point.

A call of `plan_<identifier>` goes through the catalog's `plan__<identifier>` tool —
`Catalog.call`, the one call path (validation, approvals, events). Its questions go to the
client: pushed mid-call on a 2025-11-25 session, as InputRequiredResult round trips on a
2026-07-28 one (`runs`).
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from graphchat import __version__
from graphchat.asks import Asker, UnavailableAsker
from graphchat.catalog.base import CallContext, ToolResult
from graphchat.errors import GraphchatError
from graphchat.events import EventSink, sink_for_environment
from graphchat.fsutil import describe_failure
from graphchat.host import load_settings, open_host
from graphchat.mcp_server import parking
from graphchat.mcp_server.asker import ElicitationAsker, form_elicitation_declared
from graphchat.mcp_server.convert import (
    PREFIX,
    error_result,
    public_name,
    publicize,
    to_call_result,
    unknown_tool,
)
from graphchat.mcp_server.runs import Run
from graphchat.plans.discovery import plan_files
from graphchat.plans.model import PLAN_TOOL_PREFIX

if TYPE_CHECKING:
    from graphchat.catalog.base import Approver, CallContext, Catalog, ToolSpec
    from graphchat.host import Host

INPUT_REQUIRED_VERSION = "2026-07-28"
MAX_RUNNING_CALLS = 8  # plans running at once in one session; more calls wait for a place


class PlanServer:
    """The handlers of `mcp serve` over one catalog (MCP servers stay up between calls)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.events = host.events
        self.catalog: Catalog = host.catalog
        self.runs: dict[str, Run] = {}
        self.session: Any = None  # the client's session, once it listed the tools
        # Each tools/call is its own task (the SDK's dispatcher); at most MAX_RUNNING_CALLS
        # plans run at once, and a running plan shares the loop (`plans.runtime.checkpoint`),
        # so a short call never waits for a long one to end.
        self.running = asyncio.Semaphore(MAX_RUNNING_CALLS)

    # -- what is published --

    def refresh(self) -> None:
        """Plans added, edited or removed since the last request show (read again)."""
        self.catalog.reload()

    def plan_specs(self) -> list[ToolSpec]:
        return [s for s in self.catalog.list() if s.source == "plan"]

    def tools(self) -> list[Any]:
        from mcp.types import Tool, ToolAnnotations

        tools = []
        for spec in self.plan_specs():
            ident = spec.meta["plan"]
            annotations = ToolAnnotations(
                title=spec.meta.get("title"),
                read_only_hint=spec.family == "read",
                destructive_hint=None if spec.family == "read" else spec.family == "destructive",
            )
            tools.append(
                Tool(
                    name=public_name(ident),
                    description=spec.description or ident,
                    input_schema=spec.input_schema or {"type": "object", "properties": {}},
                    annotations=annotations,
                )
            )
        return tools

    # -- handlers (never raise: an exception would be a -32603 for the client) --

    async def list_tools(self, ctx: Any, params: Any) -> Any:
        from mcp.types import ListToolsResult

        # ruamel: imported when used, not at start-up
        from graphchat.mcp_server import authoring

        self.session = ctx.session  # the plans folder's watcher tells this client of changes
        try:
            self.refresh()
            return ListToolsResult(tools=self.tools() + authoring.tools() + parking.tools())
        except Exception as exc:
            self._warn(f"mcp serve: listing plans failed: {type(exc).__name__}: {exc}")
            return ListToolsResult(tools=[])

    async def call_tool(self, ctx: Any, params: Any) -> Any:
        try:
            if params.request_state:
                return await self._resume(params)
            return await self._call(ctx, params)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a bug of ours is still a result, not a protocol error
            return error_result(f"{params.name}: {describe_failure(exc)}")

    async def _call(self, ctx: Any, params: Any) -> Any:
        name = params.name
        if name.startswith("graph_"):
            return await self._author(ctx, name, params.arguments or {})
        if name in (parking.REQUESTS_TOOL, parking.ANSWER_TOOL):
            return await self._requests(ctx, name, params.arguments or {})
        if not name.startswith(PREFIX):
            return unknown_tool(name)
        self.refresh()
        await self.catalog.prepare()  # servers with no cached tool list (only once)
        catalog_name = PLAN_TOOL_PREFIX + name[len(PREFIX) :]
        spec = self.catalog.get(catalog_name)
        if spec is None or spec.source != "plan":
            return unknown_tool(name)
        arguments = params.arguments if params.arguments is not None else {}
        session = ctx.session
        declared = form_elicitation_declared(session.client_capabilities)
        if declared and _input_required(ctx.protocol_version):
            return await self._start_run(spec, arguments)
        if declared and session.can_send_request:
            request_id = ctx.request_id

            async def push(message: str, schema: dict[str, Any]) -> Any:
                return await session.elicit_form(message, schema, related_request_id=request_id)

            asker: Asker = ElicitationAsker(push, self.events)
        else:
            asker = UnavailableAsker(self.events)
        events = StepProgress(self.events, _progress_reporter(ctx)) if self.events is not None else None
        # Nobody to ask: a question parks the run (its record on disk), answered by graphchat_answer.
        waits = None if asker.can_answer else self._fresh_parking(spec, arguments)
        return await self._run(
            ctx, spec, arguments, CallContext(asker=asker, events=events, surface="mcp"), waits
        )

    def _fresh_parking(self, spec: ToolSpec, arguments: dict[str, Any]) -> parking.ServedParking | None:
        for source in self.catalog.sources:
            plan = source.plans().get(spec.meta["plan"])
            if plan is not None:
                return parking.fresh(self.host.settings, plan, arguments, self.events)
        return None

    async def _run(
        self, ctx: Any, spec: ToolSpec, arguments: Any, call_ctx: CallContext, waits: Any = None
    ) -> Any:
        """One plan call through the catalog (`waits`: where it parks), as the client's result."""
        from dataclasses import replace

        events = call_ctx.events
        async with self.running:
            result = await self.catalog.call(spec.name, arguments, replace(call_ctx, parking=waits))
        if isinstance(events, StepProgress):
            await events.drain()
        if waits is not None:
            if (parked := parking.finish(waits, result)) is not None:
                return parked
        return to_call_result(publicize(result, spec, arguments))

    async def _requests(self, ctx: Any, name: str, arguments: dict[str, Any]) -> Any:
        """graphchat_requests / graphchat_answer: the questions of this server's parked runs."""
        import orjson
        from mcp.types import CallToolResult, TextContent

        settings = self.host.settings
        if name == parking.REQUESTS_TOOL:
            value = parking.list_requests(settings)
            text = orjson.dumps(value).decode()
            return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=value)
        try:
            store, request, record = parking.settle(settings, arguments)
        except GraphchatError as exc:
            return error_result(f"{name}: {exc.message}")
        waiting = parking.still_waiting(store, record)
        if waiting:  # the run resumes once every request it waits on is settled
            return parking.parked_result(waiting)
        self.refresh()
        ident = record.data["plan"]["identifier"]
        spec = self.catalog.get(PLAN_TOOL_PREFIX + ident)
        if spec is None or spec.source != "plan":
            return error_result(f"{name}: plan '{ident}' of request {request.id} is not in this workspace")
        try:
            waits = parking.resumed(store, record, self.events, request.id)
        except GraphchatError as exc:
            return error_result(f"{name}: {exc.message}")
        try:
            call_ctx = CallContext(asker=UnavailableAsker(self.events), events=self.events, surface="mcp")
            return await self._run(ctx, spec, record.data.get("inputs") or {}, call_ctx, waits)
        finally:
            parking.release(waits)

    async def _author(self, ctx: Any, name: str, arguments: dict[str, Any]) -> Any:
        """graph's authoring tools; a plan file written is announced with tools/list_changed."""
        import orjson
        from mcp.types import CallToolResult, TextContent

        # ruamel: imported when used, not at start-up
        from graphchat.mcp_server import authoring

        if name not in authoring.TOOLS:
            return unknown_tool(name)
        if name == "graph_tools_test":
            await self.catalog.prepare()
        call_ctx = CallContext(asker=UnavailableAsker(self.events), events=self.events, surface="mcp")
        value, is_error = await authoring.call(name, arguments, self.host.settings, self.catalog, call_ctx)
        if name in authoring.MUTATING and not is_error:
            self.refresh()
            try:
                await ctx.session.send_tool_list_changed()
            except Exception as exc:  # a client without the notification does not undo the edit
                self._warn(f"mcp serve: could not send tools/list_changed: {exc}")
        text = orjson.dumps(value, default=str).decode()
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=value, is_error=is_error
        )

    async def _start_run(self, spec: ToolSpec, arguments: dict[str, Any]) -> Any:
        catalog_name = spec.name

        run = Run(secrets.token_urlsafe(16))
        asker = ElicitationAsker(run.elicit, self.events)
        call_ctx = CallContext(asker=asker, events=self.events, surface="mcp")

        async def go() -> None:
            try:
                async with self.running:
                    result = await self.catalog.call(catalog_name, arguments, call_ctx)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                result = ToolResult.error(f"{catalog_name}: {describe_failure(exc)}")
            await run.outbox.put(("done", publicize(result, spec, arguments)))
            if not run.handler_waiting:  # nobody came back for it (the client gave up)
                self.runs.pop(run.token, None)

        self.runs[run.token] = run
        run.task = asyncio.create_task(go())
        return await self._next(run)

    async def _resume(self, params: Any) -> Any:
        run = self.runs.get(params.request_state)
        if run is None:
            return error_result(f"{params.name}: this run is unknown or expired (request_state)")
        run.deliver(params.input_responses)
        return await self._next(run)

    async def _next(self, run: Run) -> Any:
        """Wait for the run's next question (→ InputRequiredResult) or its end (→ the result)."""
        from mcp.types import InputRequiredResult

        run.handler_waiting = True
        try:
            kind, item = await run.outbox.get()
        except asyncio.CancelledError:  # the client cancelled the call: stop the plan too
            self.runs.pop(run.token, None)
            if run.task is not None:
                run.task.cancel()
            raise
        finally:
            run.handler_waiting = False
        if kind == "question":
            return InputRequiredResult(input_requests={run.key or "q": item}, request_state=run.token)
        self.runs.pop(run.token, None)
        return to_call_result(item)

    def _warn(self, message: str) -> None:
        if self.events is not None:
            self.events.warning(message)

    async def aclose(self) -> None:
        for run in list(self.runs.values()):
            if run.task is not None:
                run.task.cancel()
        self.runs.clear()
        await self.host.aclose()


class StepProgress(EventSink):
    """Passes a plan run's events on, and reports each finished step to the MCP client as a
    progress notification of its tools/call (a no-op when the client sent no progress token)."""

    def __init__(self, inner: EventSink, report: Any) -> None:
        self.inner = inner
        self.report = report
        self.done = 0
        self.pending: set[asyncio.Task[None]] = set()

    def emit(self, event: str, **fields: Any) -> None:
        if event == "step_finished":
            self.done += 1
            mark = "failed" if fields.get("is_error") else "done"
            message = f"step {fields.get('step')} ({fields.get('tool')}) {mark}"
            task = asyncio.get_running_loop().create_task(self.report(float(self.done), None, message))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)
        self.inner.emit(event, **fields)

    def waiting(self, what: str | None) -> None:
        self.inner.waiting(what)

    async def drain(self) -> None:
        """Every progress notification sent before the result goes out."""
        if self.pending:
            await asyncio.gather(*self.pending, return_exceptions=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _progress_reporter(ctx: Any) -> Any:
    """An async (progress, total, message) → notifications/progress against the call's token."""
    meta = ctx.meta or {}
    token = meta.get("progress_token", meta.get("progressToken"))

    async def report(progress: float, total: float | None, message: str | None) -> None:
        if token is None:
            return
        await ctx.session.send_progress_notification(
            token, progress, total, message, related_request_id=ctx.request_id
        )

    return report


def plans_signature(plans_dir: Any) -> tuple[tuple[str, int, int], ...]:
    """What changes when a plan file is added, edited or removed (names, sizes, mtimes)."""
    out = []
    for path in plan_files(plans_dir):
        try:
            info = path.stat()
        except OSError:
            continue
        out.append((path.name, info.st_size, info.st_mtime_ns))
    return tuple(sorted(out))


async def watch_plans(plans: PlanServer, interval: float = 1.0) -> None:
    """Tell the client `tools/list_changed` when a plan file changes (its plan_ tools follow)."""
    plans_dir = plans.host.settings.plans_dir
    seen = plans_signature(plans_dir)
    while True:
        await asyncio.sleep(interval)
        now = plans_signature(plans_dir)
        if now == seen:
            continue
        seen = now
        if plans.session is None:
            continue
        plans.refresh()
        try:
            await plans.session.send_tool_list_changed()
        except Exception:  # the client went away or does not take the notification
            pass


def client_consent(policy: Approver) -> Approver:
    """The client's tools/call of a plan is its own consent (MCP clients approve calls); the
    deny list still applies. Tools the plan calls are approved as in any other host."""

    async def approve(spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> str | None:
        if not ctx.chain and spec.source == "plan":
            from dataclasses import replace

            ctx = replace(ctx, assume_yes=True)
        return await policy(spec, arguments, ctx)

    return approve


def _input_required(protocol_version: str | None) -> bool:
    from mcp_types.version import is_version_at_least

    return protocol_version is not None and is_version_at_least(protocol_version, INPUT_REQUIRED_VERSION)


def serve(home: str | None = None) -> int:
    """Run the stdio server until the client closes stdin."""
    import logging
    import sys

    settings = load_settings(home)  # a broken workspace: a clear error before any JSON-RPC
    # Library loggers must never reach stdout; warnings and worse go to stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    # Each call brings its own asker (the client's elicitation, see `_call`): none at the host.
    host = open_host(
        settings, events=sink_for_environment(quiet=True), here=UnavailableAsker, approver=client_consent
    )

    async def main() -> None:
        from mcp.server import Server
        from mcp.server.stdio import stdio_server

        plans = PlanServer(host)
        server = Server(
            "graphchat",
            version=__version__,
            instructions="The plans of a graphchat workspace: each plan_<name> tool runs one plan. The "
            "graph_plan_* tools list, read, validate and edit plans one change at a time (an edit that would "
            "break a plan is refused); graph_tools_* list and show the tools a step may call.",
            on_list_tools=plans.list_tools,
            on_call_tool=plans.call_tool,
        )
        watcher = asyncio.get_running_loop().create_task(watch_plans(plans))
        try:
            async with stdio_server() as (read_stream, write_stream):
                from mcp.server import NotificationOptions

                options = server.create_initialization_options(NotificationOptions(tools_changed=True))
                await server.run(read_stream, write_stream, options)
        finally:
            watcher.cancel()
            await plans.aclose()

    asyncio.run(main())
    return 0
