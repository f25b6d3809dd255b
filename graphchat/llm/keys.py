"""Which environment variable holds each provider's key, known without importing litellm.

A missing key is found before the model library loads (it takes seconds) and before a plan
runs a step: `check_key` is exit 2 at once, naming the variable. The table is litellm's own
(`validate_environment`), kept small; a test compares it with litellm's answers.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphchat.workspace import ModelConfig

# provider -> the variables litellm reads for its key (any one of them will do)
KEY_VARIABLES: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "openrouter": ("OPENROUTER_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "deepinfra": ("DEEPINFRA_API_KEY",),
    "nvidia_nim": ("NVIDIA_NIM_API_KEY",),
    "codestral": ("CODESTRAL_API_KEY",),
}


def provider_of(model: str) -> str:
    """The provider litellm routes `model` to, from its prefix (`anthropic/…`), else from its
    name (`claude-…`, `gemini-…`; anything else unprefixed is OpenAI's)."""
    if "/" in model:
        return model.split("/", 1)[0]
    lowered = model.lower()
    if lowered.startswith("claude"):
        return "anthropic"
    if lowered.startswith("gemini"):
        return "gemini"
    return "openai"


def missing_key(config: ModelConfig) -> tuple[str, ...] | None:
    """The variables one of which must be set for `config`'s provider, when none is and the
    configuration gives no key; None when a key is there or the provider is not in the table."""
    if config.api_key:
        return None
    variables = KEY_VARIABLES.get(provider_of(config.model))
    if not variables or any(os.environ.get(v) for v in variables):
        return None
    return variables


def check_key(config: ModelConfig) -> None:
    """Exit 2 now (ConfigError) when the model's provider needs a key that is not set."""
    variables = missing_key(config)
    if variables is None:
        return
    from graphchat.errors import ConfigError

    raise ConfigError(
        f"no API key for {config.model}: set {' or '.join(variables)} (or GRAPHCHAT_API_KEY)",
        hint="or `api_key: ${VAR}` under `models:` in graphchat.yaml",
    )
