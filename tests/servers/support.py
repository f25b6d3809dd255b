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


def start_http_server(marker: Path | None = None) -> tuple[Any, str]:
    """tools_server.py over streamable HTTP on a pre-bound socket: (Popen, url). No waiting needed."""
    import subprocess

    sock = listening_socket()
    port = sock.getsockname()[1]
    env = dict(os.environ)
    if marker is not None:
        env["GRAPHCHAT_TEST_MARKER"] = str(marker)
    proc = subprocess.Popen(
        [sys.executable, TOOLS_SERVER, "--http-fd", str(sock.fileno())],
        pass_fds=[sock.fileno()],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    sock.close()  # the child holds its own copy
    return proc, f"http://127.0.0.1:{port}/mcp"
