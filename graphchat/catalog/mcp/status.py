"""What `mcp list` and `tools list` report about the configured MCP servers: one row per
server (state, tool counts, last start and error, from the tool-list cache and the status
files), and which server log a failed start just wrote. The CLI only formats these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.catalog.mcp.cache import ServerFiles
from graphchat.catalog.mcp.pool import McpSource
from graphchat.errors import GraphchatError
from graphchat.threads.redact import Redactor, settings_secrets

if TYPE_CHECKING:
    from graphchat.workspace import Settings


def server_rows(
    settings: Settings, *, check: bool = False, warnings: list[str] | None = None
) -> list[dict[str, Any]]:
    """One row per configured server. `check`: start every server now (and stop it again);
    a row's state is then `running` or `failed` with the error of this start. `warnings` gets
    the server entries that were skipped (a bad entry of servers.yaml)."""
    source = McpSource(settings)
    if warnings is not None:
        warnings.extend(source.warnings())
    live: dict[str, str] | None = None
    if check and source.servers:
        import asyncio

        async def start_all() -> dict[str, str]:
            try:
                return await source.prepare(refresh=True)
            finally:
                await source.aclose()

        live = asyncio.run(start_all())

    redactor = Redactor(settings_secrets(settings))  # once: it reads servers.yaml and the environment
    rows = []
    for config in source.servers:
        cached = source.files.cached(config)
        status = source.files.status(config.name)
        tools = cached["tools"] if cached else None
        shown = [t for t in tools if config.wants_tool(str(t.get("name")))] if tools is not None else None
        if live is not None:
            state = "failed" if config.name in live else "running"
        elif cached is not None:
            state = "cached"
        elif status.get("last_error_at") and status.get("last_error_at", "") >= (
            status.get("last_started_at") or ""
        ):
            state = "failed"  # its last start failed: say so, not "not started yet"
        else:
            state = "not started yet"
        row: dict[str, Any] = {
            "name": config.name,
            "transport": config.transport,
            "target": config.where,
            "expanded": _expanded_where(config, redactor),
            "state": state,
            "tools": len(shown) if shown is not None else None,
            "tools_total": len(tools) if tools is not None else None,
            "tools_fetched_at": cached.get("fetched_at") if cached else None,
            "last_started_at": status.get("last_started_at"),
            "last_error": status.get("last_error"),
            "last_error_at": status.get("last_error_at"),
            # a failed start is remembered: not retried until the config changes or a refresh
            "retried": live is not None or cached is not None or source.files.failed_start(config) is None,
        }
        if live is not None and config.name in live:
            row["last_error"] = live[config.name]
        rows.append(row)
    return rows


def _expanded_where(config: Any, redactor: Any) -> str | None:
    """The command line or URL as it will start, `${VAR}`s expanded (secrets redacted); None
    when a variable is unset (the start would fail, and `target` shows what is written)."""
    try:
        expanded = config.expanded()
    except GraphchatError:
        return None
    text = expanded.url or " ".join([expanded.command or "", *expanded.args]).strip()
    return str(redactor.text(text))


def fresh_log(settings: Settings, server: str, since: float) -> str | None:
    """The workspace-relative path of the server's log when a start wrote to it since `since`
    (a failure before any process started, e.g. an unset ${VAR}, writes none)."""
    log = ServerFiles(settings.catalog_dir).log_path(server)
    try:
        fresh = log.is_file() and log.stat().st_mtime >= since - 1
    except OSError:
        return None
    return f"catalog/logs/{server}.log" if fresh else None
