"""Turn a failed model call into one clear line (GraphchatError, exit 1) that says what to fix."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from graphchat.errors import EXIT_FAILURE, EXIT_USAGE, ConfigError, GraphchatError
from graphchat.llm.keys import KEY_VARIABLES, provider_of
from graphchat.llm.runtime import litellm_module

if TYPE_CHECKING:
    from graphchat.workspace import ModelConfig

_PREFIX = re.compile(r"^(?:[\w.]*(?:Error|Exception):\s*)+", re.S)
_PROVIDER = re.compile(r"\w*Exception - ", re.S)
_RETRIED = re.compile(r"\s*LiteLLM Retried: \d+ times?.*$", re.S)
_MAX_MESSAGE = 300


def provider_message(exc: BaseException) -> str:
    """The provider's own words from a litellm error, on one line, without litellm's decorations."""
    text = str(getattr(exc, "message", None) or exc)
    text = _RETRIED.sub("", text)
    parts = _PROVIDER.split(text)
    text = parts[-1] if len(parts) > 1 else _PREFIX.sub("", text)
    text = " ".join(text.split())
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 1] + "…"
    return text or type(exc).__name__


def key_variable(model: str) -> str:
    provider = provider_of(model)
    return KEY_VARIABLES.get(provider, (f"{provider.upper()}_API_KEY",))[0]


def check_configuration(litellm: Any, config: ModelConfig) -> None:
    """Configuration mistakes are exit 2 before anything is sent (they are not outages).

    A model string litellm cannot place with a provider names close matches from litellm's
    model list; a provider whose key is neither configured nor in the environment names the
    variable to set. Nothing here reaches the network.
    """
    model = config.model
    try:
        litellm.get_llm_provider(model=model, api_base=config.api_base)
    except Exception:
        import difflib

        close = difflib.get_close_matches(model, list(getattr(litellm, "model_cost", {}) or {}), n=3)
        hint = (
            f"did you mean: {', '.join(close)}?" if close else "prefix the provider, e.g. openai/gpt-4o-mini"
        )
        raise ConfigError(
            f"unknown model {model!r}: litellm cannot tell which provider serves it", hint=hint
        ) from None
    if config.api_key:
        return
    try:
        report = litellm.validate_environment(model=model, api_base=config.api_base)
    except Exception:  # litellm could not tell: let the provider answer
        return
    missing = [k for k in report.get("missing_keys") or [] if isinstance(k, str)]
    if not report.get("keys_in_environment", True) and missing:
        raise ConfigError(
            f"no API key for {model}: set {' and '.join(missing)} (or GRAPHCHAT_API_KEY)",
            hint="or `api_key: ${VAR}` under `models:` in graphchat.yaml",
        )


def to_graphchat_error(
    exc: BaseException,
    config: ModelConfig,
    *,
    num_retries: int,
    messages: list[dict[str, Any]] | None = None,
    count_tokens: Callable[[list[dict[str, Any]]], int] | None = None,
) -> GraphchatError:
    """One line for a failed call; `messages` lets a context-window error say how long the history was."""
    import openai

    litellm_exceptions = _litellm_exceptions()
    model = config.model
    status = getattr(exc, "status_code", None)
    detail = provider_message(exc)
    if isinstance(exc, openai.AuthenticationError) or status == 401:
        if config.api_key:
            hint = "check the key in GRAPHCHAT_API_KEY or `api_key` under `models:` in graphchat.yaml"
        else:
            hint = f"check {key_variable(model)} (or set GRAPHCHAT_API_KEY)"
        return GraphchatError(
            f"the model provider rejected the API key for {model} (401): {detail}", EXIT_USAGE, hint=hint
        )
    context_error = litellm_exceptions.get("ContextWindowExceededError")
    if (context_error is not None and isinstance(exc, context_error)) or "context_length_exceeded" in str(
        exc
    ):
        size = ""
        if messages is not None:
            approx = None
            if count_tokens is not None:
                try:
                    approx = count_tokens(messages)
                except Exception:
                    approx = None
            plural = "" if len(messages) == 1 else "s"
            size = f": the history was {len(messages)} message{plural}" + (
                f", about {approx:,} tokens" if approx else ""
            )
        return GraphchatError(
            f"the conversation does not fit {model}'s context window{size}",
            hint="start a new thread (leave out --thread), or set `context_window` for the model in graphchat.yaml",
        )
    if isinstance(exc, openai.NotFoundError) or status == 404:
        return GraphchatError(
            f"model {model} was not found by the provider (404): {detail}",
            hint="check the model name (GRAPHCHAT_MODEL, --model or graphchat.yaml)",
        )
    if isinstance(exc, openai.RateLimitError) or status == 429:
        return GraphchatError(
            f"rate limited by the provider of {model} (429) after {num_retries} retries: {detail}"
        )
    if isinstance(exc, openai.APIConnectionError) or "Connection error" in detail:
        base = config.api_base or "the provider"
        return GraphchatError(
            f"cannot reach the model {model} at {base} after {num_retries} retries: {detail}",
            hint="check GRAPHCHAT_API_BASE / `api_base` and that the server is running",
        )
    if isinstance(exc, openai.BadRequestError) or status == 400:
        return GraphchatError(f"the provider rejected the request to {model} (400): {detail}")
    if status:
        return GraphchatError(
            f"model call to {model} failed ({status}) after {num_retries} retries: {detail}"
        )
    return GraphchatError(f"model call to {model} failed: {type(exc).__name__}: {detail}", EXIT_FAILURE)


def _litellm_exceptions() -> dict[str, type]:
    module = litellm_module().exceptions
    return {name: getattr(module, name) for name in ("ContextWindowExceededError",) if hasattr(module, name)}
