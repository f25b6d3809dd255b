"""Threads: every ask and chat turn, kept as append-only JSONL (see docs/threads.md).

Names are loaded on first use, so `threads list` does not pay for replay or window code.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphchat.threads.repair import shorten_tool_result, to_model_messages
    from graphchat.threads.store import LoadReport, Thread, ThreadInfo, ThreadStore
    from graphchat.threads.window import fit_to_window

_HOMES = {
    "LoadReport": "store",
    "Thread": "store",
    "ThreadInfo": "store",
    "ThreadStore": "store",
    "fit_to_window": "window",
    "shorten_tool_result": "repair",
    "to_model_messages": "repair",
}

__all__ = [
    "LoadReport",
    "Thread",
    "ThreadInfo",
    "ThreadStore",
    "fit_to_window",
    "shorten_tool_result",
    "to_model_messages",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'graphchat.threads' has no attribute {name!r}")
    return getattr(import_module(f"graphchat.threads.{home}"), name)
