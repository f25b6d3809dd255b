"""The workspace's files about MCP servers: the tool-list cache, the status files and the logs.

- `catalog/cache/<server>-<confighash>.json`: the tool list a server gave at its last start
  under that configuration (a changed configuration is a new file; older ones are dropped).
- `catalog/cache/<server>.status.json`: its last start and last error, for `mcp list`.
- `catalog/logs/<server>.log`: its stderr (`client.log`: the MCP SDK's own log lines).

Reading never raises: a missing or broken file is "not known yet".
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.ci import memory_storage
from graphchat.fsutil import read_object, write_atomic

if TYPE_CHECKING:
    from graphchat.catalog.mcp.config import ServerConfig


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _write_json(path: Path, doc: Any) -> None:
    import orjson

    if memory_storage():  # GRAPHCHAT_STORAGE=memory: tool lists and statuses live in this run only
        return

    write_atomic(path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))


class ServerFiles:
    """The cache, status and log files of the servers of one workspace (`catalog_dir`)."""

    def __init__(self, catalog_dir: Path) -> None:
        self.catalog_dir = catalog_dir
        # The tool lists this process read, whether or not the disk took them (a read-only or
        # full workspace still knows the tools of the servers it started).
        self._read: dict[Path, dict[str, Any]] = {}

    @property
    def cache_dir(self) -> Path:
        return self.catalog_dir / "cache"

    @property
    def log_dir(self) -> Path:
        return self.catalog_dir / "logs"

    def log_path(self, server: str) -> Path:
        return self.log_dir / f"{server}.log"

    # the tool lists ----------------------------------------------------------------------------

    def cache_path(self, config: ServerConfig) -> Path:
        return self.cache_dir / f"{config.name}-{config.config_hash}.json"

    def cached(self, config: ServerConfig) -> dict[str, Any] | None:
        """The cached tool list document of a server, or None."""
        path = self.cache_path(config)
        if path in self._read:
            return self._read[path]
        doc = read_object(path)
        return doc if doc is not None and isinstance(doc.get("tools"), list) else None

    def store_tools(self, config: ServerConfig, tools: list[dict[str, Any]]) -> None:
        """A server started: write its tool list (dropping those of its older configurations).
        Raises OSError when the cache cannot be written."""
        import re

        doc = {"server": config.name, "config_hash": config.config_hash, "fetched_at": _now(), "tools": tools}
        self._read[self.cache_path(config)] = doc
        _write_json(self.cache_path(config), doc)

        if memory_storage():  # nothing was written, and nothing of the workspace is removed
            return
        stale = re.compile(re.escape(config.name) + r"-[0-9a-f]{12}\.json")
        for path in self.cache_dir.glob(f"{config.name}-*.json"):
            if stale.fullmatch(path.name) and path != self.cache_path(config):
                path.unlink(missing_ok=True)

    # the status files --------------------------------------------------------------------------

    def failed_start(self, config: ServerConfig) -> str | None:
        """The error of this server's last start when it failed under this very configuration
        (and no start succeeded since), else None."""
        doc = self.status(config.name)
        if doc.get("failed_config") != config.config_hash:
            return None
        if (doc.get("last_started_at") or "") > (doc.get("last_error_at") or ""):
            return None
        error = doc.get("last_error")
        return str(error) if error else "its start failed"

    def status_path(self, server: str) -> Path:
        return self.cache_dir / f"{server}.status.json"

    def status(self, server: str) -> dict[str, Any]:
        return read_object(self.status_path(server)) or {}

    def record_status(self, server: str, *, error: str | None, config_hash: str | None = None) -> None:
        """Remember the last start (error None) or the last error of a server (best effort),
        with the configuration it happened under."""
        doc = self.status(server)
        if error is None:
            doc["last_started_at"] = _now()
            doc.pop("failed_config", None)
        else:
            doc.update(last_error=error, last_error_at=_now())
            if config_hash is not None:
                doc["failed_config"] = config_hash
        try:
            _write_json(self.status_path(server), doc)
        except OSError:
            pass
