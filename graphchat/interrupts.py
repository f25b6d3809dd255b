"""SIGTERM and SIGHUP end graphchat the way Ctrl-C does.

A turn is cancelled (and recorded in its thread as interrupted), servers are stopped, and the
process exits 128 + the signal's number (143, 129; 130 for Ctrl-C). Each signal is handed to
whatever handles SIGINT at that moment: asyncio's runner cancels the main task (its `finally`
blocks stop the servers); anywhere else it is a KeyboardInterrupt, as Ctrl-C would be.
"""

from __future__ import annotations

import contextvars
import signal
from types import FrameType

from graphchat.errors import EXIT_INTERRUPTED

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_received: list[int] = []  # the first signal that interrupted this process (not SIGINT)
# A warm helper's turn (graphchat.warm.helper): what interrupted its client, which the turn's
# record names instead of this process's own (a one-item list, filled when the client cancels).
CLIENT_REASON: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "graphchat_client_reason", default=None
)


def _like_ctrl_c(signum: int, frame: FrameType | None) -> None:
    if not _received:
        _received.append(signum)
    handler = signal.getsignal(signal.SIGINT)
    runner = getattr(getattr(handler, "func", None), "__self__", None)
    if type(runner).__name__ == "Runner":  # asyncio.run: cancel the main task, as on Ctrl-C
        handler(signal.SIGINT, frame)  # type: ignore[operator,misc]
        return
    if callable(handler) and handler is not signal.default_int_handler:
        # A host's own Ctrl-C (the chat: cancel the running turn, on the loop): the turn is
        # recorded as interrupted by this signal, and the host ends (its terminal is gone).
        handler(signal.SIGINT, frame)
        return
    raise KeyboardInterrupt


def install() -> None:
    """Treat SIGTERM and SIGHUP like Ctrl-C from now on (main thread only)."""
    for signum in SIGNALS:
        try:
            signal.signal(signum, _like_ctrl_c)
        except (ValueError, OSError):  # not the main thread, or not allowed here
            pass


def received() -> bool:
    """Whether SIGTERM or SIGHUP has come: the process is ending because of it."""
    return bool(_received)


def reason() -> str:
    """What interrupted the process: "Ctrl-C", "SIGTERM" or "SIGHUP"."""
    client = CLIENT_REASON.get()
    if client:
        return client[0]
    return signal.Signals(_received[0]).name if _received else "Ctrl-C"


def exit_code() -> int:
    """128 + the interrupting signal's number."""
    return 128 + _received[0] if _received else EXIT_INTERRUPTED
