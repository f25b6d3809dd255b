"""MCP servers as a tool source: a lazy pool of connections plus a tool-list cache.

- `specs()` reads only the workspace cache (`catalog/cache/<server>-<confighash>.json`): no
  server starts and the MCP SDK is not imported. A server whose tools were never cached
  contributes no specs until `prepare()` starts it (`tools list` does that for uncached
  servers; an `ask`/`chat` turn does it at its start, concurrently, see `prepare_catalog`).
- A server starts when one of its tools is called (or on `prepare`/`prestart`); several start
  concurrently. Every start refreshes that server's cache.
- Each connection lives in its own long-lived task: the SDK's context managers (anyio task
  groups) must be entered and exited in the same task. Calls from any task are multiplexed
  on the one session, so 8 slow calls to one server take as long as one.
- A crashed, hung or never-started server turns into an error ToolResult naming the server
  and the cause; the next call restarts it (a server that fails to start twice in a row is
  not tried again in this run). Server stderr goes to `catalog/logs/<server>.log`.
- `aclose()` stops every server (the SDK closes stdin, then terminates the process group).
"""

from __future__ import annotations

import contextvars
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.mcp_config import ServerConfig, load_servers
from graphchat.catalog.process_groups import server_groups

if TYPE_CHECKING:
    import asyncio

    from graphchat.catalog.base import Catalog
    from graphchat.catalog.naming import NameMap
    from graphchat.events import EventSink
    from graphchat.workspace import Settings

START_TIMEOUT_S = 30.0  # connect + list tools; the SDK alone may wait 15 s on a silent server
MAX_START_FAILURES = 2  # a failed start is retried once by the next call, then given up
CLOSE_TIMEOUT_S = 8.0  # the SDK's own shutdown escalation is bounded (≈ 2 s + 2 s + 2 s)
CALL_GRACE_S = 5.0  # backstop over the SDK's per-call read timeout
LOG_MAX_BYTES = 1_000_000

# The CallContext of the tool call being made: elicitation callbacks use its asker.
_current_call: contextvars.ContextVar[CallContext | None] = contextvars.ContextVar(
    "graphchat_mcp_call", default=None
)


class ServerUnavailable(Exception):
    """The server could not be started or reached; the message names the cause."""


def _describe(exc: BaseException) -> str:
    """One line for an exception, unwrapping the SDK's exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        leaves = [_describe(e) for e in exc.exceptions]
        return "; ".join(dict.fromkeys(leaves)) or type(exc).__name__
    from graphchat.errors import GraphchatError

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


def _log_tail(path: Path, offset: int, lines: int = 2) -> str:
    """The last lines the server wrote to its log since `offset` (for error messages)."""
    try:
        with open(path, "rb") as handle:
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
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(log_dir / "client.log", encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    except OSError:
        handler = logging.NullHandler()
    for name in ("mcp", "httpx2", "httpx"):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(handler)
            logger.propagate = False


# --- results --------------------------------------------------------------------------------


def _content_entry(block: Any) -> dict[str, Any] | None:
    """A non-text content block as a typed JSON entry (images and resources are not dropped)."""
    kind = getattr(block, "type", None)
    if kind in ("image", "audio"):
        return {"type": kind, "mime_type": block.mime_type, "data": block.data}
    if kind == "resource_link":
        entry = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
        if getattr(block, "mime_type", None):
            entry["mime_type"] = block.mime_type
        if getattr(block, "description", None):
            entry["description"] = block.description
        return entry
    if kind == "resource":
        res = block.resource
        entry = {"type": "resource", "uri": str(res.uri)}
        if getattr(res, "mime_type", None):
            entry["mime_type"] = res.mime_type
        if getattr(res, "text", None) is not None:
            entry["text"] = res.text
        if getattr(res, "blob", None) is not None:
            entry["blob"] = res.blob
        return entry
    if kind is None:
        return None
    try:
        return block.model_dump(mode="json", exclude_none=True)
    except Exception:
        return {"type": str(kind)}


def _parse_json(text: str) -> tuple[bool, Any]:
    import orjson

    stripped = text.strip()
    if not stripped:
        return False, None
    try:
        return True, orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return False, None


def map_result(result: Any) -> ToolResult:
    """`CallToolResult` → ToolResult: structured_content, else JSON text, else `{text}`;
    other content as typed entries; structured content kept on error results."""
    texts: list[str] = []
    entries: list[dict[str, Any]] = []
    for block in result.content or []:
        if getattr(block, "type", None) == "text":
            texts.append(block.text)
        else:
            entry = _content_entry(block)
            if entry is not None:
                entries.append(entry)
    structured = result.structured_content
    if result.is_error:
        extra: dict[str, Any] = {}
        if structured is not None:
            extra["structured_content"] = structured
        if entries:
            extra["content"] = entries
        return ToolResult.error("\n".join(texts).strip() or "the tool reported an error", **extra)
    if structured is not None:
        return ToolResult(structured)
    value: Any
    if len(texts) == 1:
        ok, parsed = _parse_json(texts[0])
        value = parsed if ok else {"text": texts[0]}
    elif texts:
        parsed_all = [_parse_json(t) for t in texts]
        if all(ok for ok, _ in parsed_all):
            value = [v for _, v in parsed_all]
        else:
            value = {"text": "\n".join(texts)}
    else:
        value = None
    if entries:
        if value is None:
            value = {"content": entries}
        elif isinstance(value, dict) and "content" not in value:
            value = {**value, "content": entries}
        else:
            value = {"result": value, "content": entries}
    return ToolResult({} if value is None else value)


def _tool_record(tool: Any) -> dict[str, Any]:
    """What the cache keeps of one MCP tool (JSON, snake_case)."""
    record: dict[str, Any] = {"name": tool.name, "input_schema": tool.input_schema or {}}
    if tool.description:
        record["description"] = tool.description
    if getattr(tool, "title", None):
        record["title"] = tool.title
    if tool.output_schema:
        record["output_schema"] = tool.output_schema
    if tool.annotations is not None:
        record["annotations"] = tool.annotations.model_dump(mode="json", exclude_none=True)
    return record


# --- one server --------------------------------------------------------------------------------


class Connection:
    """One configured server: its connection task, session, state and in-flight calls."""

    def __init__(self, config: ServerConfig, source: McpSource) -> None:
        self.config = config
        self.source = source
        self.name = config.name
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
        self._call_ids = 0
        self._closed = False

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

        log_path = self.source.log_path(self.name)
        offset = 0
        try:
            expanded = self.config.expanded()  # an unset ${VAR}: fail before any process/request
            async with AsyncExitStack() as stack:
                stack.enter_context(server_groups())  # last out: kills what the server left behind
                log_path.parent.mkdir(parents=True, exist_ok=True)
                if log_path.exists() and log_path.stat().st_size > LOG_MAX_BYTES:
                    log_path.unlink()
                errlog = stack.enter_context(open(log_path, "a", encoding="utf-8"))  # noqa: SIM115
                errlog.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {self.config.where}\n")
                errlog.flush()
                offset = errlog.tell()
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
                self.source._tools_fetched(self.config, tools)
                ready.set_result(client)
                await stop.wait()
        except asyncio.CancelledError:
            self._finish(ready, "shut down while starting")
            raise
        except BaseException as exc:  # noqa: BLE001 - the SDK raises groups of anything
            if not isinstance(exc, Exception | BaseExceptionGroup):
                self._finish(ready, _describe(exc))
                raise
            if stop.is_set():
                message = "shut down while starting"
            elif isinstance(exc, TimeoutError):
                message = f"no answer to the MCP handshake within {START_TIMEOUT_S:g} s"
            else:
                message = _describe(exc).removeprefix(f"MCP server '{self.name}': ")
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
            self.source._record_status(self.name, error=self.last_error)
        elif error is not None and self.state == "running":
            self.last_error = error
            self.state = "failed"
            self.source._record_status(self.name, error=error)
        elif self.state in ("running", "starting"):
            self.state = "stopped"
        # Nobody else awaits a failed start future when it was a prestart: mark it retrieved.
        if ready.done() and not ready.cancelled():
            ready.exception()

    async def _connect(self, stack: Any, expanded: Any, errlog: Any) -> Any:
        from mcp import Client

        _quiet_sdk_logs(self.source.log_path("client").parent)

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
        client = Client(transport, mode="legacy", elicitation_callback=self._on_elicit)
        return await stack.enter_async_context(client)

    @staticmethod
    async def _list_tools(client: Any) -> list[dict[str, Any]]:
        tools: list[dict[str, Any]] = []
        cursor = None
        for _page in range(100):
            page = await client.list_tools(cursor=cursor)
            tools.extend(_tool_record(t) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    def _broken(self, cause: str, runner: asyncio.Task[None] | None = None) -> None:
        """The session is unusable: let its task wind down; the next call starts a fresh one.

        `runner` is the connection task the failing call used: a late failure of an older
        generation must not stop the server that already replaced it."""
        if runner is not None and runner is not self._task:
            return
        if self.state == "running":
            self.state = "failed"
            self.last_error = cause
            self.source._record_status(self.name, error=cause)
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
            return self._error(str(exc))
        runner = self._task
        timeout = self.config.timeout_s
        self._call_ids += 1
        call_id = self._call_ids
        self._inflight[call_id] = ctx
        token = _current_call.set(ctx)
        call_task = asyncio.ensure_future(client.call_tool(tool, arguments, read_timeout_seconds=timeout))
        _current_call.reset(token)
        waiters: set[asyncio.Future[Any]] = {call_task}
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
            return self._error(f"{tool} failed: {_describe(exc)}")
        except Exception as exc:  # transport errors (httpx2, anyio, OSError, validation)
            cause = _describe(exc)
            if isinstance(exc, OSError) or type(exc).__module__.split(".")[0] in ("httpx2", "anyio"):
                self._broken(cause, runner)
            return self._error(f"{tool} failed: {cause}")
        mapped = map_result(result)
        if mapped.is_error and isinstance(mapped.value, dict):
            mapped.value.setdefault("server", self.name)
        return mapped

    async def _on_elicit(self, request_ctx: Any, params: Any) -> Any:
        """A server asks the person something: route it to the asker of the call it belongs to."""
        from mcp.types import ElicitResult

        ctx = _current_call.get()
        if ctx is None and self._inflight:
            # Legacy push elicitation runs in the connection's task, outside the call's
            # context: use the latest in-flight call on this server (one host asker anyway).
            ctx = self._inflight[max(self._inflight)]
        asker = ctx.asker if ctx is not None else None
        if getattr(params, "mode", "form") == "url":
            return ElicitResult(action="decline")
        if asker is None or not asker.can_answer:
            return ElicitResult(action="cancel")
        from graphchat.asks import Question

        schema = getattr(params, "requested_schema", None) or None
        question = Question(
            prompt=f"[{self.name}] {params.message}",
            schema=schema if schema and schema.get("properties") else None,
            context={"server": self.name},
        )
        answer = await asker.ask(question)
        if not answer.answered:
            return ElicitResult(action="decline" if answer.reason == "declined" else "cancel")
        content = answer.value if isinstance(answer.value, dict) else {}
        return ElicitResult(action="accept", content=content)


# --- the source ---------------------------------------------------------------------------------


class McpSource(ToolSource):
    """Every configured MCP server as one ToolSource (see module doc)."""

    def __init__(
        self,
        settings: Settings,
        events: EventSink | None = None,
        *,
        servers: list[ServerConfig] | None = None,
    ) -> None:
        self.settings = settings
        self.events = events
        self._servers = servers
        self._config_warnings: list[str] = []
        self._connections: dict[str, Connection] = {}
        self._specs: list[ToolSpec] | None = None
        self._names: NameMap | None = None

    # configuration and cache --------------------------------------------------------------------

    @property
    def servers(self) -> list[ServerConfig]:
        if self._servers is None:
            self._servers = load_servers(
                self.settings.catalog_dir, self.settings.workspace, warnings=self._config_warnings
            )
        return self._servers

    def server(self, name: str) -> ServerConfig | None:
        return next((s for s in self.servers if s.name == name), None)

    @property
    def cache_dir(self) -> Path:
        return self.settings.catalog_dir / "cache"

    def cache_path(self, config: ServerConfig) -> Path:
        return self.cache_dir / f"{config.name}-{config.config_hash}.json"

    def log_path(self, server: str) -> Path:
        return self.settings.catalog_dir / "logs" / f"{server}.log"

    def cached(self, config: ServerConfig) -> dict[str, Any] | None:
        """The cached tool list document of a server, or None."""
        import orjson

        try:
            doc = orjson.loads(self.cache_path(config).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return None
        return doc if isinstance(doc, dict) and isinstance(doc.get("tools"), list) else None

    def uncached(self) -> list[str]:
        return [s.name for s in self.servers if self.cached(s) is None]

    def warnings(self) -> list[str]:
        self.servers  # noqa: B018 - loading the file is what finds them
        return list(self._config_warnings)

    def unprepared(self) -> list[str]:
        return self.uncached()

    def groups(self) -> list[str]:
        return [s.name for s in self.servers]

    def _write_json(self, path: Path, doc: Any) -> None:
        import orjson

        from graphchat.fsutil import write_atomic

        write_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))

    def _tools_fetched(self, config: ServerConfig, tools: list[dict[str, Any]]) -> None:
        """A server started: refresh its cache (dropping caches of its older configs)."""
        import re

        doc = {
            "server": config.name,
            "config_hash": config.config_hash,
            "fetched_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "tools": tools,
        }
        try:
            self._write_json(self.cache_path(config), doc)
            stale = re.compile(re.escape(config.name) + r"-[0-9a-f]{12}\.json")
            for path in self.cache_dir.glob(f"{config.name}-*.json"):
                if stale.fullmatch(path.name) and path != self.cache_path(config):
                    path.unlink(missing_ok=True)
        except OSError as exc:
            if self.events is not None:
                self.events.warning(f"could not cache the tools of MCP server '{config.name}': {exc}")
        self._record_status(config.name, error=None)
        self._specs = None

    def status_path(self, server: str) -> Path:
        return self.cache_dir / f"{server}.status.json"

    def _record_status(self, server: str, *, error: str | None) -> None:
        """Remember the last start / last error of a server for `mcp list` (best effort)."""
        import orjson

        path = self.status_path(server)
        try:
            doc = orjson.loads(path.read_bytes())
            if not isinstance(doc, dict):
                doc = {}
        except (OSError, orjson.JSONDecodeError):
            doc = {}
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        if error is None:
            doc["last_started_at"] = now
        else:
            doc.update(last_error=error, last_error_at=now)
        try:
            self._write_json(path, doc)
        except OSError:
            pass

    def status(self, server: str) -> dict[str, Any]:
        import orjson

        try:
            doc = orjson.loads(self.status_path(server).read_bytes())
        except (OSError, orjson.JSONDecodeError):
            return {}
        return doc if isinstance(doc, dict) else {}

    # specs ---------------------------------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """Tools of every server with a cached tool list. Starts nothing."""
        if self._specs is None:
            from graphchat.catalog.approvals import family_from_annotations
            from graphchat.catalog.naming import NameMap

            names = NameMap()
            specs: list[ToolSpec] = []
            for config in self.servers:
                doc = self.cached(config)
                if doc is None:
                    continue
                for tool in doc["tools"]:
                    real = tool.get("name")
                    if not isinstance(real, str) or not config.wants_tool(real):
                        continue
                    over = config.tool_overrides.get(real, {})
                    annotations = tool.get("annotations")
                    meta = {"server": config.name, "tool": real, "annotations": annotations or {}}
                    if tool.get("title"):
                        meta["title"] = tool["title"]
                    if "output_example" in over:
                        meta["output_example"] = over["output_example"]
                    specs.append(
                        ToolSpec(
                            name=names.add(config.name, real),
                            description=over.get("description") or tool.get("description") or "",
                            input_schema=tool.get("input_schema") or {"type": "object"},
                            source=f"mcp:{config.name}",
                            family=family_from_annotations(annotations, over.get("family")),
                            output_schema=over.get("output_schema") or tool.get("output_schema"),
                            meta=meta,
                        )
                    )
            self._specs = specs
            self._names = names
        return self._specs

    @property
    def collisions(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Catalog names that several real tools wanted (each one stays reachable)."""
        self.specs()
        return self._names.collisions if self._names is not None else []

    # starting ----------------------------------------------------------------------------------

    def connection(self, name: str) -> Connection:
        conn = self._connections.get(name)
        if conn is None:
            config = self.server(name)
            if config is None:
                raise KeyError(name)
            conn = self._connections[name] = Connection(config, self)
        return conn

    def prestart(self, names: list[str] | None = None) -> None:
        """Start servers in the background (e.g. while litellm imports); errors surface on calls."""
        for name in names if names is not None else [s.name for s in self.servers]:
            self.connection(name).start()

    async def prepare(self, names: list[str] | None = None, *, refresh: bool = False) -> dict[str, str]:
        """Start (concurrently) the servers whose tool list is unknown — or `names`, or all when
        `refresh` — so their tools are cached; returns {server: error} for those that failed."""
        import asyncio

        if names is None:
            names = [s.name for s in self.servers] if refresh else self.uncached()
        if refresh:
            for name in names:  # a running server's list may be stale too: ask it again
                conn = self.connection(name)
                if conn.client is not None:
                    try:
                        self._tools_fetched(conn.config, await conn._list_tools(conn.client))
                    except Exception as exc:
                        conn._broken(_describe(exc))
        conns = [self.connection(n) for n in names]
        results = await asyncio.gather(*(c.ensure() for c in conns), return_exceptions=True)
        errors = {}
        for conn, result in zip(conns, results, strict=True):
            if isinstance(result, BaseException):
                errors[conn.name] = (
                    str(result) if isinstance(result, ServerUnavailable) else _describe(result)
                )
        self._specs = None
        return errors

    # ToolSource ------------------------------------------------------------------------------------

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        server = spec.meta.get("server")
        tool = spec.meta.get("tool")
        if not server or not tool or self.server(server) is None:
            return ToolResult.error(f"{spec.name}: no such MCP tool (is the server still configured?)")
        return await self.connection(server).call(tool, arguments, ctx)

    async def aclose(self) -> None:
        """Stop every started server, concurrently; safe to call more than once."""
        import asyncio

        conns = list(self._connections.values())
        if conns:
            await asyncio.gather(*(c.aclose() for c in conns), return_exceptions=True)


def mcp_source(catalog: Catalog) -> McpSource | None:
    """The MCP source of a catalog, if it has one."""
    return next((s for s in catalog.sources if isinstance(s, McpSource)), None)


async def prepare_catalog(
    catalog: Catalog, *, refresh: bool = False, names: list[str] | None = None
) -> dict[str, str]:
    """Fill the tool-list cache of uncached (or all, with `refresh`) servers concurrently, and
    make the catalog see the new tools. Returns {server: error}. Call it at the start of a turn
    (together with `McpSource.prestart` if servers should warm up while litellm imports)."""
    source = mcp_source(catalog)
    if source is None:
        return {}
    errors = await source.prepare(names, refresh=refresh)
    catalog.invalidate()
    return errors
