"""`graphchat mcp serve`: the workspace's plans as MCP tools over stdio.

Every loadable plan is published as `plan_<identifier>` (one underscore over serve) with its
input schema, description (+ exemplars) and a read-only hint when its family is `read`. The
list is rebuilt per request, so plan edits show up without a restart. A call goes through the
catalog's `plan__<identifier>` tool — `Catalog.call`, the one call path (validation, approvals,
events) — and comes back as structured content plus a JSON text block; a failure is an
`is_error` result carrying the message, never a JSON-RPC error.

Questions a plan asks (`ask` steps, approvals) reach the client through MCP elicitation, via
`ElicitationAsker` (a host of the one asker):
- a 2025-11-25 (legacy) session: an `elicitation/create` request pushed mid-call;
- a 2026-07-28 session, where a server may not push requests: the plan keeps running in a
  background task and the call returns an `InputRequiredResult` carrying the question; the
  client's retry (with `input_responses` and our `request_state` token) resumes it.
No elicitation capability → unavailable; accept → the answer; decline/cancel → declined; a
client error or timeout → unavailable.

stdout is the JSON-RPC wire: events go to stderr (or JSONL on stderr), nothing else is printed.
"""

from __future__ import annotations

import asyncio
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from graphchat.asks import Answer, Asker, Question, UnavailableAsker

if TYPE_CHECKING:
    from graphchat.catalog.base import Approver, CallContext, Catalog, ToolResult, ToolSpec
    from graphchat.events import EventSink
    from graphchat.host import Host

PREFIX = "plan_"
ANSWER_FIELD = "answer"  # the one form field of a question that has no schema of its own
INPUT_REQUIRED_VERSION = "2026-07-28"


def elicit_timeout() -> float:
    """Seconds to wait for the client's answer to one question (then: unavailable)."""
    try:
        return float(os.environ.get("GRAPHCHAT_ELICIT_TIMEOUT", "600"))
    except ValueError:
        return 600.0


def public_name(identifier: str) -> str:
    return PREFIX + identifier


# --- the asker -----------------------------------------------------------------------------------

# Sends one form elicitation, returns the client's ElicitResult (raises on a client error).
Elicit = Callable[[str, dict[str, Any]], Awaitable[Any]]


def question_schema(question: Question) -> tuple[dict[str, Any], str | None]:
    """The form schema of a question, and the field to unwrap from the answer (None: the whole
    form is the answer). Options and free-text questions become one `answer` field."""
    if question.schema is not None:
        schema = dict(question.schema)
        schema.setdefault("type", "object")
        schema.setdefault("properties", {})
        return schema, None
    field: dict[str, Any] = {"type": "string", "title": "Answer"}
    if question.options:
        field["enum"] = list(question.options)
    return {"type": "object", "properties": {ANSWER_FIELD: field}, "required": [ANSWER_FIELD]}, ANSWER_FIELD


class ElicitationAsker(Asker):
    """The one asker, hosted by an MCP client: questions go out as form elicitations.

    `elicit` is None when the client did not declare the form elicitation capability."""

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
                result = await self.elicit(question.prompt, schema)
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


# --- a plan run that outlives one request (2026-07-28 input round trips) -------------------------


class _Run:
    """One plan call on a 2026-07-28 session. Its task runs the plan; each question the asker
    sends becomes an InputRequiredResult, and the client's retry delivers the answer."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.outbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.answer: asyncio.Future[Any] | None = None
        self.key: str | None = None
        self.asked = 0
        self.task: asyncio.Task[Any] | None = None
        self.handler_waiting = False

    async def elicit(self, message: str, schema: dict[str, Any]) -> Any:
        from mcp.types import ElicitRequest, ElicitRequestFormParams

        self.asked += 1
        self.key = f"q{self.asked}"
        self.answer = asyncio.get_running_loop().create_future()
        request = ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
        await self.outbox.put(("question", request))
        return await self.answer

    def deliver(self, responses: dict[str, Any] | None) -> None:
        """The client's retry: hand the answer (or the lack of one) to the waiting question."""
        from mcp.types import ElicitResult

        future = self.answer
        if future is None or future.done():
            return
        response = (responses or {}).get(self.key or "")
        if response is None:
            future.set_exception(RuntimeError("the client's retry carried no answer"))
            return
        if not isinstance(response, ElicitResult):
            try:
                response = ElicitResult.model_validate(response.model_dump(by_alias=True, exclude_none=True))
            except Exception as exc:
                future.set_exception(RuntimeError(f"the client's answer is not an elicitation result: {exc}"))
                return
        future.set_result(response)


# --- the server ----------------------------------------------------------------------------------


class PlanServer:
    """The handlers of `mcp serve` over one catalog (MCP servers stay up between calls)."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.events = host.events
        self.catalog: Catalog = host.catalog
        self.runs: dict[str, _Run] = {}

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
            ident = spec.meta.get("plan") or spec.name[len("plan__") :]
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

        try:
            self.refresh()
            return ListToolsResult(tools=self.tools())
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
            return error_result(f"{params.name}: {type(exc).__name__}: {exc}")

    async def _call(self, ctx: Any, params: Any) -> Any:
        from graphchat.catalog.base import CallContext

        name = params.name
        if not name.startswith(PREFIX):
            return error_result(f"unknown tool: {name}")
        self.refresh()
        await self.catalog.prepare()  # servers with no cached tool list (only once)
        catalog_name = "plan__" + name[len(PREFIX) :]
        spec = self.catalog.get(catalog_name)
        if spec is None or spec.source != "plan":
            return error_result(f"unknown tool: {name}")
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
        call_ctx = CallContext(asker=asker, events=self.events, surface="mcp")
        result = await self.catalog.call(catalog_name, arguments, call_ctx)
        return to_call_result(publicize(result, spec, arguments))

    async def _start_run(self, spec: ToolSpec, arguments: dict[str, Any]) -> Any:
        from graphchat.catalog.base import CallContext

        catalog_name = spec.name

        run = _Run(secrets.token_urlsafe(16))
        asker = ElicitationAsker(run.elicit, self.events)
        call_ctx = CallContext(asker=asker, events=self.events, surface="mcp")

        async def go() -> None:
            try:
                result = await self.catalog.call(catalog_name, arguments, call_ctx)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                from graphchat.catalog.base import ToolResult

                result = ToolResult.error(f"{catalog_name}: {type(exc).__name__}: {exc}")
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

    async def _next(self, run: _Run) -> Any:
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


def publicize(result: ToolResult, spec: ToolSpec, arguments: Any) -> ToolResult:
    """An error as the client should read it: the tool's public name, and every problem with
    the arguments when they were refused (Catalog.call names only the first one)."""
    if not result.is_error or not isinstance(result.value, dict):
        return result
    from graphchat.catalog.base import ToolResult

    ident = spec.meta.get("plan") or spec.name[len("plan__") :]
    value = dict(result.value)
    if isinstance(value.get("error"), str):
        value["error"] = value["error"].replace(spec.name, public_name(ident))
    if "problems" not in value and isinstance(arguments, dict) and spec.input_schema:
        from graphchat.jsonschema_util import errors

        problems = errors(spec.input_schema, arguments)
        if problems:
            value["problems"] = problems
            value["input_schema"] = spec.input_schema
    return ToolResult(value, is_error=True, ms=result.ms)


def to_call_result(result: ToolResult) -> Any:
    """A ToolResult as an MCP CallToolResult: structured content (objects as they are, other
    values as {"result": …}) and the same JSON as one text block; errors carry their message."""
    import orjson
    from mcp.types import CallToolResult, TextContent

    value = result.value
    structured = value if isinstance(value, dict) else {"result": value}
    if result.is_error:
        text = result.error_message
        problems = value.get("problems") if isinstance(value, dict) else None
        if problems:
            text += "\nproblems:\n" + "\n".join(f"- {p}" for p in problems)
    else:
        text = orjson.dumps(value, default=str).decode()
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=result.is_error
    )


def error_result(message: str) -> Any:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(type="text", text=message)], structured_content={"error": message}, is_error=True
    )


# --- entry point ---------------------------------------------------------------------------------


def serve(home: str | None = None) -> int:
    """Run the stdio server until the client closes stdin."""
    import logging
    import sys

    from graphchat.events import sink_for_environment
    from graphchat.host import load_settings, open_host

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

        from graphchat import __version__

        plans = PlanServer(host)
        server = Server(
            "graphchat",
            version=__version__,
            instructions="The plans of a graphchat workspace: each plan_<name> tool runs one plan.",
            on_list_tools=plans.list_tools,
            on_call_tool=plans.call_tool,
        )
        try:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await plans.aclose()

    asyncio.run(main())
    return 0
