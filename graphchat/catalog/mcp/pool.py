"""MCP servers as a tool source: a lazy pool of connections over a tool-list cache.

- `specs()` reads only the workspace cache (`mcp_cache`): no server starts and the MCP SDK is
  not imported. A server whose tools were never cached contributes no specs until `prepare()`
  starts it (`tools list` does that for uncached servers; an `ask`/`chat` turn does it at its
  start, concurrently, through `Catalog.prepare`).
- A server starts when one of its tools is called (or on `prepare`/`prestart`); several start
  concurrently. Every start refreshes that server's cache. One `Connection` per server
  (`mcp_connection`) tells the source what it learns through callbacks.
- `aclose()` stops every server (the SDK closes stdin, then terminates the process group).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphchat.catalog.approvals import PolicyApprover, family_from_annotations
from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.mcp.cache import ServerFiles
from graphchat.catalog.mcp.config import ServerConfig, load_servers
from graphchat.catalog.mcp.connection import Connection, ServerUnavailable, cannot_start, describe
from graphchat.catalog.mcp.features import READ_RESOURCE, read_resource, read_resource_spec, roots_of
from graphchat.catalog.mcp.sampling import serve_sampling
from graphchat.errors import GraphchatError
from graphchat.fsutil import failed_write_message
from graphchat.naming import NameMap

if TYPE_CHECKING:
    from graphchat.catalog.approvals import PolicyApprover
    from graphchat.events import EventSink
    from graphchat.naming import NameMap
    from graphchat.workspace import Settings


class McpSource(ToolSource):
    """Every configured MCP server as one ToolSource (see module doc)."""

    serves_mcp_requests = True

    def __init__(
        self,
        settings: Settings,
        events: EventSink | None = None,
        *,
        servers: list[ServerConfig] | None = None,
        policy: PolicyApprover | None = None,
    ) -> None:
        self.settings = settings
        self.events = events
        self._policy = policy  # approves servers' sampling requests (the command's approvals)
        self._servers = servers
        self._config_warnings: list[str] = []
        self._tool_name_warnings: list[str] = []  # filter/override names a server does not have
        self.files = ServerFiles(settings.catalog_dir)
        self._connections: dict[str, Connection] = {}
        self._specs: list[ToolSpec] | None = None
        self._names: NameMap | None = None
        # (server, uri) of a subscribed resource that changed (`resources/subscribe`); the chat sets it
        self.on_resource_update: Callable[[str, str], None] | None = None
        self._roots: list[tuple[str, str]] | None = None  # set by the warm helper (`take_roots`)

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

    def warnings(self) -> list[str]:
        self.servers  # noqa: B018 - loading the file is what finds them
        self.specs()  # reading the cached tool lists is what finds unknown tool names
        return [*self._config_warnings, *self._tool_name_warnings]

    def unprepared(self, *, retry_failed: bool = False) -> list[str]:
        """Servers whose tool list is not cached (under their current configuration); one whose
        last start failed under this configuration only with `retry_failed`."""
        return [
            s.name
            for s in self.servers
            if self.files.cached(s) is None and (retry_failed or self.files.failed_start(s) is None)
        ]

    def failed(self) -> dict[str, str]:
        out = {}
        for s in self.servers:
            if self.files.cached(s) is None:
                error = self.files.failed_start(s)
                if error is not None:
                    out[s.name] = error
        return out

    def groups(self) -> list[str]:
        return [s.name for s in self.servers]

    def _warn(self, message: str) -> None:
        if self.events is not None:
            self.events.warning(message)

    def start_problem(self, name: str) -> str | None:
        """One line saying why server `name` cannot start (this run's failed start, else what
        its configuration shows without starting it, else its last recorded failure), or None."""
        config = self.server(name)
        if config is None:
            return None
        conn = self._connections.get(name)
        reason = conn.last_error if conn is not None and conn.state == "failed" else None
        reason = reason or config.start_problem() or self.files.failed_start(config)
        return None if reason is None else cannot_start(name, reason, self.files.log_path(name))

    def unavailable(self, tool: str) -> str | None:
        """Why `tool`, a name the catalog does not list, is missing when it is a tool of a
        server whose tool list is unknown because the server cannot start."""
        config = next((s for s in self.servers if tool.startswith(s.name + "__")), None)
        if config is None or self.files.cached(config) is not None:
            return None
        return self.start_problem(config.name)

    def _tools_read(self, config: ServerConfig, tools: list[dict[str, Any]]) -> None:
        """A server started (or was asked again): refresh its cache and its status."""
        try:
            self.files.store_tools(config, tools)
        except OSError as exc:  # a read-only or full disk: this run still knows them
            if self.events is not None:
                self.events.warning(
                    f"could not cache the tools of MCP server '{config.name}': {failed_write_message(exc)}"
                )
        self.files.record_status(config.name, error=None)
        self._specs = None
        if self.on_change is not None:
            self.on_change()

    # specs ---------------------------------------------------------------------------------------

    def specs(self) -> list[ToolSpec]:
        """Tools of every server with a cached tool list. Starts nothing."""
        if self._specs is None:
            names = NameMap()
            specs: list[ToolSpec] = []
            self._tool_name_warnings = []
            for config in self.servers:
                doc = self.files.cached(config)
                if doc is None:
                    continue
                real_names = [t["name"] for t in doc["tools"] if isinstance(t.get("name"), str)]
                self._tool_name_warnings += unknown_tool_names(config, real_names)
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
            if specs:  # some server's tools are known: its resources can be read too
                specs.append(read_resource_spec())
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
            conn = self._connections[name] = Connection(
                config,
                log_path=self.files.log_path(name),
                on_tools=lambda tools: self._tools_read(config, tools),
                on_error=lambda error: self.files.record_status(
                    name, error=error, config_hash=config.config_hash
                ),
                roots=self.roots,
                on_warning=self._warn,
                sampler=self.sample,
                on_resource_updated=lambda uri: self._resource_updated(name, uri),
            )
        return conn

    def _resource_updated(self, server: str, uri: str) -> None:
        if self.on_resource_update is not None:
            self.on_resource_update(server, uri)

    async def sample(self, server: str, params: Any, ctx: CallContext | None) -> Any:
        """A server's sampling request, served by the person's model once approved (mcp_sampling)."""
        if self._policy is None:
            self._policy = PolicyApprover(self.settings)
        return await serve_sampling(server, params, ctx, settings=self.settings, policy=self._policy)

    def roots(self) -> list[tuple[str, str]]:
        """MCP roots, as (file:// URI, name): settings.mcp_roots, else the workspace and the
        folder graphchat runs in (when it is another one); in the warm helper, those of the
        turns it serves (`take_roots`)."""
        if self._roots is not None:
            return self._roots

        return roots_of(self.settings)

    def take_roots(self, cwd: str | None, *, busy: bool) -> list[Connection] | None:
        """The warm helper serves a turn asked from `cwd`: its servers' roots become that turn's.
        Returns the running servers to tell (roots/list_changed; [] when the roots are the same),
        or None when they differ while another turn runs (`busy`): one server cannot show two
        sets of roots, so that turn is not served here (it starts its own servers)."""
        wanted = roots_of(self.settings, cwd)
        if wanted == self.roots():
            self._roots = wanted
            return []
        if busy:
            return None
        self._roots = wanted
        return [c for c in self._connections.values() if c.client is not None and c.declares_roots]

    async def request(self, server: str, method: str, *args: Any, **kwargs: Any) -> Any:
        """One request beside tools to one server (prompts, resources): see Connection.request."""
        if self.server(server) is None:
            known = ", ".join(s.name for s in self.servers) or "none"
            raise GraphchatError(f"no MCP server '{server}' is configured (servers: {known})")
        return await self.connection(server).request(method, *args, **kwargs)

    def prestart(self, names: list[str] | None = None) -> None:
        """Start servers in the background (e.g. while litellm imports); errors surface on calls.
        Without `names`, a server whose last start failed (same configuration) is not started."""
        if names is None:
            failed = self.failed()
            names = [s.name for s in self.servers if s.name not in failed]
        for name in names:
            self.connection(name).start()

    async def prepare(self, names: list[str] | None = None, *, refresh: bool = False) -> dict[str, str]:
        """Start (concurrently) the servers whose tool list is unknown — or `names`, or all when
        `refresh` — so their tools are cached; returns {server: error} for those that failed."""
        import asyncio

        if names is None:
            names = [s.name for s in self.servers] if refresh else self.unprepared()
        if refresh:
            for name in names:  # a running server's list may be stale too: ask it again
                await self.connection(name).relist()
        conns = [self.connection(n) for n in names]
        results = await asyncio.gather(*(c.ensure() for c in conns), return_exceptions=True)
        errors = {}
        for conn, result in zip(conns, results, strict=True):
            if isinstance(result, BaseException):
                errors[conn.name] = str(result) if isinstance(result, ServerUnavailable) else describe(result)
        self._specs = None
        return errors

    # ToolSource ------------------------------------------------------------------------------------

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        if spec.name == READ_RESOURCE:
            return await read_resource(self, arguments, ctx, self.settings.max_tool_result_chars)
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


def unknown_tool_names(config: ServerConfig, real: list[str]) -> list[str]:
    """A warning for each name in `tool_overrides`, `include_tools` or `exclude_tools` that the
    server's tool list does not have (a glob: that matches none of its tools), with the close
    matches: a misspelt name would otherwise be silently ignored."""
    import difflib
    from fnmatch import fnmatchcase

    given: list[tuple[str, str]] = [("tool_overrides", name) for name in config.tool_overrides]
    given += [("include_tools", name) for name in config.include_tools or ()]
    given += [("exclude_tools", name) for name in config.exclude_tools]
    out = []
    for field, name in given:
        if any(fnmatchcase(tool, name) for tool in real):
            continue
        close = difflib.get_close_matches(name, real, n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        out.append(
            f"MCP server '{config.name}': {field} names {name!r}, which the server does not have{hint}"
        )
    return out
