"""The warm helper's wire: one JSON object a line over a Unix socket, in both directions.

Client → helper: `{"op": "ask" | "status" | "stop", …}` first; during a turn `{"t": "answer"}`
(a relayed question's answer) and `{"t": "cancel"}` (Ctrl-C).
Helper → client during a turn, in the order things happened: `accepted`, then `event` /
`waiting` (the activity sink), `begin` / `text` / `narration` / `finish` / `answer` / `warn` /
`parked` (the answer's presentation), `ask` (a question for the client's terminal), `out` /
`err` (anything else the turn wrote), `error` (the one error line) and last `exit`.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from typing import Any

PROTOCOL = 1

# The client keeps to the standard library's json: importing orjson (with the datetime, uuid
# and platform modules it loads) costs a start ~12 ms, more than all the JSON a turn's messages
# take to decode. The helper, which encodes every message of every turn, uses orjson
# (use_orjson()). Both write the same JSON.
_orjson: Any = None


def use_orjson() -> None:
    global _orjson
    import orjson

    _orjson = orjson


def encode(message: dict[str, Any]) -> bytes:
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(message, default=str)) + b"\n"
        except TypeError:  # a lone surrogate in some text: the standard library escapes it
            pass
    return json.dumps(message, default=str, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    value: Any = None
    if _orjson is not None:
        try:
            value = _orjson.loads(line)
        except _orjson.JSONDecodeError:  # an escaped lone surrogate: the standard library takes it
            value = None
    if value is None:
        value = json.loads(line)
    if not isinstance(value, dict):
        raise ValueError("not an object")
    return value


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end (Linux SO_PEERCRED; None where unknown)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    except OSError:
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


def same_user(sock: socket.socket) -> bool:
    """The other end runs as this user (where the system can tell; the 0700 directory holds
    everywhere)."""
    uid = peer_uid(sock)
    return uid is None or uid == os.getuid()
