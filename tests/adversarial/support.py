"""Helpers for the adversarial tests: a hostile MCP server entry and a web server that
records every request it gets (graphchat must never reach it)."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from tests.scripted_server import LoopbackHTTPServer

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
HOSTILE_SERVER = str(HERE / "hostile_server.py")


def hostile(tools: list[dict[str, Any]], calls: Path | None = None) -> dict[str, Any]:
    """A servers.yaml entry running the hostile server with these tools."""
    env = {"HOSTILE_SPEC": json.dumps({"tools": tools})}
    if calls is not None:
        env["HOSTILE_CALLS"] = str(calls)
    return {"command": sys.executable, "args": [HOSTILE_SERVER], "env": env}


class Tripwire:
    """A local HTTP server listing the paths requested from it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                body = b'{"type": "object"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = LoopbackHTTPServer(("127.0.0.1", 0), Handler)
        self.http.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"


@contextmanager
def tripwire() -> Iterator[Tripwire]:
    wire = Tripwire()
    thread = threading.Thread(target=wire.http.serve_forever, daemon=True)
    thread.start()
    try:
        yield wire
    finally:
        wire.http.shutdown()
        wire.http.server_close()
