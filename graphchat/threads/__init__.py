"""Threads: every ask and chat turn, kept as append-only JSONL (see spec/threads.md)."""

from graphchat.threads.replay import shorten_tool_result, to_model_messages
from graphchat.threads.store import LoadReport, Thread, ThreadInfo, ThreadStore
from graphchat.threads.window import fit_to_window

__all__ = [
    "LoadReport",
    "Thread",
    "ThreadInfo",
    "ThreadStore",
    "fit_to_window",
    "shorten_tool_result",
    "to_model_messages",
]
