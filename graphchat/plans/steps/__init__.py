"""Control steps: the `tool_name`s the executor handles itself, one module each.

Every handler is `async (runner, step, scope, frame) -> result` and returns exactly the result
shape of docs/plans.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphchat.plans.steps import agent, ask, decide, exit, filter, map, reduce

HANDLERS: dict[str, Callable[..., Any]] = {
    "exit": exit.run,
    "decide": decide.run,
    "filter": filter.run,
    "map": map.run,
    "reduce": reduce.run,
    "agent": agent.run,
    "ask": ask.run,
}
