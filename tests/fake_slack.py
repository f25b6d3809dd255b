"""A fake Slack Web API on 127.0.0.1 for the slack pack's tests: chat.postMessage and
chat.getPermalink, in memory.

It knows a few channels (by ID and by `#name`) and one valid bot token, answers as Slack does
(HTTP 200 with `{"ok": false, "error": ...}` for a refusal), and records every request it got
(method, path, headers, body), so a test can check what was sent — and that the token was.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class FakeSlack:
    def __init__(self, token: str) -> None:
        self.token = token
        self.channels = {"C0123ABCD": "general", "C0456EFGH": "releases"}
        self.messages: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.permalinks = True  # False: chat.getPermalink answers 500 (best effort: permalink null)
        self.lock = threading.Lock()
        self._ts = 1_700_000_000
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/api"

    def start(self) -> FakeSlack:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def channel_id(self, name: str) -> str | None:
        if name in self.channels:
            return name
        return next((cid for cid, n in self.channels.items() if f"#{n}" == name), None)

    def handle(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: Any
    ) -> tuple[int, Any]:
        if headers.get("Authorization") != f"Bearer {self.token}":
            return 200, {"ok": False, "error": "invalid_auth"}
        if method == "POST" and path == "/api/chat.postMessage":
            if not isinstance(body, dict) or not body.get("text"):
                return 200, {"ok": False, "error": "no_text"}
            channel = self.channel_id(str(body.get("channel", "")))
            if channel is None:
                return 200, {"ok": False, "error": "channel_not_found"}
            self._ts += 1
            ts = f"{self._ts}.000100"
            self.messages.append(
                {"channel": channel, "ts": ts, **{k: body[k] for k in body if k != "channel"}}
            )
            return 200, {"ok": True, "channel": channel, "ts": ts, "message": {"text": body["text"]}}
        if method == "GET" and path == "/api/chat.getPermalink":
            if not self.permalinks:
                return 500, {"ok": False, "error": "internal_error"}
            channel, ts = query.get("channel", ""), query.get("message_ts", "")
            if not any(m["channel"] == channel and m["ts"] == ts for m in self.messages):
                return 200, {"ok": False, "error": "message_not_found"}
            return 200, {
                "ok": True,
                "channel": channel,
                "permalink": f"https://slack.test/archives/{channel}/p{ts.replace('.', '')}",
            }
        return 404, {"ok": False, "error": "unknown_method"}


def _handler(fake: FakeSlack) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            headers = dict(self.headers)
            with fake.lock:
                fake.requests.append(
                    {"method": self.command, "path": self.path, "headers": headers, "body": body}
                )
                status, answer = fake.handle(self.command, parts.path, query, headers, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

    return Handler
