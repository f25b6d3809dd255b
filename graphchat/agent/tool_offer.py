"""Which tools are offered to the model on a request: all of them up to
`settings.max_tools_offered`; beyond it, the most relevant to the message first (pure).

Relevance is the overlap of the message's words with a tool's name and description; `ask_user`
is always offered. The caller says how many were left out."""

from __future__ import annotations

import re
from typing import Any

_WORD = re.compile(r"[a-z0-9]{3,}")


def _words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower().replace("_", " ")))


def offered_tools(tools: list[dict[str, Any]], message: str, limit: int) -> tuple[list[dict[str, Any]], int]:
    """(the tools to offer, how many were left out). Order is kept for the ones offered."""
    if limit <= 0 or len(tools) <= limit:
        return tools, 0
    wanted = _words(message)

    def score(index: int) -> tuple[int, int, int]:
        function = tools[index].get("function") or {}
        name = str(function.get("name", ""))
        if name == "ask_user":
            return (0, 0, index)
        name_hits = len(wanted & _words(name))
        text_hits = len(wanted & _words(str(function.get("description", ""))))
        return (1, -(3 * name_hits + text_hits), index)

    chosen = sorted(sorted(range(len(tools)), key=score)[:limit])
    return [tools[i] for i in chosen], len(tools) - limit
