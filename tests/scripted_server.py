"""A scripted OpenAI-compatible model server on 127.0.0.1, for tests and benches.

`POST /v1/chat/completions` serves the next scripted reply (JSON, or SSE when the request
streams) and records every request it received. graphchat reaches it through litellm's real
HTTP path (`openai/<name>` with `api_base`).

A reply is a dict:
  {"text": "hello"}                                   plain answer
  {"tool_calls": [{"name": "t", "arguments": {...}}]}  one or several tool calls (+ optional "text")
  {"json": {...}}                                     answer whose text is that JSON (structured calls)
  {"error": 429, "retry_after": 0}                    error statuses: 429, 500, 401 (+ "message"), "context" (400)
  {"delay": 0.5, ...}                                 wait before answering
  {"text": "...", "dropmid": True}                    streaming: the connection drops after the first chunk
  {"endless": True}                                   streaming: varied text for ever (until the client leaves)
  {"text": "...", "stall": 30}                        streaming: nothing at all for 30 s after the first chunk
  {"text": "...", "pause": [12, 3.0]}                 streaming: 3 s of silence after the first 12 characters
  {"text": "...", "piece": 4096}                      streaming: text and arguments in chunks of 4096 characters
                                                      (default 8 and 10; a long reply in few chunks costs less CPU)
  {"usage": {"prompt_tokens": 10, "completion_tokens": 5}}  override usage
A callable in the script is called with the request body and returns one of the above.
When the script runs out, `default` is served (a text reply naming the exhaustion).

Run standalone: `python tests/scripted_server.py --port 8999 --script replies.json`;
the control endpoints `POST /_script` (JSON list, replaces the script) and `GET /_requests`
let another process drive it.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


class LoopbackHTTPServer(ThreadingHTTPServer):
    """A test's HTTP server: a request it fails to serve (a client that hung up) is reported on
    the test process's own stderr, never on a `run_cli` capture of graphchat's."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys
        import traceback

        if sys.__stderr__ is not None:
            print(f"{type(self).__name__}: error serving {client_address}", file=sys.__stderr__)
            traceback.print_exc(file=sys.__stderr__)


class ScriptedModelServer:
    def __init__(self, script: list[Reply] | None = None, *, port: int = 0) -> None:
        self.script: list[Reply] = list(script or [])
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # each model request's Authorization header
        self.default: Reply = {"text": "(scripted server: script exhausted)"}
        self.lock = threading.Lock()
        self.http = LoopbackHTTPServer(("127.0.0.1", port), _handler_for(self))
        self.http.daemon_threads = True
        self.port = self.http.server_address[1]
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> ScriptedModelServer:
        self.thread = threading.Thread(target=self.http.serve_forever, name="scripted-model", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def reset(self) -> None:
        """Empty the script, the recorded requests and their Authorization headers (a server a
        module's tests share, ready for the next test)."""
        with self.lock:
            self.script.clear()
            self.requests.clear()
            self.authorizations.clear()

    def push(self, *replies: Reply) -> None:
        with self.lock:
            self.script.extend(replies)

    def next_reply(self, body: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(body)
            reply = self.script.pop(0) if self.script else self.default
        return reply(body) if callable(reply) else reply

    def env(self, model: str = "openai/scripted") -> dict[str, str]:
        """Environment variables that point graphchat at this server."""
        return {"GRAPHCHAT_MODEL": model, "GRAPHCHAT_API_BASE": self.url, "GRAPHCHAT_API_KEY": "sk-test"}


def _usage(reply: dict[str, Any], body: dict[str, Any]) -> dict[str, int]:
    given = reply.get("usage") or {}
    prompt = given.get("prompt_tokens", 10 + len(json.dumps(body.get("messages", []))) // 4)
    completion = given.get("completion_tokens", 5)
    extra = {
        k: v for k, v in given.items() if k not in ("prompt_tokens", "completion_tokens")
    }  # cache details
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        **extra,
    }


def _tool_calls(reply: dict[str, Any]) -> list[dict[str, Any]]:
    calls = []
    for i, call in enumerate(reply.get("tool_calls") or []):
        args = call.get("arguments", {})
        calls.append(
            {
                "id": call.get("id") or f"call_{i}_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    return calls


def _content(reply: dict[str, Any]) -> str | None:
    if "json" in reply:
        return json.dumps(reply["json"])
    return reply.get("text")


def _handler_for(server: ScriptedModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # else keep-alive requests stall ~40 ms

        def log_message(self, *args: Any) -> None:
            pass

        def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/_requests":
                with server.lock:
                    self._send_json(200, server.requests)
            else:
                self._send_json(404, {"error": "not found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path == "/_script":
                with server.lock:
                    server.script = list(body)
                    server.requests.clear()
                self._send_json(200, {"ok": True})
                return
            if not self.path.endswith("/chat/completions"):
                self._send_json(404, {"error": {"message": "not found"}})
                return
            with server.lock:
                server.authorizations.append(self.headers.get("Authorization"))
            reply = server.next_reply(body)
            if reply.get("delay"):
                time.sleep(float(reply["delay"]))
            if "error" in reply:
                self._error(reply)
            elif body.get("stream"):
                self._stream(reply, body)
            else:
                self._complete(reply, body)

        def _error(self, reply: dict[str, Any]) -> None:
            kind = reply["error"]
            if kind == 429:
                headers = {"Retry-After": str(reply.get("retry_after", 0))}
                self._send_json(
                    429, {"error": {"message": "Rate limit reached", "type": "rate_limit_error"}}, headers
                )
            elif kind == 401:
                self._send_json(
                    401,
                    {
                        "error": {
                            "message": reply.get("message", "Incorrect API key provided"),
                            "type": "invalid_request_error",
                            "code": "invalid_api_key",
                        }
                    },
                )
            elif kind == "context":
                self._send_json(
                    400,
                    {
                        "error": {
                            "message": "This model's maximum context length is 128000 tokens. However, your "
                            "messages resulted in 200000 tokens.",
                            "type": "invalid_request_error",
                            "code": "context_length_exceeded",
                        }
                    },
                )
            else:
                self._send_json(
                    int(kind), {"error": {"message": "The server had an error", "type": "server_error"}}
                )

        def _complete(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
            calls = _tool_calls(reply)
            message: dict[str, Any] = {"role": "assistant", "content": _content(reply)}
            if calls:
                message["tool_calls"] = calls
            self._send_json(
                200,
                {
                    "id": "chatcmpl-" + uuid.uuid4().hex[:12],
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", "scripted"),
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
                    ],
                    "usage": _usage(reply, body),
                },
            )

        def _stream(self, reply: dict[str, Any], body: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            cid = "chatcmpl-" + uuid.uuid4().hex[:12]
            model = body.get("model", "scripted")

            def chunk(
                delta: dict[str, Any], finish: str | None = None, usage: dict[str, Any] | None = None
            ) -> None:
                payload: dict[str, Any] = {
                    "id": cid,
                    "object": "chat.completion.chunk",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
                }
                if usage:
                    payload["usage"] = usage
                self.wfile.write(f"data: {json.dumps(payload)}\n\n".encode())
                self.wfile.flush()

            chunk({"role": "assistant", "content": ""})
            if reply.get("endless") or reply.get("stall"):
                try:
                    self._misbehave(reply, chunk)
                except OSError:  # the client hung up: what the test wanted
                    pass
                self.close_connection = True
                return
            text = _content(reply)
            pace = float(reply.get("pace", 0))
            text_piece, args_piece = int(reply.get("piece", 8)), int(reply.get("piece", 10))
            pause_at, pause_s = reply.get("pause") or (None, 0.0)
            if text:
                pieces = [text] if pause_at is None else [text[:pause_at], text[pause_at:]]
                for n, piece in enumerate(pieces):
                    if n:
                        time.sleep(float(pause_s))  # the model stops mid-answer, then goes on
                    for start in range(0, len(piece), text_piece):
                        chunk({"content": piece[start : start + text_piece]})
                        if pace:
                            time.sleep(pace)
                        if reply.get("dropmid"):
                            # the connection dies mid-reply: no finish, no [DONE]
                            self.close_connection = True
                            return
            calls = _tool_calls(reply)
            for index, call in enumerate(calls):
                fn = call["function"]
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": fn["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                args = fn["arguments"]
                for start in range(0, len(args), args_piece):
                    chunk(
                        {
                            "tool_calls": [
                                {"index": index, "function": {"arguments": args[start : start + args_piece]}}
                            ]
                        }
                    )
            chunk({}, "tool_calls" if calls else "stop")
            if (body.get("stream_options") or {}).get("include_usage"):
                chunk({}, usage=_usage(reply, body))
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _misbehave(self, reply: dict[str, Any], chunk: Callable[..., None]) -> None:
            """A model gone wrong: text that never ends (no two chunks alike), or a stall."""
            if reply.get("stall"):
                chunk({"content": reply.get("text") or "Let me think"})
                time.sleep(float(reply["stall"]))
                return
            n = 0
            while True:
                n += 1
                chunk({"content": f" word{n} and{n * 7 % 13}"})

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file with a list of replies")
    args = parser.parse_args()
    script = json.load(open(args.script)) if args.script else []
    server = ScriptedModelServer(script, port=args.port)
    print(server.url, flush=True)
    server.http.serve_forever()


if __name__ == "__main__":
    main()
