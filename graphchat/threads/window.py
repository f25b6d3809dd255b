"""Fit a replayed conversation into a model's context window by leaving out its oldest turns.

Pure. What is dropped comes in whole units so the result stays valid for a provider: earlier turns
whole (a user message and everything up to the next one), then, if the last turn alone is still
too long, its oldest assistant messages each together with their tool results. Leading system
messages and the last user message are always kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Message = dict[str, Any]


def omission_note(n_omitted: int) -> Message:
    """The message that tells the model earlier messages were left out."""
    return {
        "role": "user",
        "content": f"[Note: {n_omitted} earlier messages of this conversation were omitted "
        "to fit the model's context window.]",
    }


def _split(
    messages: list[Message],
) -> tuple[list[Message], list[list[Message]], Message | None, list[list[Message]]]:
    """(leading system messages, earlier turns, last user message, groups of the last turn)."""
    head = 0
    while head < len(messages) and messages[head].get("role") == "system":
        head += 1
    system, rest = messages[:head], messages[head:]
    last_user = max((i for i, m in enumerate(rest) if m.get("role") == "user"), default=None)
    if last_user is None:
        earlier_part, user, last_part = [], None, rest
    else:
        earlier_part, user, last_part = rest[:last_user], rest[last_user], rest[last_user + 1 :]
    # Earlier turns: a new unit at each user message.
    turns: list[list[Message]] = []
    for m in earlier_part:
        if m.get("role") == "user" or not turns:
            turns.append([m])
        else:
            turns[-1].append(m)
    # Last turn: a new unit at each assistant message (its tool results follow it).
    groups: list[list[Message]] = []
    for m in last_part:
        if m.get("role") != "tool" or not groups:
            groups.append([m])
        else:
            groups[-1].append(m)
    return system, turns, user, groups


def fit_to_window(
    messages: list[Message],
    *,
    max_tokens: int,
    count_tokens: Callable[[list[Message]], int],
) -> tuple[list[Message], int]:
    """Drop the oldest whole turns until `count_tokens(result) <= max_tokens`; returns (result, n_omitted).

    When something is dropped, a note saying how many messages were omitted goes first (after any
    system messages). When even the smallest allowed result is too long, that is returned: the
    model call then fails with the provider's own context error.
    """
    if count_tokens(messages) <= max_tokens:
        return messages, 0
    system, turns, user, groups = _split(messages)
    # Units in dropping order; the last user message and the last group after it are never dropped.
    droppable = turns + groups[:-1]
    last_group = groups[-1] if groups else []
    user_part = [user] if user is not None else []

    def candidate(k: int) -> tuple[list[Message], int]:
        n = sum(len(u) for u in droppable[:k])
        split = max(0, len(turns) - k)  # remaining units before the last user message
        remaining = droppable[k:]
        body = [m for u in remaining[:split] for m in u] + user_part
        body += [m for u in remaining[split:] for m in u] + last_group
        return system + [omission_note(n)] + body, n

    if not droppable:
        return messages, 0
    # Binary search the fewest dropped units that fit: each count may be costly on long histories.
    lo, hi = 1, len(droppable)
    if count_tokens(candidate(hi)[0]) > max_tokens:
        return candidate(hi)
    while lo < hi:
        mid = (lo + hi) // 2
        if count_tokens(candidate(mid)[0]) <= max_tokens:
            hi = mid
        else:
            lo = mid + 1
    return candidate(lo)
