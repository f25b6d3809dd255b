"""Native tools through the one call path: ask_user, builtin__infer, and the debug__sleep test hook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graphchat.asks import Answer, Asker, Question, ScriptedAsker, UnavailableAsker
from graphchat.catalog.base import CallContext, Catalog
from graphchat.catalog.native import NativeSource
from graphchat.workspace import ModelConfig, Settings
from tests.scripted_server import ScriptedModelServer


def settings_for(tmp_path: Path, server: ScriptedModelServer | None = None) -> Settings:
    models = {}
    if server is not None:
        models["default"] = ModelConfig(model="openai/scripted", api_base=server.url, api_key="k")
    return Settings(workspace=tmp_path, config_path=None, models=models)


class RecordingAsker(Asker):
    def __init__(self, answer: Answer) -> None:
        super().__init__()
        self.answer = answer
        self.questions: list[Question] = []

    async def _ask(self, question: Question) -> Answer:
        self.questions.append(question)
        return self.answer


def test_specs_and_families(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHCHAT_TEST_TOOLS", raising=False)
    catalog = Catalog([NativeSource(settings_for(tmp_path))])
    assert {s.name: s.family for s in catalog.list()} == {"ask_user": "read", "builtin__infer": "read"}
    monkeypatch.setenv("GRAPHCHAT_TEST_TOOLS", "1")
    catalog = Catalog([NativeSource(settings_for(tmp_path))])
    assert "debug__sleep" in [s.name for s in catalog.list()]


async def test_ask_user_answered(tmp_path: Path) -> None:
    asker = RecordingAsker(Answer(True, "blue"))
    catalog = Catalog([NativeSource(settings_for(tmp_path))])
    result = await catalog.call(
        "ask_user", {"question": "Which colour?", "options": ["red", "blue"]}, CallContext(asker=asker)
    )
    assert not result.is_error and result.value == {"answer": "blue", "answered": True}
    [question] = asker.questions
    assert (question.prompt, question.options, question.schema) == ("Which colour?", ["red", "blue"], None)


async def test_ask_user_with_a_schema_passes_it_to_the_asker(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    asker = RecordingAsker(Answer(True, {"n": 2}))
    result = await Catalog([NativeSource(settings_for(tmp_path))]).call(
        "ask_user", {"question": "How many?", "schema": schema}, CallContext(asker=asker)
    )
    assert result.value == {"answer": {"n": 2}, "answered": True}
    assert asker.questions[0].schema == schema


@pytest.mark.parametrize(
    ("asker", "reason"),
    [(None, "unavailable"), (UnavailableAsker(), "unavailable"), (ScriptedAsker({}), "unavailable")],
)
async def test_ask_user_unavailable_never_hangs(tmp_path: Path, asker: Asker | None, reason: str) -> None:
    result = await Catalog([NativeSource(settings_for(tmp_path))]).call(
        "ask_user", {"question": "Anyone there?"}, CallContext(asker=asker)
    )
    assert not result.is_error and result.value == {"answered": False, "reason": reason}


async def test_ask_user_declined(tmp_path: Path) -> None:
    result = await Catalog([NativeSource(settings_for(tmp_path))]).call(
        "ask_user", {"question": "Sure?"}, CallContext(asker=RecordingAsker(Answer.declined()))
    )
    assert result.value == {"answered": False, "reason": "declined"}


async def test_ask_user_requires_a_question(tmp_path: Path) -> None:
    result = await Catalog([NativeSource(settings_for(tmp_path))]).call("ask_user", {}, CallContext())
    assert result.is_error and "question" in result.error_message


async def test_infer_with_a_schema_returns_the_validated_object(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"json": {"label": "spam"}})
    schema = {"type": "object", "properties": {"label": {"enum": ["spam", "ham"]}}, "required": ["label"]}
    usage: list[Any] = []
    result = await Catalog([NativeSource(settings_for(tmp_path, model_server))]).call(
        "builtin__infer",
        {"instruction": "Classify: WIN A PRIZE", "output_schema": schema},
        CallContext(on_usage=usage.append),
    )
    assert not result.is_error and result.value == {"label": "spam"}
    sent = model_server.requests[0]
    assert sent["messages"][0]["content"] == "Classify: WIN A PRIZE"
    assert sent["response_format"]["json_schema"]["schema"] == schema
    assert usage and usage[0].calls == 1


async def test_infer_without_a_schema_returns_text(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    model_server.push({"text": "a haiku"})
    result = await Catalog([NativeSource(settings_for(tmp_path, model_server))]).call(
        "builtin__infer", {"instruction": "write"}, CallContext()
    )
    assert result.value == {"text": "a haiku"}


async def test_infer_model_errors_are_error_results(
    tmp_path: Path, model_server: ScriptedModelServer
) -> None:
    model_server.push({"error": 401})
    result = await Catalog([NativeSource(settings_for(tmp_path, model_server))]).call(
        "builtin__infer", {"instruction": "x"}, CallContext()
    )
    assert result.is_error and "401" in result.error_message


async def test_infer_without_a_model_is_an_error_result(tmp_path: Path) -> None:
    result = await Catalog([NativeSource(settings_for(tmp_path))]).call(
        "builtin__infer", {"instruction": "x"}, CallContext()
    )
    assert result.is_error and "no model configured" in result.error_message


async def test_infer_accepts_extra_input_keys(tmp_path: Path, model_server: ScriptedModelServer) -> None:
    """graph: crates/graph-core/src/packs/llm/infer.yaml — its input_schema has no
    `additionalProperties: false`, so a plan may pass `data` beside the instruction."""
    model_server.push({"text": "two items"})
    result = await Catalog([NativeSource(settings_for(tmp_path, model_server))]).call(
        "builtin__infer", {"instruction": "count", "data": [1, 2]}, CallContext()
    )
    assert not result.is_error and result.value == {"text": "two items"}
