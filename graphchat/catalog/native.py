"""Native tools: `ask_user` (the model asks the person) and `builtin__infer` (one model call).

Test hook: with GRAPHCHAT_TEST_TOOLS=1 in the environment, `debug__sleep` (sleeps, then echoes)
is also listed, so tests and benches can drive slow parallel tool rounds through the real command.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from graphchat.asks import MAX_OPTIONS, Question
from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.errors import GraphchatError
from graphchat.jsonschema_util import schema_refusal
from graphchat.llm.client import LLM

if TYPE_CHECKING:
    from graphchat.workspace import Settings

ASK_USER = ToolSpec(
    name="ask_user",
    description=(
        "Ask the person a question and wait for the answer. Use it when you need a decision or a fact "
        "only they have. Give `options` for a choice, or `schema` (a flat object schema) for a form. "
        "The result is {answer, answered: true} or {answered: false, reason: declined|unavailable}; "
        "when unavailable nobody can answer, so proceed on your best judgement and say so."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "the question, in one or two sentences"},
            "options": {
                "type": "array",
                "items": {"type": "string"},
                "description": "choices to pick from (at most 20)",
            },
            "schema": {
                "type": "object",
                "description": "a flat JSON object schema: fields the answer must have",
            },
        },
        "required": ["question"],
        "additionalProperties": False,
    },
    source="native",
    family="read",
)

INFER = ToolSpec(
    name="builtin__infer",
    description=(
        "One model call on an instruction. With `output_schema` the reply is JSON of that schema "
        "(validated); without it the result is {text}. `model` is a role (default, solver, judge, planner) "
        "or a model string."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "instruction": {"type": "string", "description": "what to do, with all the data it needs"},
            "output_schema": {"type": "object", "description": "JSON schema of the wanted output"},
            "model": {"type": "string", "description": "a model role or a litellm model string"},
        },
        # No `additionalProperties: false`: graph's packs/llm/infer.yaml schema accepts extra keys
        # (plans pass e.g. `data` beside the instruction).
        "required": ["instruction"],
    },
    source="native",
    family="read",
)

DEBUG_SLEEP = ToolSpec(
    name="debug__sleep",
    description="Test tool: sleep `seconds`, then return {slept, label}. Fails when `fail` is true.",
    input_schema={
        "type": "object",
        "properties": {
            "seconds": {"type": "number", "minimum": 0},
            "label": {"type": "string"},
            "fail": {"type": "boolean"},
        },
        "required": ["seconds"],
    },
    source="native",
    family="read",
)


def test_tools_enabled() -> bool:
    return os.environ.get("GRAPHCHAT_TEST_TOOLS") == "1"


class NativeSource(ToolSource):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def specs(self) -> list[ToolSpec]:
        specs = [ASK_USER, INFER]
        if test_tools_enabled():
            specs.append(DEBUG_SLEEP)
        return specs

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        import asyncio

        if spec.name == ASK_USER.name:
            return await ask_user(arguments, ctx)
        if spec.name == INFER.name:
            return await self._infer(arguments, ctx)
        if spec.name == DEBUG_SLEEP.name and test_tools_enabled():
            await asyncio.sleep(float(arguments["seconds"]))
            if arguments.get("fail"):
                return ToolResult.error(f"debug__sleep failed as asked ({arguments.get('label', '')})")
            return ToolResult({"slept": arguments["seconds"], "label": arguments.get("label", "")})
        return ToolResult.error(f"unknown native tool {spec.name}")

    async def _infer(self, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        refused = schema_refusal(arguments.get("output_schema"))
        if refused is not None:
            return ToolResult.error(f"{INFER.name}: output_schema {refused}")
        try:
            config = self._model(arguments.get("model"))
        except GraphchatError as exc:
            return ToolResult.error(exc.message)
        llm = LLM(config, events=ctx.events)
        messages = [{"role": "user", "content": arguments["instruction"]}]
        schema = arguments.get("output_schema")
        try:
            if schema:
                value: Any = await llm.structured(messages, schema, site="builtin__infer")
            else:
                value = {"text": (await llm.complete(messages, site="builtin__infer")).content}
        except GraphchatError as exc:
            return ToolResult.error(exc.message)
        finally:
            if ctx.on_usage is not None:
                ctx.on_usage(llm.usage)
        return ToolResult(value)

    def _model(self, name: str | None) -> Any:
        """`model`: a role, a named model (models.named) or a litellm model string."""
        return self.settings.step_model(name or None, "default")

    async def aclose(self) -> None:
        pass


async def ask_user(arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
    """Put the model's question to the person through the host's one asker."""
    asker = ctx.asker
    if asker is None:  # no host to ask through: never hang
        return ToolResult({"answered": False, "reason": "unavailable"})

    options = arguments.get("options") or []
    if len(options) > MAX_OPTIONS:
        return ToolResult.error(
            f"ask_user takes at most {MAX_OPTIONS} options, got {len(options)}: ask again with "
            f"{MAX_OPTIONS} or fewer (group or narrow them), or ask without options for a free answer"
        )
    question = _question(arguments)
    answer = await asker.ask(question)  # an unavailable host answers at once
    if not answer.answered and answer.reason == "unavailable":
        stored = asker.park(question)  # a host whose runs can wait parks the call (issue 9)
        if stored is not None:  # a resumed run: the person's answer
            answer = stored
    if answer.answered:
        return ToolResult({"answer": answer.value, "answered": True})
    reason = answer.reason or "declined"
    return ToolResult({"answered": False, "reason": reason}, note=f"not answered ({reason})")


def _question(arguments: dict[str, Any]) -> Any:
    options = arguments.get("options")
    return Question(
        prompt=str(arguments["question"]),
        schema=arguments.get("schema") or None,
        options=[str(o) for o in options] if options else None,
    )
