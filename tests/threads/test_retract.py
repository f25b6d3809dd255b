"""`turn_retracted` (the chat's /retry and /edit, issue 24): the turn before it stays on disk but
is neither replayed to the model nor read by /freeze."""

from __future__ import annotations

from typing import Any

from graphchat.plans.freeze import read_turns
from graphchat.threads import lines as ev
from graphchat.threads import to_model_messages


def turn(text: str, answer: str, *, failed: bool = False) -> list[dict[str, Any]]:
    call = {"id": f"c_{text}", "name": "t__look", "arguments": "{}"}
    closing = ev.turn_failed("boom") if failed else ev.turn_end({}, "m")
    return [
        dict(ev.user(text)),
        dict(ev.assistant(None, [call])),  # type: ignore[list-item]
        dict(ev.tool_result(call["id"], "t__look", "{}")),
        dict(ev.assistant(answer)),
        dict(closing),
    ]


def said(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (m["role"], m["content"])
        for m in to_model_messages(events)
        if m["role"] in ("user",) or (m["role"] == "assistant" and m.get("content"))
    ]


def test_the_retracted_turn_is_left_out_of_the_replay_and_the_next_one_takes_its_place() -> None:
    events = [*turn("one", "1"), *turn("two", "2"), dict(ev.turn_retracted()), *turn("two!", "2!")]
    assert said(events) == [("user", "one"), ("assistant", "1"), ("user", "two!"), ("assistant", "2!")]
    assert [t.user_text for t in read_turns(events)] == ["one", "two!"]


def test_a_second_retraction_in_a_row_takes_back_nothing_more() -> None:
    events = [*turn("one", "1"), *turn("two", "2"), dict(ev.turn_retracted()), dict(ev.turn_retracted())]
    assert said(events) == [("user", "one"), ("assistant", "1")]
    assert [t.user_text for t in read_turns(events)] == ["one"]


def test_retracting_a_failed_turn_keeps_the_one_before() -> None:
    events = [*turn("one", "1"), *turn("two", "2", failed=True), dict(ev.turn_retracted()), *turn("two", "2")]
    assert said(events) == [("user", "one"), ("assistant", "1"), ("user", "two"), ("assistant", "2")]


def test_an_unclosed_turn_can_be_retracted() -> None:
    events = [*turn("one", "1"), *turn("two", "2")[:-1], dict(ev.turn_retracted())]
    assert said(events) == [("user", "one"), ("assistant", "1")]
