"""One MCP server's connection: its lifecycle, its calls and the elicitation bridge.

- Each connection lives in its own long-lived task: the SDK's context managers (anyio task
  groups) must be entered and exited in the same task. Calls from any task are multiplexed
  on the one session, so 8 slow calls to one server take as long as one.
- A crashed, hung or never-started server turns into an error ToolResult naming the server
  and the cause; the next call restarts it (a server that fails to start twice in a row is
  not tried again in this run). Server stderr goes to its log file.
- A connection knows nothing of the source that owns it: it reports what it learns through
  two callbacks, `on_tools` (a start read the tool list) and `on_error` (a start failed or
  the connection broke).
- A server's elicitation request is asked with the asker of the call it belongs to; its
  sampling request is handed to `sampler` (`mcp_sampling.serve_sampling`) with the context of
  the calls in flight, when they all belong to one turn.
- A server's own question (elicitation, sampling approval) that nobody here can answer parks
  the call it belongs to (issue 19, issue 25): the server is told no at once (so the SDK does
  not hang), and the call raises `asks.Parked` when it returns, like an approval of the call
  itself. On resume the call is made again and the stored answer settles the same question.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.asks import Parked, Question
from graphchat.catalog.base import CURRENT_CALL, CallContext, ToolResult
from graphchat.catalog.mcp.logs import CappedLog, sdk_log_handler
from graphchat.catalog.mcp.results import map_result, tool_record
from graphchat.catalog.mcp.sampling import USER_REJECTED
from graphchat.catalog.process_groups import exit_code, server_groups
from graphchat.ci import memory_storage
from graphchat.errors import GraphchatError
from graphchat.fsutil import failed_write_message
from graphchat.llm.budget import current as current_budget
from graphchat.llm.budget import spending

if TYPE_CHECKING:
    import asyncio

    from graphchat.asks import Asker
    from graphchat.catalog.mcp.config import ServerConfig

START_TIMEOUT_S = 30.0  # connect + list tools; the SDK alone may wait 15 s on a silent server
MAX_START_FAILURES = 2  # a failed start is retried once by the next call, then given up
CLOSE_TIMEOUT_S = 8.0  # the SDK's own shutdown escalation is bounded (≈ 2 s + 2 s + 2 s)
CALL_GRACE_S = 5.0  # backstop over the SDK's per-call read timeout

# The CallContext, tool and id of the call being made: elicitation callbacks use its asker.
_current_call: contextvars.ContextVar[tuple[CallContext, str, int] | None] = contextvars.ContextVar(
    "graphchat_mcp_call", default=None
)


class ServerUnavailable(Exception):
    """The server could not be started or reached; the message names the cause."""


def describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the SDK's exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [describe(e) for e in exc.exceptions]
        return "; ".join(dict.fromkeys(leaves)) or type(exc).__name__

    if isinstance(exc, GraphchatError):  # e.g. an unset ${VAR}: its message is the whole story
        return exc.message
    if isinstance(exc, FileNotFoundError):
        return f"command not found: {exc.filename or exc}"
    if isinstance(exc, TimeoutError):
        return "timed out"
    code = getattr(exc, "code", None)
    message = getattr(exc, "message", None)
    if isinstance(code, int) and isinstance(message, str):
        if code == -32000:
            return "connection closed (the server exited or crashed)"
        return f"{message} (MCP error {code})"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def cannot_start(server: str, reason: str, log_path: Path | None = None) -> str:
    """The one line every command gives for a server that cannot start: the server, the
    reason (the unset variable and its field, the command not found, the server's last log
    lines) and its log file."""
    for prefix in ("failed to start: ", f"MCP server '{server}': ", f"server '{server}': "):
        reason = reason.removeprefix(prefix)
    where = f" (log: {log_path})" if log_path is not None and log_path.exists() else ""
    return f"MCP server '{server}' cannot start: {reason}{where}"


def _log_tail(path: Path, offset: int, lines: int = 2) -> str:
    """The last lines the server wrote to its log since `offset` (for error messages)."""
    try:
        with open(path, "rb") as handle:
            if offset > os.fstat(handle.fileno()).st_size:  # rotated since: read what there is
                offset = 0
            handle.seek(offset)
            data = handle.read()[-4000:]
    except OSError:
        return ""
    rows = [r.strip() for r in data.decode("utf-8", "replace").splitlines() if r.strip()]
    return " | ".join(rows[-lines:])


_sdk_logs_routed = False


def _quiet_sdk_logs(log_dir: Path) -> None:
    """The SDK logs transport trouble (e.g. "Session termination failed") through `logging`;
    without a handler Python prints warnings on stderr, in the middle of the answer. Send them
    to catalog/logs/client.log instead."""
    global _sdk_logs_routed
    if _sdk_logs_routed:
        return
    import logging

    _sdk_logs_routed = True
    handler = sdk_log_handler(log_dir)  # capped, rotated, repeated complaints counted
    for name in ("mcp", "httpx2", "httpx"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(handler)
            logger.propagate = False


# --- one server -------------------------------------------------------------------------------


class Connection:
    """One configured server: its connection task, session, state and in-flight calls."""

    def __init__(
        self,
        config: ServerConfig,
        *,
        log_path: Path,
        on_tools: Callable[[list[dict[str, Any]]], None],
        on_error: Callable[[str], None],
        roots: Callable[[], list[tuple[str, str]]] | None = None,
        on_warning: Callable[[str], None] | None = None,
        sampler: Callable[[str, Any, CallContext | None], Awaitable[Any]] | None = None,
        on_resource_updated: Callable[[str], None] | None = None,
    ) -> None:
        self.config = config
        self.roots = roots  # (uri, name) of the folders the server may work in (MCP roots)
        self.sampler = sampler  # serves a sampling request: (server, params, context of its call)
        self._log_stream: Any = None  # the server's log: its logging notifications go there too
        self.on_warning = on_warning  # something the person should know (the log cannot be opened)
        self.name = config.name
        self.log_path = log_path
        self.on_tools = on_tools  # a start (or a relist) read the server's tool list
        self.on_error = on_error  # a start failed or the connection broke (the message says why)
        self.on_resource_updated = on_resource_updated  # a subscribed resource changed (its URI)
        # the resources subscribed on this server (`resources/subscribe`): renewed at each start,
        # since a server that restarted has forgotten them
        self.subscribed: set[str] = set()
        self.state = "stopped"  # stopped | starting | running | failed | closed
        self.client: Any = None
        self.last_error: str | None = None
        self.start_failures = 0
        self.starts = 0
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[Any] | None = None
        self._stop: asyncio.Event | None = None
        self._start_deadline: asyncio.Timeout | None = None
        self._old_tasks: set[asyncio.Task[None]] = set()
        self._inflight: dict[int, CallContext] = {}
        self._inflight_tools: dict[int, str] = {}  # the tool each call in flight called
        # The context each call in flight was made in: a sampling request it serves runs in it
        # (a plan's step, whose usage `by_step` counts it under).
        self._call_contexts: dict[int, contextvars.Context] = {}
        self._budgets: dict[int, Any] = {}  # the budget of each call in flight (its turn's or run's)
        self._call_ids = 0
        # A call whose server's question parked (asks.Parked): raised by the call when it returns.
        self._parked: dict[int, BaseException] = {}
        self._closed = False
        # Calls waiting for an answer: told at once when the SDK drops an answer it cannot read.
        self._unreadable: set[asyncio.Future[str]] = set()

    # lifecycle -------------------------------------------------------------------------------

    def _alive(self) -> bool:
        return self._task is not None and not self._task.done() and self.state in ("starting", "running")

    def start(self) -> asyncio.Future[Any]:
        """The future of a running session, starting the server if needed (non-blocking)."""
        import asyncio

        if self._alive() and self._ready is not None:
            return self._ready
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Any] = loop.create_future()
        if self._closed:
            ready.set_exception(ServerUnavailable("the catalog is closed"))
            return ready
        if self.start_failures >= MAX_START_FAILURES:
            ready.set_exception(
                ServerUnavailable(
                    f"failed to start {self.start_failures} times ({self.last_error}); not retried"
                )
            )
            return ready
        if self._task is not None and not self._task.done():
            self._old_tasks.add(self._task)  # still shutting down; aclose waits for it
            self._task.add_done_callback(self._old_tasks.discard)
        self._ready = ready
        self._stop = asyncio.Event()
        self.state = "starting"
        self.starts += 1
        self._task = loop.create_task(self._run(ready, self._stop), name=f"mcp-server-{self.name}")
        return ready

    async def ensure(self) -> Any:
        """The live client, starting the server if needed; ServerUnavailable when it cannot."""
        import asyncio

        ready = self.start()
        # Shielded: a cancelled caller must not cancel the start other callers are waiting on.
        return await asyncio.shield(ready)

    async def _run(self, ready: asyncio.Future[Any], stop: asyncio.Event) -> None:
        import asyncio
        from contextlib import AsyncExitStack

        log_path = self.log_path
        offset = 0
        capped = None
        spawned: list[Any] = []
        try:
            expanded = self.config.expanded_to_start()  # unset ${VAR}, missing cwd: fail before starting
            async with AsyncExitStack() as stack:
                spawned = stack.enter_context(server_groups())  # last out: kills what the server left behind

                # The server's stderr through a pipe into a capped, rotated log file; when that
                # file cannot be opened (a read-only or full disk), to a null sink: the server
                # still starts, and a warning says where its stderr did not go.
                errlog: Any

                if memory_storage():  # GRAPHCHAT_STORAGE=memory: no log file is written
                    errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
                    self._log_stream = None
                else:
                    try:
                        capped = CappedLog(
                            log_path,
                            f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.config.where}\n",
                        )
                    except OSError as exc:
                        if self.on_warning is not None:
                            self.on_warning(
                                f"MCP server '{self.name}': its stderr goes nowhere, the log cannot be "
                                f"opened ({failed_write_message(exc, log_path)})"
                            )
                        errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115
                        self._log_stream = None  # logging notifications have nowhere to go either
                    else:
                        stack.callback(capped.close)
                        errlog = capped.stream
                        self._log_stream = errlog
                        offset = capped.offset
                try:
                    async with asyncio.timeout(START_TIMEOUT_S) as deadline:
                        # aclose() ends a start by moving this deadline to now: the same single
                        # cancellation as a start timeout, which the SDK's shielded cleanup
                        # survives (it then kills the process). A second, native task.cancel()
                        # during that cleanup can leave the child and its pipe reader behind.
                        self._start_deadline = deadline
                        if stop.is_set():
                            deadline.reschedule(asyncio.get_running_loop().time())
                        client = await self._connect(stack, expanded, errlog)
                        tools = await self._list_tools(client)
                finally:
                    self._start_deadline = None
                self.client = client
                self.state = "running"
                self.start_failures = 0
                import logging

                logging.getLogger("graphchat.catalog.mcp").info(
                    "MCP server '%s' started: %d tools", self.name, len(tools)
                )
                self.on_tools(tools)
                ready.set_result(client)
                if self.subscribed:
                    await self._resubscribe(client)
                await stop.wait()
        except asyncio.CancelledError:
            self._finish(ready, "shut down while starting")
            raise
        except BaseException as exc:  # noqa: BLE001 - the SDK raises groups of anything
            if not isinstance(exc, Exception | BaseExceptionGroup):
                self._finish(ready, describe(exc))
                raise
            if stop.is_set():
                message = "shut down while starting"
            elif isinstance(exc, TimeoutError):
                message = f"no answer to the MCP handshake within {START_TIMEOUT_S:g} s"
            else:
                message = describe(exc).removeprefix(f"MCP server '{self.name}': ")

            code = exit_code(spawned)
            if code is not None and message.startswith("connection closed"):
                message = f"it exited with code {code}"
            if capped is not None:
                capped.wait(1.0)  # the last lines of a server that died are still in the pipe
            tail = _log_tail(log_path, offset) if offset else ""
            if tail and "command not found" not in message:
                message = f"{message}; server log: {tail}"
            self._finish(ready, message)
        else:
            self._finish(ready, None)

    def _finish(self, ready: asyncio.Future[Any], error: str | None) -> None:
        if ready is not self._ready:
            # An older generation winding down after a restart: the live one is not its business.
            if not ready.done():
                ready.set_exception(ServerUnavailable(f"failed to start: {error or 'replaced'}"))
            if not ready.cancelled():
                ready.exception()
            return
        self.client = None
        if not ready.done():
            self.start_failures += 1
            self.last_error = error or "stopped before it was ready"
            self.state = "failed"
            ready.set_exception(ServerUnavailable(f"failed to start: {self.last_error}"))
            self.on_error(self.last_error)
        elif error is not None and self.state == "running":
            self.last_error = error
            self.state = "failed"
            self.on_error(error)
        elif self.state in ("running", "starting"):
            self.state = "stopped"
        # Nobody else awaits a failed start future when it was a prestart: mark it retrieved.
        if ready.done() and not ready.cancelled():
            ready.exception()

    async def _connect(self, stack: Any, expanded: Any, errlog: Any) -> Any:
        import warnings

        from mcp import Client
        from mcp.shared.exceptions import MCPDeprecationWarning

        _quiet_sdk_logs(self.log_path.parent)
        # The SDK marks sampling, roots, logging and subscriptions deprecated in its newest
        # protocol revision; graphchat keeps them on the connection mode that has them (issue 25).
        warnings.filterwarnings("ignore", category=MCPDeprecationWarning)

        if self.config.transport == "http":
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            http = await stack.enter_async_context(
                httpx2.AsyncClient(
                    headers=expanded.headers,
                    timeout=httpx2.Timeout(30.0, read=max(300.0, self.config.timeout_s + CALL_GRACE_S)),
                )
            )
            transport = streamable_http_client(expanded.url, http_client=http)
        else:
            from mcp import StdioServerParameters
            from mcp.client.stdio import stdio_client

            params = StdioServerParameters(
                command=expanded.command or "", args=expanded.args, env=expanded.env or None, cwd=expanded.cwd
            )
            transport = stdio_client(params, errlog=errlog)
        # legacy = the initialize handshake (2025-11-25): every server speaks it, v1-style
        # `ctx.elicit` pushes work on it (they fail on 2026-07-28), and a silent server
        # fails in seconds instead of the fixed 10 s discover probe.
        declare = self.config.declares
        client = Client(
            transport,
            mode="legacy",
            elicitation_callback=self._on_elicit,
            message_handler=self._on_message,
            list_roots_callback=self._on_roots if self.declares_roots else None,
            sampling_callback=self._on_sampling if self.sampler is not None and declare("sampling") else None,
            logging_callback=self._on_log,
        )
        return await stack.enter_async_context(client)

    @staticmethod
    async def _list_tools(client: Any) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        for _page in range(100):
            page = await client.list_tools(cursor=cursor)
            tools.extend(tool_record(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def relist(self) -> None:
        """Ask a running server for its tool list again (its list may be stale); a server that
        fails to answer is broken (the next call restarts it). Nothing when it is not running."""
        if self.client is None:
            return
        try:
            self.on_tools(await self._list_tools(self.client))
        except Exception as exc:
            self._broken(describe(exc))

    def _broken(self, cause: str, runner: asyncio.Task[None] | None = None) -> None:
        """The session is unusable: let its task wind down; the next call starts a fresh one.

        `runner` is the connection task the failing call used: a late failure of an older
        generation must not stop the server that already replaced it."""
        if runner is not None and runner is not self._task:
            return
        if self.state == "running":
            self.state = "failed"
            self.last_error = cause
            self.on_error(cause)
        self.client = None
        if self._stop is not None:
            self._stop.set()

    def _request_stop(self) -> None:
        import asyncio

        if self._stop is not None:
            self._stop.set()
        deadline = self._start_deadline
        if deadline is not None:
            try:
                deadline.reschedule(asyncio.get_running_loop().time())
            except RuntimeError:  # the start has just finished: the stop event does the rest
                pass

    async def wound_down(self) -> None:
        """Wait until every earlier generation of this server (one that crashed and was
        replaced) has finished shutting down; the live one is left alone."""
        import asyncio

        old = [t for t in self._old_tasks if not t.done()]
        if old:
            await asyncio.gather(*old, return_exceptions=True)

    async def aclose(self) -> None:
        import asyncio

        self._closed = True
        self._request_stop()
        tasks = [t for t in (self._task, *self._old_tasks) if t is not None and not t.done()]
        if tasks:
            done, pending = await asyncio.wait(tasks, timeout=CLOSE_TIMEOUT_S)
            for task in pending:  # past the SDK's own kill escalation: cancel the task
                task.cancel()
            if pending:
                await asyncio.wait(pending, timeout=2.0)
        self.state = "closed"

    # calls ------------------------------------------------------------------------------------

    def _error(self, message: str) -> ToolResult:
        return ToolResult.error(f"MCP server '{self.name}': {message}", server=self.name)

    async def call(self, tool: str, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        import asyncio

        try:
            client = await self.ensure()
        except ServerUnavailable as exc:
            return ToolResult.error(cannot_start(self.name, str(exc), self.log_path), server=self.name)
        runner = self._task
        timeout = self.config.timeout_s
        self._call_ids += 1
        call_id = self._call_ids
        self._inflight[call_id] = ctx
        self._inflight_tools[call_id] = tool
        self._call_contexts[call_id] = contextvars.copy_context()

        self._budgets[call_id] = current_budget()
        token = _current_call.set((ctx, tool, call_id))
        call_task = asyncio.ensure_future(
            client.call_tool(
                tool, arguments, read_timeout_seconds=timeout, progress_callback=_progress_reporter(ctx)
            )
        )
        _current_call.reset(token)
        unreadable: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self._unreadable.add(unreadable)
        waiters: set[asyncio.Future[Any]] = {call_task, unreadable}
        if runner is not None:
            waiters.add(runner)
        try:
            # Race the call against the connection task: a server that dies must not leave
            # the call waiting for an answer that will never come.
            done, _ = await asyncio.wait(
                waiters, timeout=timeout + CALL_GRACE_S, return_when=asyncio.FIRST_COMPLETED
            )
        except asyncio.CancelledError:
            call_task.cancel()  # the SDK tells the server to cancel the tool
            raise
        finally:
            self._inflight.pop(call_id, None)
            self._inflight_tools.pop(call_id, None)
            self._call_contexts.pop(call_id, None)
            self._budgets.pop(call_id, None)
            self._unreadable.discard(unreadable)
            parked = self._parked.pop(call_id, None)
        if parked is not None:  # its server's question waits for a person: the call parks
            if call_task not in done:
                call_task.cancel()
            raise parked
        if call_task not in done and unreadable in done:
            call_task.cancel()
            return self._error(f"{tool} failed: its answer could not be read ({unreadable.result()})")
        if call_task not in done:
            call_task.cancel()
            if runner is not None and runner in done:
                cause = self.last_error or "the connection ended"
                self._broken(cause, runner)
                return self._error(f"the connection was lost during the call ({cause})")
            return self._error(f"{tool} did not answer within {timeout:g} s")
        return self._outcome(tool, call_task, timeout, runner)

    def _outcome(
        self, tool: str, call_task: asyncio.Future[Any], timeout: float, runner: asyncio.Task[None] | None
    ) -> ToolResult:
        import asyncio

        from mcp import MCPError

        try:
            result = call_task.result()
        except asyncio.CancelledError:
            # Not our cancellation (we were not cancelled): the transport tore the call down.
            self._broken("the connection was cancelled under the call", runner)
            return self._error("the connection was lost during the call (the server went away?)")
        except MCPError as exc:
            if exc.code == -32001:
                return self._error(f"{tool} did not answer within {timeout:g} s")
            if exc.code == -32000:
                cause = "connection closed during the call (the server exited or crashed)"
                self._broken(cause, runner)
                return self._error(cause)
            return self._error(f"{tool} failed: {exc.message} (MCP error {exc.code})")
        except RuntimeError as exc:
            if "structured content" in str(exc).lower() or "output schema" in str(exc).lower():
                return self._error(
                    f"{tool} returned output that breaks its own declared output schema: {exc}"
                )
            return self._error(f"{tool} failed: {describe(exc)}")
        except Exception as exc:  # transport errors (httpx2, anyio, OSError, validation)
            cause = describe(exc)
            if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx2", "anyio"):
                self._broken(cause, runner)
            return self._error(f"{tool} failed: {cause}")
        mapped = map_result(result)
        if mapped.is_error and isinstance(mapped.value, dict):
            mapped.value.setdefault("server", self.name)
        return mapped

    async def _on_message(self, message: Any) -> None:
        """What the SDK surfaces besides answers. A JSON-RPC answer it cannot read (nested
        deeper than its parser allows) is dropped by the SDK: the calls waiting on this server
        fail at once rather than waiting out their timeout. Junk lines are not answers: ignored.
        `tools/list_changed` reads the server's tool list again (the catalog's next listing has it);
        `resources/updated` (a subscribed resource changed) goes to `on_resource_updated`."""
        if isinstance(message, Exception) and "recursion limit" in str(message):
            for waiter in list(self._unreadable):
                if not waiter.done():
                    waiter.set_result("the server sent a message nested too deep to parse")
            return
        from mcp.types import ResourceUpdatedNotification, ToolListChangedNotification

        if isinstance(message, ResourceUpdatedNotification) and self.on_resource_updated is not None:
            self.on_resource_updated(str(message.params.uri))

        if isinstance(message, ToolListChangedNotification):
            import asyncio

            relisting = asyncio.get_running_loop().create_task(self.relist())
            self._old_tasks.add(relisting)  # awaited by aclose, like an older generation
            relisting.add_done_callback(self._old_tasks.discard)

    # roots, logging, prompts and resources ------------------------------------------------------

    async def _on_roots(self, context: Any) -> Any:
        """The folders this server may work in: the workspace, the current folder, settings.mcp_roots."""
        from mcp.types import ListRootsResult, Root

        found = self.roots() if self.roots is not None else []
        return ListRootsResult(roots=[Root.model_validate({"uri": uri, "name": name}) for uri, name in found])

    @property
    def declares_roots(self) -> bool:
        return self.roots is not None and self.config.declares("roots")

    async def roots_changed(self) -> None:
        """Tell the running server its roots changed (it asks for them again); a server that
        cannot be told is left as it is (its next start reads them anyway)."""
        import asyncio

        client = self.client
        if client is None or not self.declares_roots:
            return
        try:
            await asyncio.wait_for(client.send_roots_list_changed(), 5.0)
        except Exception:  # noqa: BLE001 - a broken connection is found by its next call
            pass

    async def _on_log(self, params: Any) -> None:
        """A server's logging notification: a line in its log (graphchat never sets a level)."""
        import orjson

        stream = self._log_stream
        if stream is None:
            return
        data = (
            params.data if isinstance(params.data, str) else orjson.dumps(params.data, default=str).decode()
        )
        where = f" {params.logger}" if getattr(params, "logger", None) else ""
        try:
            stream.write(f"[{params.level}{where}] {data}\n")
            stream.flush()
        except (OSError, ValueError):  # the log is closing with the server
            pass

    async def request(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """One MCP request beside tools (`list_prompts`, `get_prompt`, `list_resources`,
        `list_resource_templates`, `read_resource`), starting the server if needed;
        ServerUnavailable when it cannot start, the SDK's MCPError when the server refuses."""
        client = await self.ensure()
        result = await getattr(client, method)(*args, **kwargs)
        if method == "subscribe_resource":
            self.subscribed.add(str(args[0]))
        elif method == "unsubscribe_resource":
            self.subscribed.discard(str(args[0]))
        return result

    async def _resubscribe(self, client: Any) -> None:
        """Subscribe a restarted server again to what it was subscribed to (it forgot); a
        server that does not answer within 5 s or refuses is left as it is (noted in its log)."""
        import asyncio
        import logging

        for uri in sorted(self.subscribed):
            try:
                await asyncio.wait_for(client.subscribe_resource(uri), 5.0)
            except Exception as exc:  # noqa: BLE001 - a broken connection is found by its next call
                logging.getLogger("graphchat.catalog.mcp").warning(
                    "MCP server '%s': could not renew the subscription to %s: %s",
                    self.name,
                    uri,
                    describe(exc),
                )

    # sampling --------------------------------------------------------------------------------

    def _turn_context(self) -> CallContext | None:
        """The context of the calls in flight on this server (the latest one's) when they all
        belong to one turn — same asker, same usage counter; else None. A server's request does
        not say which call it serves: outside the warm helper, there is one turn anyway."""
        if not self._inflight:
            return None
        latest = self._inflight[max(self._inflight)]
        for ctx in self._inflight.values():
            if ctx.asker is not latest.asker or ctx.on_usage != latest.on_usage:
                return None
        return latest

    async def _on_sampling(self, context: Any, params: Any) -> Any:
        """A server asks for a completion from the person's model (see mcp_sampling)."""
        assert self.sampler is not None  # declared only with a sampler
        from mcp.types import ErrorData

        ctx = self._turn_context()
        latest = max(self._inflight) if ctx is not None and self._inflight else None
        budget = self._budgets.get(latest) if latest is not None else None
        sampler = self.sampler

        async def serve() -> Any:
            async with spending(budget):  # the request counts against the call's turn or run
                return await sampler(self.name, params, ctx)

        waits = ErrorData(
            code=USER_REJECTED,
            message="graphchat: the sampling request waits for the user's approval; "
            "the tool call will be made again once they answer",
        )
        return await self._in_call(latest, serve, waits)

    async def _in_call(
        self, call_id: int | None, work: Callable[[], Coroutine[Any, Any, Any]], waits: Any
    ) -> Any:
        """Serve a server's own request (sampling, elicitation) in the context of the call it
        belongs to (its plan step: usage `by_step`, where it parks). A question that parks
        (`asks.Parked`) is kept for that call, which raises it when it returns; the server is
        told `waits` meanwhile."""
        import asyncio

        context = self._call_contexts.get(call_id) if call_id is not None else None
        try:
            if context is None:
                return await work()
            # in the context of the call it serves (its plan step): not the connection task's
            return await asyncio.get_running_loop().create_task(work(), context=context.copy())
        except Parked as parked:
            if call_id is None or call_id not in self._inflight:  # no call to park: nobody waits
                return waits
            self._parked.setdefault(call_id, parked)
            return waits

    # the elicitation bridge ------------------------------------------------------------------

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """A server asks the person something: route it to the asker of the call it belongs to,
        naming the server and the tool. A push elicitation runs in the connection's task, outside
        the call's context: it belongs to the turn of the calls in flight when they are all of one
        turn (as sampling); calls of several turns in flight (the warm helper) → refused with an
        error to the server, never asked of the wrong person."""
        from mcp.types import ElicitResult

        current = _current_call.get()
        if current is not None:
            ctx: CallContext | None = current[0]
            tools = [current[1]]
            call_id: int | None = current[2]
        else:
            ctx = self._turn_context()
            if ctx is None and self._inflight:
                from mcp.types import INVALID_REQUEST, ErrorData

                return ErrorData(
                    code=INVALID_REQUEST,
                    message="graphchat cannot tell which conversation this question belongs to: "
                    "calls of several conversations are in flight on this server",
                )
            tools = sorted(set(self._inflight_tools.values()))
            call_id = max(self._inflight) if ctx is not None and self._inflight else None

        async def ask() -> Any:
            return await elicit(self.name, ctx.asker if ctx is not None else None, params, tools)

        return await self._in_call(call_id, ask, ElicitResult(action="cancel"))


def _progress_reporter(ctx: CallContext) -> Callable[[float, float | None, str | None], Any]:
    """A call's progress notifications as `tool_progress` events of the call they belong to."""
    current = CURRENT_CALL.get()

    async def report(progress: float, total: float | None, message: str | None) -> None:
        if ctx.events is not None and current is not None:
            ctx.events.tool_progress(current[0], current[1], progress, total, message)

    return report


async def elicit(server: str, asker: Asker | None, params: Any, tools: list[str] | None = None) -> Any:
    """An MCP elicitation request as a question to `asker`, labelled with the server and the
    `tools` it came from (`[t · confirm_push] Push main?`); its answer as the ElicitResult.
    Nobody to answer → the host parks the call (`Asker.park`), else cancel; declined → decline; url mode is not supported → decline."""
    from mcp.types import ElicitResult

    if getattr(params, "mode", "form") == "url":
        return ElicitResult(action="decline")
    if asker is None:
        return ElicitResult(action="cancel")

    schema = getattr(params, "requested_schema", None) or None
    label = f"{server} · {' or '.join(tools)}" if tools else server
    question = Question(
        prompt=f"[{label}] {params.message}",
        schema=schema if schema and schema.get("properties") else None,
        context={
            "server": server,
            "park_as": f"elicitation:{server}",
            **({"tool": tools[0]} if tools and len(tools) == 1 else {}),
        },
    )
    if asker.can_answer:
        answer = await asker.ask(question)
    else:  # nobody here: a host whose runs can wait parks the call; resumed, the stored answer
        stored = asker.park(question)
        if stored is None:
            return ElicitResult(action="cancel")
        answer = stored
    if not answer.answered:
        return ElicitResult(action="decline" if answer.reason == "declined" else "cancel")
    content = answer.value if isinstance(answer.value, dict) else {}
    return ElicitResult(action="accept", content=content)
