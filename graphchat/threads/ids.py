"""Thread ids: short random hex names, and the check applied to every id a user types.

A thread's folder name is its id, so an id from the user must never be able to name a path.
"""

from __future__ import annotations

import re

from graphchat.errors import EXIT_USAGE, GraphchatError

ID_RE = re.compile(r"[0-9a-f]{6,32}")
NEW_ID_BYTES = 6  # 12 hex characters


def new_id() -> str:
    """A fresh random thread id (12 lowercase hex characters)."""
    import secrets  # imported here: `threads list` never needs it, and it costs ~10 ms

    return secrets.token_hex(NEW_ID_BYTES)


def is_valid_id(text: str) -> bool:
    """True when `text` has the shape of a thread id (or an id prefix of at least 6 characters)."""
    return ID_RE.fullmatch(text) is not None


def normalize_user_id(text: str) -> str:
    """The id a user typed, trimmed and lower-cased; raises GraphchatError (exit 2) when it is not one."""
    candidate = text.strip().lower()
    if not is_valid_id(candidate):
        raise GraphchatError(
            f"not a thread id: {text!r}",
            exit_code=EXIT_USAGE,
            hint="a thread id is 6 to 32 hex characters; see `graphchat threads list`",
        )
    return candidate
