"""The thin side of `ask`: hand the question to this workspace's warm helper and show the turn.

Imports only the standard library, orjson and graphchat's own light modules (rendering,
discovery): never litellm, never the MCP SDK. Every message of the turn is replayed on the same
TerminalFront, sink and asker a local `ask` uses, in the order the helper sent them, so stdout,
stderr and the exit code are what a local `ask` would give.

No helper, a dead one, one of another configuration or graphchat, or one that does not accept
the question: the caller runs the question itself, without a word (with `-v`, a line says why
a helper did not take it). The request carries this process's whole environment: the helper
runs the turn in it. Once the helper has accepted
it, the helper is running the turn: should it die mid-turn, the client says so in one line and
exits 1 (the thread keeps what was done and is repaired when next loaded, as after a crash).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphchat.warm import identity as ident
from graphchat.warm import wire

if TYPE_CHECKING:
    from graphchat.runs.front import Front

ACCEPT_TIMEOUT_S = 10.0


def hand_over(
    args: Any, flags: dict[str, Any], read_message: Callable[[], str], front: Front
) -> tuple[int | None, str | None]:
    """Ask the question (`read_message()`: read only when a helper may take it) through a warm
    helper, shown on `front` (a local `ask`'s own). Returns (exit code, None) when the helper ran
    the turn; (None, message) when it did not but the message was read (piped stdin is read
    once: the caller asks that message itself); (None, None) when there is no helper."""
    if ident.disabled():
        return None, None
    try:
        identity = ident.find(getattr(args, "home", None))
        paths = ident.paths(identity, ident.runtime_dir(create=False))
    except Exception:  # noqa: BLE001 - no usable helper: the caller says what is wrong, if anything
        return None, None
    if not paths.socket.exists():
        return None, None
    # the warm client imports only what the hand-over needs (tests/warm/test_wire_json.py)
    from graphchat.warm.control import connect

    sock = connect(paths.socket)
    if sock is None:
        return None, None
    try:
        return _ask(args, flags, read_message, front, identity, paths, sock)
    finally:
        sock.close()


def _ask(
    args: Any,
    flags: dict[str, Any],
    read_message: Callable[[], str],
    front: Front,
    identity: ident.Identity,
    paths: ident.Paths,
    sock: Any,
) -> tuple[int | None, str | None]:
    # the warm client imports only what the hand-over needs (tests/warm/test_wire_json.py)
    from graphchat import __version__

    message = read_message()
    sink = front.sink()
    can_answer = front.here(sink).can_answer
    request = {
        "op": "ask",
        "protocol": wire.PROTOCOL,
        "version": __version__,
        "key": identity.key,
        "env": dict(os.environ),  # the whole environment: the helper runs the turn in it
        "flags": flags,
        "message": message,
        "thread": args.thread,
        "cwd": os.getcwd(),
        "tty": {"out": _isatty(sys.stdout), "err": _isatty(sys.stderr)},
        "human": bool(sink.human),
        "can_answer": bool(can_answer),
        "debug": bool(getattr(args, "verbose", False) or os.environ.get("GRAPHCHAT_DEBUG") == "1"),
    }
    stream = sock.makefile("rb")
    try:
        sock.settimeout(ACCEPT_TIMEOUT_S)
        sock.sendall(wire.encode(request))
        first = stream.readline()
        reply = wire.decode(first) if first else {}
    except (OSError, ValueError):
        return None, message
    if reply.get("t") != "accepted":  # another configuration, leaving, ...: asked here instead
        if request["debug"] and reply.get("t") == "refused":
            sys.stderr.write(
                f"graphchat: the warm helper did not take the question ({reply.get('why')}); asking here\n"
            )
            sys.stderr.flush()
        return None, message
    sock.settimeout(None)
    return Relay(sock, stream, front, sink, int(reply.get("pid") or 0), paths).run(), None


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (ValueError, OSError):
        return False


class Relay:
    """Replays a turn's messages on this process's front, sink and asker."""

    def __init__(self, sock: Any, stream: Any, front: Any, sink: Any, pid: int, paths: ident.Paths) -> None:
        self.sock = sock
        self.stream = stream
        self.front = front
        self.sink = sink
        self.pid = pid
        self.paths = paths
        self.asker: Any = None
        self.cancelled = False

    def run(self) -> int:
        while True:
            try:
                line = self.stream.readline()
                if not line:
                    return self._helper_gone()
                code = self._dispatch(wire.decode(line))
            except _Interrupted:
                raise
            except KeyboardInterrupt:
                if self.cancelled:  # a second Ctrl-C: stop waiting for the helper to wind down
                    raise
                self.cancelled = True
                # the warm client imports only what the hand-over needs (tests/warm/test_wire_json.py)
                from graphchat import interrupts

                # the helper cancels the turn, records what interrupted it, and says so
                self._send({"t": "cancel", "reason": interrupts.reason()})
                continue
            except (OSError, ValueError):
                return self._helper_gone()
            if code is not None:
                return code

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.sendall(wire.encode(message))
        except OSError:
            pass

    def _helper_gone(self) -> int:
        self.front.finish(complete=False)
        self.front.error(
            f"the warm helper (pid {self.pid}) stopped during the turn; the thread keeps what was done "
            f"(its log: {self.paths.log})"
        )
        return 1

    def _dispatch(self, message: dict[str, Any]) -> int | None:
        kind = message.get("t")
        front = self.front
        if kind == "event":
            self.sink.emit(str(message.get("e")), **dict(message.get("f") or {}))
        elif kind == "waiting":
            self.sink.waiting(message.get("w"))
        elif kind == "text":
            front.text(str(message.get("s") or ""))
        elif kind == "narration":
            front.narration(str(message.get("s") or ""))
        elif kind == "begin":
            front.begin(bool(message.get("streaming")))
        elif kind == "finish":
            front.finish(bool(message.get("complete", True)))
        elif kind == "answer":
            front.answer(str(message.get("content") or ""), message.get("payload"))
        elif kind == "warn":
            front.warn(str(message.get("message") or ""))
        elif kind == "parked":
            front.parked(
                list(message.get("requests") or []),
                bool(message.get("json")),
                message.get("home"),
                str(message.get("what") or "the run"),
            )
        elif kind in ("out", "err"):
            out = sys.stdout if kind == "out" else sys.stderr
            out.write(str(message.get("s") or ""))
            out.flush()
        elif kind == "ask":
            self._answer(message)
        elif kind == "error":
            front.error(str(message.get("message") or ""), message.get("hint"))
        elif kind == "exit":
            if message.get("interrupted"):
                raise _Interrupted
            return int(message.get("code") or 0)
        return None

    def _answer(self, message: dict[str, Any]) -> None:
        """A question of the turn, asked here as a local `ask` asks it; the answer goes back."""
        import asyncio

        # the warm client imports only what the hand-over needs (tests/warm/test_wire_json.py)
        from graphchat.asks import Question

        if self.asker is None:
            self.asker = self.front.here(self.sink)
        question = Question(**dict(message.get("q") or {}))
        answer = asyncio.run(self.asker._ask(question))
        self._send(
            {
                "t": "answer",
                "id": message.get("id"),
                "answer": {"answered": answer.answered, "value": answer.value, "reason": answer.reason},
            }
        )


class _Interrupted(KeyboardInterrupt):
    """The helper cancelled the turn (this client's Ctrl-C): ends as a local Ctrl-C ends."""
