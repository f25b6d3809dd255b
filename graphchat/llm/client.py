"""LLM: one model role behind litellm — streaming, retries, usage and cost, structured replies."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphchat.errors import ConfigError, GraphchatError
from graphchat.jsonschema_util import first_error, schema_refusal
from graphchat.llm.budget import MAX_OUTPUT_TOKENS, MODEL_TIMEOUT, Budget, BudgetExceeded
from graphchat.llm.budget import current as current_budget
from graphchat.llm.runtime import alitellm_module, litellm_module
from graphchat.llm.stream import StreamAssembler
from graphchat.llm.types import Completion, ToolCall, Usage

if TYPE_CHECKING:
    from graphchat.events import EventSink
    from graphchat.workspace import ModelConfig

Message = dict[str, Any]
# Providers whose prompt cache is asked for with cache_control markers (litellm's prefixes).
MARKED_CACHE_PROVIDERS = ("anthropic", "bedrock", "vertex_ai", "vertex_ai_beta")
CACHE_POINTS = [{"location": "message", "role": "system"}, {"location": "message", "index": -1}]


def _caches(config: ModelConfig) -> bool:
    """Whether calls to `config` carry cache_control markers: its `prompt_caching` when set,
    else where litellm's model list says the provider caches prompts (settings.prompt_caching:
    false turns it off everywhere)."""
    if config.prompt_caching is not None:
        return config.prompt_caching
    if config.model.split("/", 1)[0] not in MARKED_CACHE_PROVIDERS:
        return False  # OpenAI and its kind cache by themselves, with no marker in the request
    try:
        return bool(litellm_module().utils.supports_prompt_caching(config.model))
    except Exception:  # an unmapped model
        return False


class LLM:
    """Calls to one configured model. `usage` is the running total of every call made through it."""

    def __init__(self, config: ModelConfig, *, events: EventSink | None = None, num_retries: int = 3) -> None:
        self.config = config
        self.events = events
        self.num_retries = num_retries
        self.usage = Usage()
        self._checked: set[str] = set()  # the models whose configuration was checked

    @property
    def model(self) -> str:
        return self.config.model

    def _kwargs(self, config: ModelConfig | None = None) -> dict[str, Any]:
        config = config or self.config
        kwargs: dict[str, Any] = dict(config.extra)
        kwargs["model"] = config.model
        # on `ask`'s path before it hands the turn to a warm helper: imported when used
        from graphchat.llm.keys import expanded

        if config.api_base:  # `${VAR}` expanded here, for the request only
            kwargs["api_base"] = expanded(config, "api_base")
        if config.api_key:
            kwargs["api_key"] = expanded(config, "api_key")
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        # The global litellm.num_retries is ignored (and reset) upstream: pass it on every call.
        kwargs["num_retries"] = self.num_retries
        if _caches(config):  # graph's two breakpoints: the system prompt, the conversation's tail
            kwargs["cache_control_injection_points"] = CACHE_POINTS
        return kwargs

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
        tool_choice: Any = None,
        response_format: Any = None,
        site: str = "chat",
        stream: bool = True,
    ) -> Completion:
        """One model call. Text reaches `on_text` as it streams; errors are GraphchatError (exit 1).

        A model with `fallbacks` (graph's provider failover) moves to the next one when its
        provider fails as an outage does (429, 5xx, no connection, silence) after its own
        retries — never on a bad request or a rejected answer; when every one fails, the error
        names each attempt."""
        candidates = (self.config, *self.config.fallbacks)
        failures: list[str] = []
        for index, config in enumerate(candidates):
            started = time.perf_counter()
            try:
                return await self._complete(
                    config, messages, tools, on_text, tool_choice, response_format, site, stream
                )
            except GraphchatError as exc:
                sent = not isinstance(exc, (ConfigError, BudgetExceeded))  # else nothing left here
                if len(candidates) > 1 and sent:  # the attempt shows in usage, beside the one that answers
                    self._failed(config, site, (time.perf_counter() - started) * 1000)
                if len(candidates) == 1 or not _outage(exc):
                    raise
                failures.append(f"{config.model}: {exc.message}")
                if index + 1 < len(candidates) and self.events is not None:
                    self.events.warning(
                        f"{config.model} failed, trying {candidates[index + 1].model}: {exc.message}"
                    )
        raise GraphchatError(f"every model failed ({len(failures)} tried) — " + " | ".join(failures))

    def _failed(self, config: ModelConfig, site: str, ms: float) -> None:
        """Meter a failed call of a model with fallbacks: one call, failed, no tokens."""
        self.usage = self.usage + Usage(calls=1, failed=1)
        if self.events is not None:
            self.events.llm_call(site, config.model, 0, 0, ms, role=self.config.role, failed=True)

    async def _complete(
        self,
        config: ModelConfig,
        messages: list[Message],
        tools: list[dict[str, Any]] | None,
        on_text: Callable[[str], None] | None,
        tool_choice: Any,
        response_format: Any,
        site: str,
        stream: bool,
    ) -> Completion:
        """One call to one model (`config`: this LLM's or one of its fallbacks)."""
        litellm = await alitellm_module(warm=config.model)
        if config.model not in self._checked:
            # on `ask`'s path before it hands the turn to a warm helper: imported when used
            from graphchat.llm.errors import check_configuration

            check_configuration(litellm, config)  # nothing is sent for a config mistake
            self._checked.add(config.model)
        kwargs = self._kwargs(config)
        kwargs["messages"] = messages
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        if response_format is not None:
            kwargs["response_format"] = response_format
        started = time.perf_counter()
        events = self.events
        if events is not None:
            events.waiting("thinking" if site == "chat" else f"{site} · thinking")
            if on_text is not None:
                on_text = _first_text_ends_wait(on_text, events)
        budget = current_budget()
        try:
            if stream:
                # Without include_usage, litellm invents usage with a local tokenizer.
                assembler = await self._stream(litellm, kwargs, on_text, budget, config)
                content, calls = assembler.content, assembler.tool_calls()
                raw_usage, finish = assembler.usage, assembler.finish_reason
            else:
                response = await self._request(litellm, kwargs, budget, config)
                content, calls, raw_usage, finish = _from_response(response)
                answer = "".join([content, *(call.arguments for call in calls)])
                self._check_output(len(answer), answer)
                if content and on_text is not None:
                    on_text(content)
        except GraphchatError:
            raise
        except Exception as exc:
            # on `ask`'s path before it hands the turn to a warm helper: imported when used
            from graphchat.llm.errors import to_graphchat_error

            raise to_graphchat_error(
                exc,
                config,
                num_retries=self.num_retries,
                messages=messages,
                count_tokens=lambda m: count_tokens(config.model, m),
            ) from exc
        finally:
            if events is not None:
                events.waiting(None)
        ms = (time.perf_counter() - started) * 1000
        usage = self._usage(raw_usage, config)
        self.usage = self.usage + usage
        if budget is not None:
            budget.spent(usage.cost_usd, config.model, self.events)
        import logging

        logging.getLogger("graphchat.llm").info(
            "%s: %s (%s) %d input / %d output tokens in %.0f ms",
            site, config.model, self.config.role, usage.input_tokens, usage.output_tokens, ms,
        )  # fmt: skip
        if self.events is not None:
            self.events.llm_call(
                site,
                config.model,
                usage.input_tokens,
                usage.output_tokens,
                ms,
                role=self.config.role,  # a fallback answers in the role of the model it stands in for
                cache=_cache_tokens(raw_usage),
                cost_usd=usage.cost_usd,
            )
        return Completion(
            content=content, tool_calls=calls, usage=usage, model=config.model, finish_reason=finish
        )

    @property
    def timeout(self) -> float:
        """Seconds without a byte from the model after which a call ends (settings.model_timeout)."""
        return self.config.model_timeout or MODEL_TIMEOUT

    @property
    def max_output_tokens(self) -> int:
        """The longest answer taken (settings.max_output_tokens)."""
        return self.config.max_output_tokens or MAX_OUTPUT_TOKENS

    def _silent(self, model: str | None = None) -> GraphchatError:
        error = GraphchatError(
            f"{model or self.config.model} sent nothing for {self.timeout:g} s (settings.model_timeout); "
            "the call was ended"
        )
        error.outage = True  # type: ignore[attr-defined]  # a fallback may answer
        return error

    async def _request(
        self, litellm: Any, kwargs: dict[str, Any], budget: Budget | None, config: ModelConfig | None = None
    ) -> Any:
        """One paid request: charged to the turn's or run's budget first, then sent; a reply
        that does not start (or, not streamed, does not arrive) within the timeout ends it."""
        model = (config or self.config).model
        if budget is not None:
            budget.charge(model)
        try:
            async with asyncio.timeout(self.timeout):
                return await litellm.acompletion(**kwargs)
        except TimeoutError:
            raise self._silent(model) from None

    async def _stream(
        self,
        litellm: Any,
        kwargs: dict[str, Any],
        on_text: Callable[[str], None] | None,
        budget: Budget | None = None,
        config: ModelConfig | None = None,
    ) -> StreamAssembler:
        """Stream one reply. A stream that breaks before anything arrived is tried again (up to
        num_retries); once text has reached the person it is not (that would repeat it).

        The watchdog: a stream that sends nothing for `timeout` seconds, or more than
        `max_output_tokens`, ends with an error naming the setting (never retried)."""
        attempt = 0
        stream_kwargs = {**kwargs, "stream": True, "stream_options": {"include_usage": True}}
        model = (config or self.config).model
        while True:
            response = await self._request(litellm, stream_kwargs, budget, config)
            assembler = StreamAssembler(on_text)
            checked = (
                self.max_output_tokens
            )  # counted in tokens past this many characters, then at each doubling
            loop = asyncio.get_running_loop()
            try:
                async with asyncio.timeout(self.timeout) as watch:
                    async for chunk in response:
                        assembler.feed(chunk)
                        watch.reschedule(loop.time() + self.timeout)
                        if assembler.size > checked:
                            self._check_output(assembler.size, assembler.text_so_far())
                            checked = 2 * assembler.size
                if assembler.size > self.max_output_tokens:
                    self._check_output(assembler.size, assembler.text_so_far())
                return assembler
            except TimeoutError:
                await _close(response)
                raise self._silent(model) from None
            except GraphchatError:
                await _close(response)
                raise
            except Exception as exc:
                if assembler.started or attempt >= self.num_retries:
                    # on `ask`'s path before it hands the turn to a warm helper: imported when used
                    from graphchat.llm.errors import provider_message

                    broke = GraphchatError(
                        f"the connection to {model} broke off mid-reply: {provider_message(exc)}"
                    )
                    broke.outage = not assembler.started  # type: ignore[attr-defined]  # text shown: no failover
                    raise broke from exc
                attempt += 1

    def _check_output(self, size: int, text: str) -> None:
        """GraphchatError when an answer (`size` characters, `text`) is longer than
        max_output_tokens. A token is at least one character: shorter answers are not counted."""
        cap = self.max_output_tokens
        if size <= cap or count_text_tokens(self.config.model, text) <= cap:
            return
        raise GraphchatError(
            f"the answer of {self.config.model} passed settings.max_output_tokens ({cap:,} tokens); "
            "the call was ended"
        )

    def _usage(self, raw: Any, config: ModelConfig | None = None) -> Usage:
        def field(name: str) -> int:
            value = raw.get(name) if isinstance(raw, dict) else getattr(raw, name, None)
            return int(value or 0)

        input_tokens = field("prompt_tokens") if raw is not None else 0
        output_tokens = field("completion_tokens") if raw is not None else 0
        cache = _cache_tokens(raw)
        cost = self.cost(input_tokens, output_tokens, config, cache=cache)
        return Usage(input_tokens, output_tokens, cost, calls=1)

    def cost(
        self,
        input_tokens: int,
        output_tokens: int,
        config: ModelConfig | None = None,
        *,
        cache: dict[str, int] | None = None,
    ) -> float | None:
        """USD for a call: the configured price, else litellm's price list, else None (unknown).

        `cache`: the prompt-cache reads and writes among the `input_tokens` (litellm counts
        them in prompt_tokens), priced at their own rates: the configured ones (unset: graph's
        input x 0.1 for a read, x 1.25 for a write), else litellm's cache_read_input_token_cost
        and cache_creation_input_token_cost."""
        config = config or self.config
        read = (cache or {}).get("cache_read_input_tokens", 0)
        written = (cache or {}).get("cache_creation_input_tokens", 0)
        if config.input_cost_per_token is not None or config.output_cost_per_token is not None:
            price = config.input_cost_per_token or 0.0
            read_price = config.cache_read_input_token_cost
            write_price = config.cache_creation_input_token_cost
            return (
                max(input_tokens - read - written, 0) * price
                + read * (price / 10 if read_price is None else read_price)
                + written * (price * 1.25 if write_price is None else write_price)
                + output_tokens * (config.output_cost_per_token or 0.0)
            )
        try:
            prompt_cost, completion_cost = litellm_module().cost_per_token(
                model=config.model,
                prompt_tokens=input_tokens,
                completion_tokens=output_tokens,
                cache_read_input_tokens=read,
                cache_creation_input_tokens=written,
            )
        except Exception:  # ModelNotMappedError subclasses only Exception: an unpriced model
            return None
        return float(prompt_cost) + float(completion_cost)

    async def structured(
        self, messages: list[Message], schema: dict[str, Any], *, site: str, name: str = "output"
    ) -> dict[str, Any]:
        """A reply forced to `schema`: parsed, validated, with one repair pass; else GraphchatError."""
        # on `ask`'s path before it hands the turn to a warm helper: imported when used
        from graphchat.llm.jsonreply import parse_json_reply, schema_instruction

        refused = schema_refusal(schema)
        if refused is not None:  # before any model call: the schema could never be checked
            raise GraphchatError(f"{site}: the output schema {refused}")

        history = [*messages, {"role": "user", "content": schema_instruction(schema)}]
        response_format = self._response_format(schema, name)
        problem = ""
        content = ""
        for attempt in range(2):
            if attempt:
                history = [
                    *history,
                    {"role": "assistant", "content": content},
                    {
                        "role": "user",
                        "content": f"That reply is not valid: {problem}. Reply again with only the JSON "
                        "value that matches the schema, nothing else.",
                    },
                ]
            fixer = (
                self
                if not attempt or self.config.repair is None
                else LLM(self.config.repair, events=self.events)
            )
            completion = await fixer._complete_structured(history, response_format, site)
            if fixer is not self:  # graph's repair role: its call counts in this model's usage
                self.usage = self.usage + fixer.usage
            content = completion.content
            try:
                value = parse_json_reply(content)
            except ValueError as exc:
                problem = str(exc)
                continue
            problem = first_error(schema, value) or ""
            if not problem:
                return value
        raise GraphchatError(f"the model's reply did not match the required JSON schema ({site}): {problem}")

    async def complete_with_schema(
        self, messages: list[Message], schema: dict[str, Any], *, site: str, name: str = "output"
    ) -> Completion:
        """One call that asks for a reply of `schema` (as response_format when the model takes
        one). The reply is not parsed nor retried: callers that accept other reply forms, or
        send their own corrections, read `content` themselves."""
        return await self._complete_structured(messages, self._response_format(schema, name), site)

    async def _complete_structured(
        self, history: list[Message], response_format: Any, site: str
    ) -> Completion:
        try:
            return await self.complete(history, response_format=response_format, site=site, stream=False)
        except GraphchatError as exc:
            # Some OpenAI-compatible servers reject json_schema: the instruction alone must do.
            if response_format is not None and "(400)" in exc.message:
                return await self.complete(history, site=site, stream=False)
            raise

    def _response_format(self, schema: dict[str, Any], name: str) -> dict[str, Any] | None:
        litellm = litellm_module()
        try:
            supported = litellm.supports_response_schema(self.config.model)
        except Exception:
            supported = False
        if not supported and not (self.config.api_base and self.config.model.startswith("openai/")):
            return None  # unknown model: rely on the instruction and validation
        return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": False}}


def _cache_tokens(raw: Any) -> dict[str, int]:
    """The cache reads and writes a provider reported (Anthropic's fields, or OpenAI's
    prompt_tokens_details.cached_tokens), the non-zero ones."""

    def get(source: Any, name: str) -> Any:
        return source.get(name) if isinstance(source, dict) else getattr(source, name, None)

    if raw is None:
        return {}
    details = get(raw, "prompt_tokens_details")
    read = get(raw, "cache_read_input_tokens") or (
        get(details, "cached_tokens") if details is not None else 0
    )
    written = get(raw, "cache_creation_input_tokens")
    found = {"cache_read_input_tokens": int(read or 0), "cache_creation_input_tokens": int(written or 0)}
    return {key: value for key, value in found.items() if value}


def _outage(error: GraphchatError) -> bool:
    """Whether a failed call looks like its provider's outage (429, 408, 5xx, no connection, a
    silent model) — the failures a fallback model may answer; a bad request would fail anywhere."""
    marked = getattr(error, "outage", None)
    if marked is not None:
        return bool(marked)
    cause = error.__cause__
    if cause is None:
        return False
    status = getattr(cause, "status_code", None)
    if isinstance(status, int):
        return status in (408, 429) or status >= 500
    import openai

    return isinstance(cause, (openai.APIConnectionError, openai.APITimeoutError))


def _first_text_ends_wait(on_text: Callable[[str], None], events: EventSink) -> Callable[[str], None]:
    """`on_text` that first ends the "thinking" wait (the spinner line goes before text shows)."""
    waiting = [True]

    def forward(text: str) -> None:
        if waiting[0]:
            waiting[0] = False
            events.waiting(None)
        on_text(text)

    return forward


def _from_response(response: Any) -> tuple[str, list[ToolCall], Any, str | None]:
    choice = response.choices[0]
    message = choice.message
    calls = [
        ToolCall(call.id or f"call_{n}", call.function.name or "", call.function.arguments or "{}")
        for n, call in enumerate(getattr(message, "tool_calls", None) or [])
        if call.function is not None and call.function.name
    ]
    return message.content or "", calls, getattr(response, "usage", None), choice.finish_reason


async def _close(response: Any) -> None:
    """Let go of a stream cut short (its connection is released)."""
    closer = getattr(response, "aclose", None)
    if closer is None:
        return
    try:
        await closer()
    except Exception:
        pass


def count_text_tokens(model: str, text: str) -> int:
    """Tokens of an answer's `text` for `model` (litellm's tokenizer; a character estimate if that fails)."""
    try:
        return int(litellm_module().token_counter(model=model, text=text))
    except Exception:
        return len(text) // 4


def count_tokens(model: str, messages: list[Message]) -> int:
    """Tokens of `messages` for `model` (litellm's tokenizer; a character estimate if that fails)."""
    try:
        return int(litellm_module().token_counter(model=model, messages=messages))
    except Exception:
        import orjson

        return len(orjson.dumps(messages, default=str)) // 3 + 4 * len(messages)


def context_window(config: ModelConfig) -> int | None:
    """How many input tokens the model takes: the configured `context_window`, else litellm's info."""
    if config.context_window:
        return config.context_window
    try:
        info = litellm_module().get_model_info(config.model)
    except Exception:  # an unmapped model: unknown window, nothing is trimmed
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if window else None
