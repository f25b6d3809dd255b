"""The warm helper: one resident process per workspace identity that keeps the model library
imported and the workspace's MCP servers running, and runs the `ask` turns clients hand it.

A turn runs exactly as `ask` runs it in its own process (`graphchat.runs.turn.ask_turn`), on the
helper's running catalog, shown through a RemoteFront: every event, every piece of the answer,
every question goes to the client as a message, and the client renders it with the same code
a local `ask` uses. Each request brings its own working directory and its whole environment,
which the turn runs in (graphchat/turn_context.py: WORKING_DIR, TURN_ENV); the helper never
changes its own (`chdir`, `os.environ`). A request whose environment differs in a variable the
helper itself depends on (what its MCP servers were started with, its model, credentials) is
refused, and the client asks itself. Several clients may ask at once: each
turn is its own task. Anything a turn writes to stdout or stderr by other means reaches its
client too (the streams are routed by the task's context); what no client was there to see
goes to the helper's log.

It leaves after `settings.warm_idle` seconds without a turn, on `graphchat warm --stop`, on
SIGTERM, or when its configuration changes on disk (no client could use it any more): then a
helper for the new configuration, under the same environment, takes its place.

Run as `python -m graphchat.warm.helper --workspace DIR [--ready-fd N]`.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import graphchat
from graphchat.catalog.mcp.pool import McpSource
from graphchat.errors import EXIT_INTERRUPTED, EXIT_WAITING, ConfigError, GraphchatError
from graphchat.fsutil import describe_failure, is_failed_write
from graphchat.host import needs_model
from graphchat.interrupts import CLIENT_REASON
from graphchat.llm.runtime import litellm_module, warm_up
from graphchat.runs.turn import ask_turn
from graphchat.sources import build_catalog
from graphchat.turn_context import TURN_ENV, WORKING_DIR
from graphchat.warm import control
from graphchat.warm.identity import identify
from graphchat.workspace import load_settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before anything imports litellm

from graphchat.asks import Answer, Asker, Question  # noqa: E402
from graphchat.events import EventSink  # noqa: E402
from graphchat.warm import identity as ident  # noqa: E402
from graphchat.warm import wire  # noqa: E402

_current: contextvars.ContextVar[Conn | None] = contextvars.ContextVar("graphchat_warm_conn", default=None)
STALE_CHECK_S = 2.0
# The longest line a client may send: an ask's request carries the whole message (piped stdin
# up to 4M characters, JSON-escaped); asyncio's default of 64 KiB sent big questions local.
REQUEST_LIMIT = 64 * 1024 * 1024


class Conn:
    """One client's connection during its turn: messages out (from any thread), answers in."""

    def __init__(self, writer: asyncio.StreamWriter, request: dict[str, Any]) -> None:
        self.writer = writer
        self.loop = asyncio.get_running_loop()
        self.thread = threading.get_ident()
        self.tty: dict[str, bool] = dict(request.get("tty") or {})
        self.answers: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.stopped = False  # the helper is leaving (warm --stop, SIGTERM): not the client's Ctrl-C
        self.interrupted_by: list[str] = []  # what interrupted the client (its cancel says)
        self._ids = 0

    def send(self, message: dict[str, Any]) -> None:
        data = wire.encode(message)
        if threading.get_ident() == self.thread:
            self._write(data)
        else:
            self.loop.call_soon_threadsafe(self._write, data)

    def _write(self, data: bytes) -> None:
        if not self.writer.is_closing():
            self.writer.write(data)

    def question(self) -> tuple[int, asyncio.Future[dict[str, Any]]]:
        self._ids += 1
        future: asyncio.Future[dict[str, Any]] = self.loop.create_future()
        self.answers[self._ids] = future
        return self._ids, future


class RoutedStream(io.TextIOBase):
    """sys.stdout / sys.stderr of the helper: a turn's writes go to its client, the rest to
    the helper's log."""

    def __init__(self, kind: str, fallback: Any) -> None:
        self.kind = kind
        self.fallback = fallback

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def write(self, text: str) -> int:
        conn = _current.get()
        if conn is None:
            self.fallback.write(text)
            return len(text)
        conn.send({"t": self.kind, "s": text})
        return len(text)

    def flush(self) -> None:
        if _current.get() is None:
            self.fallback.flush()

    def isatty(self) -> bool:
        conn = _current.get()
        return bool(conn.tty.get(self.kind)) if conn is not None else False

    def fileno(self) -> int:
        return int(self.fallback.fileno())


class RemoteSink(EventSink):
    """A turn's activity, sent to its client's own sink."""

    def __init__(self, conn: Conn, human: bool) -> None:
        self.conn = conn
        self.human = human

    def emit(self, event: str, **fields: Any) -> None:
        self.conn.send({"t": "event", "e": event, "f": fields})

    def waiting(self, what: str | None) -> None:
        self.conn.send({"t": "waiting", "w": what})


class RoutingSink(EventSink):
    """The running catalog's own sink (server warnings): to the turn that caused them, else the log."""

    def emit(self, event: str, **fields: Any) -> None:
        conn = _current.get()
        if conn is not None:
            conn.send({"t": "event", "e": event, "f": fields})
        elif event == "warning":
            sys.stderr.write(f"warning: {fields.get('message')}\n")


class RemoteAsker(Asker):
    """Questions and approvals, asked on the client's terminal (its own asker answers them)."""

    def __init__(self, conn: Conn, events: EventSink | None, can_answer: bool) -> None:
        super().__init__(events)
        self.conn = conn
        self._can_answer = can_answer

    @property
    def can_answer(self) -> bool:
        return self._can_answer

    async def _ask(self, question: Question) -> Answer:
        if not self._can_answer:
            return Answer.unavailable()
        import dataclasses

        number, future = self.conn.question()
        self.conn.send({"t": "ask", "id": number, "q": dataclasses.asdict(question)})
        reply = await future
        return Answer(bool(reply.get("answered")), reply.get("value"), reply.get("reason"))


class RemoteFront:
    """A `runs.front.Front` whose calls are sent to the client, which makes them on its own
    TerminalFront."""

    def __init__(self, conn: Conn, human: bool, can_answer: bool) -> None:
        self.conn = conn
        self._sink = RemoteSink(conn, human)
        self.can_answer = can_answer

    def sink(self) -> EventSink:
        return self._sink

    def here(self, sink: EventSink) -> Asker:
        return RemoteAsker(self.conn, sink, self.can_answer)

    def begin(self, streaming: bool) -> None:
        self.conn.send({"t": "begin", "streaming": streaming})

    def text(self, text: str) -> None:
        self.conn.send({"t": "text", "s": text})

    def narration(self, text: str) -> None:
        self.conn.send({"t": "narration", "s": text})

    def finish(self, complete: bool = True) -> None:
        self.conn.send({"t": "finish", "complete": complete})

    def answer(self, content: str, payload: dict[str, Any] | None) -> None:
        self.conn.send({"t": "answer", "content": content, "payload": payload})

    def warn(self, message: str) -> None:
        self.conn.send({"t": "warn", "message": message})

    def note(self, message: str) -> None:
        self.conn.send({"t": "err", "s": message + "\n"})

    def error(self, message: str, hint: str | None = None) -> None:
        self.conn.send({"t": "error", "message": message, "hint": hint})

    def parked(
        self, requests: list[dict[str, Any]], json: bool, home: str | None, what: str = "the run"
    ) -> int:
        self.conn.send({"t": "parked", "requests": requests, "json": json, "home": home, "what": what})
        return EXIT_WAITING

    def plan_outcome(self, plan: Any, outcome: Any, flags: Any, streamed: list[str]) -> int:
        raise NotImplementedError("a warm helper runs turns, not plans")


class Helper:
    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.identity = ident.identify(workspace)
        self.paths = ident.paths(self.identity)
        self.started = time.time()
        self.last = time.monotonic()
        self.active: set[asyncio.Task[Any]] = set()
        self.stopping = asyncio.Event()
        self.reason = ""
        self.catalog: Any = None
        self.idle = 900
        self.served = 0  # turns accepted since the start
        self.conns: dict[asyncio.Task[Any], Conn] = {}  # the running turns' connections
        self._admitting = 0  # requests accepted whose turn has not started yet (MCP roots taken)
        self.successor = False  # leaving because the configuration changed: start the next one
        self._server: asyncio.AbstractServer | None = None
        self._socket_inode: int | None = None

    # --- start and stop -------------------------------------------------------------------

    async def start(self) -> dict[str, Any]:
        """Load, import, start the servers, listen. Returns what `graphchat warm` prints."""
        settings = load_settings(workspace=self.workspace)
        if settings.warm == "off":
            where = settings.config_path or self.workspace / "graphchat.yaml"
            raise ConfigError(f"settings.warm is off in {where}: no warm helper for this workspace")
        model = settings.model_for("chat")  # no model configured: exit 2, as ask would
        self.idle = settings.warm_idle

        await asyncio.to_thread(litellm_module)
        await asyncio.to_thread(warm_up, model.model)
        self.catalog = build_catalog(settings, events=RoutingSink())
        self.catalog.prestart()
        for server, error in (await self.catalog.prepare()).items():
            sys.stderr.write(f"warning: MCP server {server}: {error}\n")
        await self._listen()
        self.last = time.monotonic()  # the idle time counts from now, not from the slow start
        return {"ok": True, "pid": os.getpid(), "servers": self.servers()}

    async def _listen(self) -> None:
        import orjson

        path = self.paths.socket
        try:
            path.unlink()  # a dead helper's (we hold the identity's lock)
        except FileNotFoundError:
            pass
        old = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(
                self._connected, path=str(path), limit=REQUEST_LIMIT
            )
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        self._socket_inode = os.stat(path).st_ino
        info = {
            "pid": os.getpid(),
            "workspace": str(self.workspace),
            "key": self.identity.key,
            "version": _version(),
            "started": self.started,
            "idle": self.idle,
            "log": str(self.paths.log),
        }
        tmp = self.paths.info.with_suffix(".json.tmp")
        tmp.write_bytes(orjson.dumps(info))
        os.chmod(tmp, 0o600)
        tmp.replace(self.paths.info)

    async def run_until_stopped(self) -> None:
        checked = time.monotonic()
        while not self.stopping.is_set():
            try:
                await asyncio.wait_for(self.stopping.wait(), timeout=min(1.0, self.idle))
            except TimeoutError:
                pass
            now = time.monotonic()
            if not self.active and now - self.last >= self.idle:
                self.reason = "idle"
                break
            if now - checked >= STALE_CHECK_S and not self.active:
                checked = now
                try:
                    if identify(self.workspace).key != self.identity.key:
                        self.reason = "configuration changed"
                        self.successor = True
                        break
                except OSError:
                    pass
        await self.shutdown()

    def stop(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.stopping.set()

    async def shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._forget_files()
        for task, conn in list(self.conns.items()):
            if not conn.interrupted_by:  # the thread records the turn as ended by a SIGTERM
                conn.interrupted_by.append("SIGTERM")
                conn.stopped = True
            task.cancel()
        if self.active:
            await asyncio.wait(list(self.active), timeout=10)
        if self.catalog is not None:
            await self.catalog.aclose()
        sys.stderr.write(f"graphchat warm: helper {os.getpid()} left ({self.reason or 'stopped'})\n")
        sys.stderr.flush()
        if self.successor:
            self._start_successor()

    def _start_successor(self) -> None:
        """The configuration changed on disk: a helper for the new one takes over (it checks
        the new configuration itself; one that cannot start says why in its log)."""
        try:
            identity = ident.identify(self.workspace)
            reply = control.spawn(self.workspace, ident.paths(identity), wait=False)
            sys.stderr.write(f"graphchat warm: helper {reply['pid']} starts for the new configuration\n")
        except Exception as exc:  # noqa: BLE001 - the log says it; the next ask runs locally
            sys.stderr.write(f"graphchat warm: could not start a helper for the new configuration: {exc}\n")

    def _forget_files(self) -> None:
        """Remove the socket and info file, when they are still this helper's."""
        try:
            if self._socket_inode is not None and os.stat(self.paths.socket).st_ino == self._socket_inode:
                self.paths.socket.unlink()
                self.paths.info.unlink(missing_ok=True)
        except OSError:
            pass

    # --- status -----------------------------------------------------------------------------

    def servers(self) -> list[dict[str, str]]:
        if self.catalog is None:
            return []
        failed = self.catalog.failed()
        pending = set(self.catalog.unprepared(retry_failed=True))
        out = []
        for name in self.catalog.groups():
            if name in failed:
                out.append({"name": name, "state": "failed", "error": failed[name]})
            elif name in pending:
                out.append({"name": name, "state": "starting"})
            else:
                out.append({"name": name, "state": "running"})
        return out

    def status(self) -> dict[str, Any]:
        now = time.monotonic()
        idle_left = self.idle if self.active else max(self.idle - (now - self.last), 0.0)
        return {
            "running": True,
            "pid": os.getpid(),
            "workspace": str(self.workspace),
            "version": _version(),
            "uptime_s": round(time.time() - self.started, 1),
            "idle_s": self.idle,
            "idle_left_s": round(idle_left, 1),
            "turns_running": len(self.active),
            "turns_served": self.served,
            "servers": self.servers(),
            "socket": str(self.paths.socket),
            "log": str(self.paths.log),
        }

    # --- requests ---------------------------------------------------------------------------

    async def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        try:
            if sock is None or not wire.same_user(sock):
                return  # another user's process: not a word
            try:
                first = wire.decode(await reader.readline())
            except ValueError:
                return
            op = first.get("op")
            if op == "status":
                writer.write(wire.encode(self.status()))
            elif op == "stop":
                writer.write(wire.encode({"ok": True, "pid": os.getpid()}))
                await writer.drain()
                self.stop("stopped by graphchat warm --stop")
            elif op == "ask":
                await self._ask(first, reader, writer)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    def _refusal(self, request: dict[str, Any]) -> str | None:
        """Why this helper must not run the request (the client then runs it itself)."""
        if request.get("protocol") != wire.PROTOCOL or request.get("version") != _version():
            return "another graphchat"
        if request.get("key") != self.identity.key:
            return "another configuration"
        environ = request.get("env")
        if not isinstance(environ, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in environ.items()
        ):
            return "no environment"
        # The client's identity is not taken on trust: the variables this helper depends on (its
        # MCP servers' configuration, model, credentials) must have the values it runs with.
        try:
            theirs = ident.identify(self.workspace, environ)
        except OSError:
            return "another configuration"
        differ = ident.differences(self.identity.env, theirs.env)
        if differ:
            names = ", ".join(f"${name}" for name in differ[:5]) + (", ..." if len(differ) > 5 else "")
            return f"it runs with another {names}, which its MCP servers, model or tools use"
        if theirs.key != self.identity.key:
            return "another configuration"
        if self.stopping.is_set():
            return "leaving"
        return None

    def _take_roots(self, request: dict[str, Any]) -> list[Any] | None:
        """The MCP roots of the request's folder for the helper's servers (McpSource.take_roots):
        the servers to tell, or None when another turn runs under other roots."""
        tell: list[Any] = []
        for source in getattr(self.catalog, "sources", []):
            if isinstance(source, McpSource):
                found = source.take_roots(
                    str(request.get("cwd") or "") or None, busy=bool(self.active) or self._admitting > 0
                )
                if found is None:
                    return None
                tell += found
        return tell

    async def _ask(
        self, request: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        refusal = self._refusal(request)
        tell = None if refusal is not None else self._take_roots(request)
        if refusal is None and tell is None:
            refusal = (
                "it runs in another folder while a turn is in progress: its MCP servers' roots would differ"
            )
        if refusal is not None:
            writer.write(wire.encode({"t": "refused", "why": refusal}))
            return
        self._admitting += 1  # busy until its task runs: no other folder's turn may change the roots
        try:
            if tell:  # the roots changed with the folder: the servers that declared roots are told
                await asyncio.gather(*(c.roots_changed() for c in tell))
            conn = Conn(writer, request)
            self.served += 1
            conn.send({"t": "accepted", "pid": os.getpid()})
            await writer.drain()
            task = asyncio.get_running_loop().create_task(
                self._turn(conn, request), context=contextvars.copy_context()
            )
            self.active.add(task)
        finally:
            self._admitting -= 1
        self.conns[task] = conn
        listening = asyncio.create_task(self._listen_to(reader, conn, task))
        try:
            await asyncio.wait({task})
        finally:
            self.active.discard(task)
            self.conns.pop(task, None)
            self.last = time.monotonic()
            listening.cancel()

    async def _listen_to(self, reader: asyncio.StreamReader, conn: Conn, task: asyncio.Task[Any]) -> None:
        """Answers to relayed questions, Ctrl-C; the client gone cancels its turn."""
        while True:
            line = await reader.readline()
            if not line:
                task.cancel()  # the client left (killed, its terminal closed): like its Ctrl-C
                return
            try:
                message = wire.decode(line)
            except ValueError:
                continue
            if message.get("t") == "cancel":
                if not conn.interrupted_by:
                    why = message.get("reason")
                    conn.interrupted_by.append(why if why in ("SIGTERM", "SIGHUP") else "Ctrl-C")
                task.cancel()
            elif message.get("t") == "answer":
                future = conn.answers.pop(int(message.get("id") or 0), None)
                if future is not None and not future.done():
                    future.set_result(dict(message.get("answer") or {}))

    async def _turn(self, conn: Conn, request: dict[str, Any]) -> None:
        """Run one turn for `conn` and end with its exit code, as `graphchat.cli.main` would."""
        _current.set(conn)
        CLIENT_REASON.set(conn.interrupted_by)  # the thread records the client's Ctrl-C/SIGTERM
        WORKING_DIR.set(str(request.get("cwd") or "") or None)
        TURN_ENV.set(dict(request["env"]))  # packs, exec tools and git run in the client's environment
        debug = bool(request.get("debug"))
        try:
            code = await self._run_ask(conn, request)
        except asyncio.CancelledError:
            if conn.stopped:  # not the client's doing: say so, as a crash of the helper would
                conn.send(
                    {
                        "t": "error",
                        "message": f"the warm helper (pid {os.getpid()}) was stopped during the turn "
                        f"({self.reason or 'stopped'}); the thread keeps what was done",
                    }
                )
                conn.send({"t": "exit", "code": 1})
                return
            conn.send({"t": "exit", "code": EXIT_INTERRUPTED, "interrupted": True})
            return
        except GraphchatError as exc:
            conn.send({"t": "error", "message": exc.message, "hint": exc.hint})
            if debug:
                _traceback()
            conn.send({"t": "exit", "code": exc.exit_code})
            return
        except Exception as exc:  # noqa: BLE001 - the client says it as main() would
            if debug:
                _traceback()
            if is_failed_write(exc):  # a read-only or full disk: one line, as main() says it
                conn.send({"t": "error", "message": describe_failure(exc), "hint": None})
                conn.send({"t": "exit", "code": 1})
                return
            conn.send(
                {
                    "t": "error",
                    "message": f"internal error: {type(exc).__name__}: {exc}",
                    "hint": "run with -v (or GRAPHCHAT_DEBUG=1) for the traceback",
                }
            )
            conn.send({"t": "exit", "code": 1})
            return
        conn.send({"t": "exit", "code": code})

    async def _run_ask(self, conn: Conn, request: dict[str, Any]) -> int:
        flags = dict(request["flags"])
        settings = load_settings(
            workspace=self.workspace, model_override=flags.get("model"), environ=request["env"]
        )
        needs_model(settings, "chat")
        self.catalog.reload()  # plans added or edited since the last turn
        front = RemoteFront(conn, bool(request.get("human")), bool(request.get("can_answer")))
        return await ask_turn(
            settings,
            flags,
            str(request["message"]),
            request.get("thread"),
            front,
            catalog=self.catalog,
            cwd=str(request.get("cwd") or ""),
        )


def _traceback() -> None:
    import traceback

    sys.stderr.write(traceback.format_exc())


def _version() -> str:
    return graphchat.__version__


def _report_ready(fd: int | None, message: dict[str, Any]) -> None:
    if fd is None:
        return
    try:
        os.write(fd, wire.encode(message))
        os.close(fd)
    except OSError:
        pass


async def _main(workspace: Path, ready_fd: int | None) -> int:
    import fcntl
    import signal

    helper = Helper(workspace)
    lock = open(helper.paths.lock, "a")  # noqa: SIM115 - held for the helper's life
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        _report_ready(ready_fd, {"ok": False, "busy": True, "message": "another helper is starting"})
        return 0
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, helper.stop, signal.Signals(signum).name)
    try:
        ready = await helper.start()
    except GraphchatError as exc:
        _report_ready(
            ready_fd, {"ok": False, "message": exc.message, "hint": exc.hint, "code": exc.exit_code}
        )
        if helper.catalog is not None:
            await helper.catalog.aclose()
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001
        import traceback

        traceback.print_exc()
        _report_ready(
            ready_fd,
            {"ok": False, "message": f"the warm helper could not start: {type(exc).__name__}: {exc}"},
        )
        if helper.catalog is not None:
            await helper.catalog.aclose()
        return 1
    _report_ready(ready_fd, ready)
    sys.stderr.write(f"graphchat warm: helper {os.getpid()} ready for {workspace}\n")
    sys.stderr.flush()
    await helper.run_until_stopped()
    return 0


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m graphchat.warm.helper")
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--ready-fd", type=int, default=None)
    args = parser.parse_args(argv)
    wire.use_orjson()
    sys.stdout = RoutedStream("out", sys.stdout)  # type: ignore[assignment]
    sys.stderr = RoutedStream("err", sys.stderr)  # type: ignore[assignment]
    code = asyncio.run(_main(Path(args.workspace), args.ready_fd))
    try:
        sys.stderr.flush()
        sys.__stderr__.flush() if sys.__stderr__ else None
    except (OSError, ValueError):
        pass
    os._exit(code)


if __name__ == "__main__":
    main()
