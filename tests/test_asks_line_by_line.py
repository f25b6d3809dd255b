"""Questions asked line by line (terminal, chat inline): a typed value that breaks its field's
schema (pattern, minimum, …) is re-asked like an uncoercible one, instead of failing the plan
step only after every field was typed."""

from __future__ import annotations

from graphchat.asks import LineReader, Question, ask_by_lines


class Lines(LineReader):
    def __init__(self, lines: list[str]) -> None:
        self.lines = list(lines)
        self.said: list[str] = []

    async def prompt(self, text: str) -> str | None:
        return self.lines.pop(0) if self.lines else None

    def say(self, text: str) -> None:
        self.said.append(text)


SCHEMA = {
    "type": "object",
    "required": ["time", "count"],
    "properties": {
        "time": {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"},
        "count": {"type": "integer", "minimum": 1},
    },
}


async def test_a_value_breaking_its_field_schema_is_re_asked() -> None:
    reader = Lines(["9:30", "09:30", "0", "2"])
    answer = await ask_by_lines(Question("When?", schema=SCHEMA), reader)
    assert answer.answered and answer.value == {"time": "09:30", "count": 2}
    assert any("does not match" in line for line in reader.said)
    assert any("less than the minimum of 1" in line for line in reader.said)


async def test_three_bad_values_decline() -> None:
    answer = await ask_by_lines(Question("When?", schema=SCHEMA), Lines(["1", "2", "3"]))
    assert not answer.answered and answer.reason == "declined"


async def test_a_pattern_miss_is_said_in_words_with_an_example() -> None:
    """Issue 11 point 12: with a description (or title), a pattern miss says what is wanted."""
    described = {"type": "string", "pattern": "^[A-Z]{3}$", "description": "a three-letter airport code"}
    schema = {"type": "object", "properties": {"from": {**described, "examples": ["ZRH"]}, "to": described}}
    reader = Lines(["zurich", "ZRH", "x", "GVA"])
    answer = await ask_by_lines(Question("Where?", schema=schema), reader)
    assert answer.value == {"from": "ZRH", "to": "GVA"}
    assert "  expected a three-letter airport code, e.g. ZRH" in reader.said
    assert "  expected a three-letter airport code, matching ^[A-Z]{3}$" in reader.said


async def test_y_and_n_answer_an_approval_but_not_an_ordinary_choice() -> None:
    options = ["once", "always", "refuse"]
    for typed, meant in (("y", "once"), ("YES", "once"), ("n", "refuse"), ("no", "refuse"), ("2", "always")):
        answer = await ask_by_lines(Question("Run it?", options=options, kind="approval"), Lines([typed]))
        assert (answer.answered, answer.value) == (True, meant), typed
    reader = Lines(["y"])
    answer = await ask_by_lines(Question("Which?", options=["red", "blue"]), reader)
    assert not answer.answered
    assert any("choose one of: red, blue" in line for line in reader.said)


async def test_a_multiple_field_takes_several_options_and_a_secret_one_is_read_unshown() -> None:
    """Issue 19: `multiple: true` (a list of options, re-asked on one that is none of them) and
    `secret: true` (read through the reader's `secret`, which a terminal does with echo off)."""

    class Masked(Lines):
        secrets: list[str] = []

        async def secret(self, text: str) -> str | None:
            self.secrets.append(text)
            return await self.prompt(text)

    schema = {
        "type": "object",
        "required": ["toppings", "token"],
        "properties": {
            "toppings": {"enum": ["olives", "ham", "basil"], "multiple": True},
            "token": {"type": "string", "secret": True},
        },
    }
    reader = Masked(["olives, pineapple", "3, OLIVES, 3", "tok-123"])
    answer = await ask_by_lines(Question("Order?", schema=schema), reader)
    assert answer.answered and answer.value == {"toppings": ["basil", "olives"], "token": "tok-123"}
    assert any("choose one of: olives, ham, basil" in line for line in reader.said)
    assert len(Masked.secrets) == 1 and "token" in Masked.secrets[0]
    assert not any("tok-123" in line for line in reader.said)
