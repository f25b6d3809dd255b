"""Helpers for tests that run real MCP servers: workspace config, markers, process checks."""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
from pathlib import Path
from typing import Any

SERVERS = Path(__file__).resolve().parent
TOOLS_SERVER = str(SERVERS / "tools_server.py")
LOWLEVEL_SERVER = str(SERVERS / "lowlevel_server.py")


def stdio(script: str = TOOLS_SERVER, marker: Path | None = None, **extra: Any) -> dict[str, Any]:
    """A stdio server entry for servers.yaml running `script` on this interpreter."""
    env = dict(extra.pop("env", {}) or {})
    if marker is not None:
        env["GRAPHCHAT_TEST_MARKER"] = str(marker)
    body: dict[str, Any] = {"command": sys.executable, "args": [script], **extra}
    if env:
        body["env"] = env
    return body


def write_servers(workspace: Path, servers: dict[str, Any]) -> Path:
    path = workspace / "catalog" / "servers.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"mcpServers": servers}, indent=2))
    return path


def pids(marker: Path) -> list[int]:
    """Pids of the server processes that started (one line each, written at startup)."""
    if not marker.exists():
        return []
    return [int(line) for line in marker.read_text().split()]


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def listening_socket() -> socket.socket:
    """A socket already listening on 127.0.0.1 (connections queue until the server accepts)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    sock.set_inheritable(True)
    return sock


class RecordingListener:
    """A TCP listener that records every connection (and its first bytes) and answers nothing."""

    def __init__(self) -> None:
        self.sock = listening_socket()
        self.port = self.sock.getsockname()[1]
        self.connections: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(1.0)
            try:
                data = conn.recv(4096)
            except OSError:
                data = b""
            self.connections.append(data)
            conn.close()

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def start_http_server(marker: Path | None = None, called: Path | None = None) -> tuple[Any, str]:
    """tools_server.py over streamable HTTP on a pre-bound socket: (Popen, url). No waiting needed.
    `called`: a FIFO its `slow` tool writes to when a call reaches it (a test awaits reading it)."""
    import subprocess

    sock = listening_socket()
    port = sock.getsockname()[1]
    env = dict(os.environ)
    if marker is not None:
        env["GRAPHCHAT_TEST_MARKER"] = str(marker)
    if called is not None:
        env["GRAPHCHAT_TEST_CALLED"] = str(called)
    proc = subprocess.Popen(
        [sys.executable, TOOLS_SERVER, "--http-fd", str(sock.fileno())],
        pass_fds=[sock.fileno()],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    sock.close()  # the child holds its own copy
    return proc, f"http://127.0.0.1:{port}/mcp"


_TOOL_LISTS: dict[tuple[str, ...], list[dict[str, Any]]] = {}


def _tool_list(command: str, args: tuple[str, ...], env: dict[str, str]) -> list[dict[str, Any]]:
    """The tool list of a test server, fetched once per test session."""
    import asyncio
    import tempfile

    key = (command, *args, env.get("TOOL_COUNT", ""))
    if key not in _TOOL_LISTS:
        from graphchat.catalog.mcp.pool import McpSource
        from graphchat.workspace import load_settings

        with tempfile.TemporaryDirectory() as tmp:
            ws = Path(tmp)
            (ws / "graphchat.yaml").write_text("")
            body: dict[str, Any] = {"command": command, "args": list(args)}
            if "TOOL_COUNT" in env:
                body["env"] = {"TOOL_COUNT": env["TOOL_COUNT"]}
            write_servers(ws, {"s": body})
            source = McpSource(load_settings(ws))

            async def fetch() -> None:
                try:
                    errors = await source.prepare()
                    assert errors == {}, errors
                finally:
                    await source.aclose()

            asyncio.run(fetch())
            config = source.servers[0]
            cached = source.files.cached(config)
            assert cached is not None
            _TOOL_LISTS[key] = cached["tools"]
    return _TOOL_LISTS[key]


def seed_cache(workspace: Path) -> None:
    """Write the tool-list cache of every configured test server, as a first `tools list` would,
    without starting a server for this workspace (tool lists are fetched once per session)."""
    import orjson

    from graphchat.catalog.mcp.pool import McpSource
    from graphchat.workspace import load_settings

    source = McpSource(load_settings(workspace))
    for config in source.servers:
        tools = _tool_list(config.command or "", tuple(config.args), dict(config.env))
        doc = {"server": config.name, "config_hash": config.config_hash, "fetched_at": "", "tools": tools}
        path = source.files.cache_path(config)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(orjson.dumps(doc))


async def reached(fifo: Path) -> str:
    """Wait, without blocking the event loop, until a server writes to `fifo` (GRAPHCHAT_TEST_CALLED:
    a call has reached it); returns what it wrote (its pid)."""
    import asyncio

    return await asyncio.to_thread(fifo.read_text)
