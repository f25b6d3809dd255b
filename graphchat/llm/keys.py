"""Which environment variable holds each provider's key, known without importing litellm.

A missing key is found before the model library loads (it takes seconds) and before a plan
runs a step: `check_key` is exit 2 at once, naming the variable. The table is litellm's own
(`validate_environment`), kept small; a test compares it with litellm's answers.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from graphchat.errors import ConfigError
from graphchat.turn_context import turn_environ

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


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expanded(config: ModelConfig, field: str) -> str | None:
    """`config`'s `api_key` or `api_base` with `${VAR}` (and `${VAR:-default}`) replaced from
    the turn's environment, at the call (graph's providers' `${ENV_VAR}`). The value as written
    stays in the configuration: only the request carries it expanded. An unset variable is a
    ConfigError naming it, the key and the file."""
    value = getattr(config, field)
    if not value or "${" not in value:
        return value  # type: ignore[no-any-return]

    environ = turn_environ()

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        if environ.get(name):
            return environ[name]
        if default is not None:
            return default

        path, source = config.written_in or (f"models.{config.role}", "graphchat.yaml")
        raise ConfigError(
            f"environment variable {name} is not set ({path}.{field} in {source})",
            hint=f"export {name}=... or write ${{{name}:-default}}",
        )

    return _VAR.sub(sub, value)


def unset_variables(value: str | None) -> list[str]:
    """The `${VAR}` names (without a `:-default`) in `value` that the environment lacks."""
    if not value or "${" not in value:
        return []
    environ = turn_environ()  # as `expanded` reads them: a warm helper's turn has its own
    return [m.group(1) for m in _VAR.finditer(value) if m.group(2) is None and not environ.get(m.group(1))]


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
    """Exit 2 now (ConfigError) when the model's provider needs a key that is not set, or
    its `api_key`/`api_base` names a `${VAR}` that is not set."""
    for field in ("api_key", "api_base"):
        expanded(config, field)  # an unset `${VAR}`: the one-line error naming it and the file
    variables = missing_key(config)
    if variables is None:
        return

    raise ConfigError(
        f"no API key for {config.model}: set {' or '.join(variables)} (or GRAPHCHAT_API_KEY)",
        hint="or `api_key: ${VAR}` under `models:` in graphchat.yaml",
    )


# --- the model string, read against litellm's files (never its import) ----------------------

_litellm_dir: list[str | None] = []


def _package_dir() -> str | None:
    """litellm's installed folder, found without importing it."""
    if not _litellm_dir:
        import importlib.util

        try:
            spec = importlib.util.find_spec("litellm")
        except (ImportError, ValueError):
            spec = None
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        _litellm_dir.append(locations[0] if locations else None)
    return _litellm_dir[0]


def known_providers() -> list[str]:
    """The provider names litellm takes as a model prefix (its `LlmProviders`), read from its
    source; empty when it cannot be read (then nothing is judged here)."""
    import re

    folder = _package_dir()
    if folder is None:
        return []
    try:
        with open(os.path.join(folder, "types", "utils.py"), encoding="utf-8") as handle:
            source = handle.read()
    except OSError:
        return []
    start = source.find("class LlmProviders(")
    if start < 0:
        return []
    body = source[start:].split("\n\n\n", 1)[0]
    return re.findall(r'^\s+[A-Z0-9_]+\s*=\s*"([^"]+)"', body, re.M)


def known_models() -> list[str]:
    """The model names of litellm's local price list (its `model_cost`), read from its file."""
    folder = _package_dir()
    if folder is None:
        return []
    try:
        import orjson

        with open(os.path.join(folder, "model_prices_and_context_window_backup.json"), "rb") as handle:
            doc = orjson.loads(handle.read())
    except (OSError, ValueError):
        return []
    return [name for name in doc if name != "sample_spec"] if isinstance(doc, dict) else []


def check_model(config: ModelConfig) -> None:
    """Exit 2 now for a model string litellm would not place, when that is certain without
    importing it: an unknown provider prefix, or a bare name that is not in litellm's model
    list but close to names that are (named; nothing is corrected). Anything else is left to
    litellm's own check."""
    import difflib

    model = config.model
    if "/" in model:
        provider = model.split("/", 1)[0]
        providers = known_providers()
        if not providers or provider in providers:
            return
        close = difflib.get_close_matches(provider, providers, n=3, cutoff=0.6)
        rest = model.split("/", 1)[1]
        hint = (
            f"did you mean: {', '.join(f'{c}/{rest}' for c in close)}?"
            if close
            else "the part before `/` names the provider, e.g. openai/gpt-4o-mini"
        )
        raise ConfigError(f"unknown model {model!r}: litellm has no provider {provider!r}", hint=hint)
    if config.api_base or model.startswith("ft:"):
        return
    models = known_models()
    if not models or model in models:
        return
    close = difflib.get_close_matches(model, models, n=3, cutoff=0.6)
    if close:
        raise ConfigError(
            f"unknown model {model!r}: litellm cannot tell which provider serves it",
            hint=f"did you mean: {', '.join(close)}?",
        )
