"""The one asker: coercion, field-by-field asking, scripted answers, unavailable hosts, serialization."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from graphchat.asks import (
    Answer,
    Asker,
    LineReader,
    Question,
    ScriptedAsker,
    UnavailableAsker,
    ask_by_lines,
    coerce,
    host_asker,
    load_answers,
)
from graphchat.errors import ConfigError

SCHEMA = {
    "type": "object",
    "required": ["channel", "confirm"],
    "properties": {
        "channel": {"enum": ["stable", "beta", "nightly"], "description": "Release channel"},
        "confirm": {"type": "boolean"},
        "count": {"type": "integer"},
    },
}


class Typed(LineReader):
    def __init__(self, lines: list[str | None]) -> None:
        self.lines = list(lines)
        self.shown: list[str] = []

    def say(self, text: str) -> None:
        self.shown.append(text)

    async def prompt(self, text: str) -> str | None:
        self.shown.append(text)
        return self.lines.pop(0) if self.lines else None


def test_coerce_by_schema() -> None:
    assert coerce("NIGHTLY", {"enum": ["stable", "nightly"]}) == "nightly"
    assert coerce("yes", {"type": "boolean"}) is True and coerce("n", {"type": "boolean"}) is False
    assert coerce(" 42 ", {"type": "integer"}) == 42
    assert coerce("2.5", {"type": "number"}) == 2.5
    assert coerce("hello", {"type": "string"}) == "hello"
    for text, prop in (
        ("maybe", {"type": "boolean"}),
        ("x", {"type": "integer"}),
        ("alpha", {"enum": ["beta"]}),
    ):
        with pytest.raises(ValueError):
            coerce(text, prop)


async def test_fields_asked_one_by_one_with_reprompt() -> None:
    reader = Typed(["sideways", "Beta", "yes", ""])
    answer = await ask_by_lines(Question("Which channel?", SCHEMA), reader)
    assert answer == Answer(True, {"channel": "beta", "confirm": True})
    assert any("choose one of: stable, beta, nightly" in line for line in reader.shown)


async def test_three_bad_values_decline_and_blank_required_declines() -> None:
    assert await ask_by_lines(Question("q", SCHEMA), Typed(["x", "y", "z"])) == Answer.declined()
    assert await ask_by_lines(Question("q", SCHEMA), Typed([""])) == Answer.declined()
    assert await ask_by_lines(Question("q", SCHEMA), Typed([None])) == Answer.declined()


async def test_free_text_and_options() -> None:
    assert await ask_by_lines(Question("name?"), Typed(["Ada"])) == Answer(True, "Ada")
    options = Question("pick", options=["once", "always", "refuse"])
    assert await ask_by_lines(options, Typed(["2"])) == Answer(True, "always")
    assert await ask_by_lines(options, Typed(["REF"])) == Answer(True, "refuse")


async def test_scripted_by_step_or_prompt_and_unlisted_unavailable(tmp_path: Path) -> None:
    file = tmp_path / "answers.yaml"
    file.write_text("E0: {channel: beta, confirm: false}\n'What is your name?': Ada\n")
    asker = ScriptedAsker(load_answers(str(file)))
    assert (await asker.ask(Question("Which?", SCHEMA, key="E0"))).value == {
        "channel": "beta",
        "confirm": False,
    }
    assert (await asker.ask(Question("What is your name?"))).value == "Ada"
    assert await asker.ask(Question("Other?", key="E9")) == Answer.unavailable()


def test_bad_answers_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_answers(str(tmp_path / "missing.yaml"))
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_answers(str(tmp_path / "list.yaml"))


async def test_headless_hosts_are_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(host_asker(interactive=False), UnavailableAsker)
    monkeypatch.setenv("GRAPHCHAT_EVENTS", "jsonl")
    assert isinstance(host_asker(interactive=True), UnavailableAsker)
    assert await host_asker().ask(Question("anyone?")) == Answer.unavailable()


async def test_questions_are_serialized() -> None:
    active: list[int] = []
    peak = 0

    class Slow(Asker):
        async def _ask(self, question: Question) -> Answer:
            nonlocal peak
            active.append(1)
            peak = max(peak, len(active))
            await asyncio.sleep(0.01)
            active.pop()
            return Answer(True, question.prompt)

    asker = Slow()
    answers = await asyncio.gather(*(asker.ask(Question(str(i))) for i in range(5)))
    assert [a.value for a in answers] == ["0", "1", "2", "3", "4"]
    assert peak == 1


def test_a_multiple_field_answers_with_a_list_and_an_mcp_client_sees_an_array() -> None:
    from graphchat.asks import Question, answer_schema
    from graphchat.jsonschema_util import errors
    from graphchat.mcp_server.asker import question_schema

    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "string", "enum": ["a", "b"], "multiple": True},
            "token": {"type": "string", "secret": True},
        },
    }
    fits = answer_schema(schema)
    assert errors(fits, {"tags": ["a", "b"], "token": "x"}) == []
    assert (
        errors(fits, {"tags": ["a", "c"]})
        and errors(fits, {"tags": "a"})
        and errors(fits, {"tags": ["a", "a"]})
    )
    form, unwrap = question_schema(Question("?", schema=schema))
    assert unwrap is None
    assert form["properties"]["tags"] == {
        "type": "array",
        "items": {"enum": ["a", "b"], "type": "string"},
        "uniqueItems": True,
    }
    assert form["properties"]["token"] == {"type": "string"}
