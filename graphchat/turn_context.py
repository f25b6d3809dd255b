"""Where a turn runs: the asking process's working folder and environment.

A warm helper runs turns for other processes; tools, packs, MCP roots and a model's
`api_key: ${VAR}` read the turn's folder and variables through here, never through
`os.getcwd()`/`os.environ` directly. A bottom module (no graphchat import), so that `llm/`
and `catalog/` can both read it without importing each other.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar

# The asking process's working directory, when it is not this one's (a warm helper's turn).
WORKING_DIR: ContextVar[str | None] = ContextVar("graphchat_working_dir", default=None)
# The asking process's whole environment, when it is not this one's (a warm helper's turn).
TURN_ENV: ContextVar[Mapping[str, str] | None] = ContextVar("graphchat_turn_env", default=None)


def turn_environ() -> Mapping[str, str]:
    """The environment of the turn being run: the asking process's when a warm helper runs
    it, else this process's."""
    asked_with = TURN_ENV.get()
    return os.environ if asked_with is None else asked_with
