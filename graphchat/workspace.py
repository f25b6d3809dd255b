"""Find the workspace and load graphchat.yaml + environment + flags into one Settings.

The workspace is, in order: --home DIR, $GRAPHCHAT_HOME, the nearest folder at or above the
current one holding graphchat.yaml, else the per-user data folder (created on first use).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphchat.errors import ConfigError, did_you_mean
from graphchat.fsutil import set_workspace
from graphchat.yamlfile import load_yaml_file

CONFIG_NAME = "graphchat.yaml"
ROLES = ("default", "chat", "solver", "judge", "planner", "sampling", "repair")
NAMED_KEY = "named"  # models.named.<name>: graph's [models.named.<name>]
APPROVAL_MODES = ("ask", "auto", "deny")
KEEP_RUNS_DAYS = 7  # settings.keep_runs: days an ended run is kept (graphchat.runs.retention)
SETTINGS_KEYS = (
    "max_agent_iterations",
    "max_tool_result_chars",
    "planning_attempts",
    "system_prompt",
    "system_prompt_file",
    "max_thread_result_chars",
    "max_tools_offered",
    "warm",
    "warm_idle",
    "mcp_roots",
    "max_model_calls",
    "max_cost_usd",
    "model_timeout",
    "max_output_tokens",
    "max_map_items",
    "max_run_seconds",
    "prompt_caching",
    "keep_runs",
)
# Budgets a turn or a run cannot pass (graphchat.llm.budget; docs/cli.md#budgets): settings
# that are seconds, and settings that `off` (or null) turns off.
DURATION_SETTINGS = ("warm_idle", "model_timeout", "max_run_seconds")
OFF_SETTINGS = ("max_cost_usd", "max_run_seconds")
WARM_MODES = ("manual", "auto", "off")  # settings.warm (graphchat.warm)
WARM_IDLE_DEFAULT = 900  # seconds a warm helper waits for a question before it leaves
TEXT_SETTINGS = ("system_prompt", "system_prompt_file")
# Builtin tool packs enabled with `tools: {packs: [...]}` (graph's names; `github` also brings the
# git tools, as graph's github pack does). `data` and `llm` are always on and may be listed.
TOOL_PACKS = ("git", "github", "slack")
ALWAYS_ON_PACKS = ("data", "llm")
TOOLS_KEYS = ("packs", "github_api_url", "paths")
NO_MODEL_HINT = "set GRAPHCHAT_MODEL (e.g. GRAPHCHAT_MODEL=openai/gpt-4o-mini) or `models: {default: ...}` in graphchat.yaml"


def user_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "graphchat"


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user's configuration layer, read under the workspace's graphchat.yaml:
    `$XDG_CONFIG_HOME/graphchat/config.yaml` (default ~/.config/graphchat/config.yaml)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "graphchat" / "config.yaml"


def merge_layers(base: Mapping[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    """`layer` over `base` as graph merges its layers: mappings key by key, a list or a value
    replaced whole — except `approvals.deny`, combined (a deny is never dropped by a layer above)."""
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_layers(out[key], value)
        else:
            out[key] = value
    deny_below = (
        (base.get("approvals") or {}).get("deny") if isinstance(base.get("approvals"), Mapping) else None
    )
    deny_above = (
        (layer.get("approvals") or {}).get("deny") if isinstance(layer.get("approvals"), Mapping) else None
    )
    if isinstance(deny_below, list) and isinstance(deny_above, list):
        out["approvals"] = {**out["approvals"], "deny": list(dict.fromkeys([*deny_below, *deny_above]))}
    return out


def is_workspace(path: Path) -> bool:
    """A folder holding graphchat.yaml, or any of the folders a workspace keeps."""
    return (path / CONFIG_NAME).is_file() or any(
        (path / sub).is_dir() for sub in ("catalog", "plans", "threads")
    )


def find_workspace(home: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder (see module doc). Never fails; creates the per-user folder if used."""
    root = _find_workspace(home)
    set_workspace(root)  # a failed write names its path relative to it
    return root


def _find_workspace(home: str | os.PathLike[str] | None) -> Path:
    if home:
        path = Path(home).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"--home {home}: not a directory")
        if not is_workspace(path):
            raise ConfigError(
                f"--home {home}: not a graphchat workspace (no {CONFIG_NAME}, catalog/, plans/ or threads/)",
                hint=f"create one with `graphchat init {home}`",
            )
        return path.resolve()
    env_home = os.environ.get("GRAPHCHAT_HOME")
    if env_home:  # held to the rule of --home: a folder that is no workspace is an error
        path = Path(env_home).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigError(f"GRAPHCHAT_HOME={env_home}: not a directory")
        if not is_workspace(path):
            raise ConfigError(
                f"GRAPHCHAT_HOME={env_home}: not a graphchat workspace (no {CONFIG_NAME}, catalog/, plans/ or threads/)",
                hint=f"create one with `graphchat init {env_home}`, or unset GRAPHCHAT_HOME",
            )
        return path.resolve()
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_NAME).is_file():
            return folder
    path = user_data_dir()
    path.mkdir(parents=True, exist_ok=True)
    return path


@dataclass(frozen=True)
class ModelConfig:
    """One model role: a litellm model string plus call options."""

    model: str
    api_base: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    context_window: int | None = None
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    # prompt-cache prices (litellm's names); unset: the input price x 0.1 (read), x 1.25 (write)
    cache_read_input_token_cost: float | None = None
    cache_creation_input_token_cost: float | None = None
    vision: bool | None = None  # whether it accepts images (None: litellm's supports_vision says)
    # per-answer limits: the role's own, else settings.model_timeout / settings.max_output_tokens
    model_timeout: float | None = None
    max_output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    role: str = "default"
    # graph's `fallbacks`: tried in order when this model's provider fails (graphchat.llm.client)
    fallbacks: tuple[ModelConfig, ...] = ()
    description: str | None = None  # a named model's description (graph's routing hint)
    # cache_control markers (system prompt, conversation tail): None where litellm says the
    # provider caches (Anthropic, Bedrock, …), true always (a gateway in front of one), false never
    prompt_caching: bool | None = None
    repair: ModelConfig | None = None  # the `repair` role's model: the one pass fixing a structured reply
    # where the entry is written, (its dotted path, the file): what a `${VAR}` error names
    written_in: tuple[str, str] | None = None


@dataclass(frozen=True)
class Approvals:
    mode: str = "ask"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()


@dataclass
class Settings:
    workspace: Path
    config_path: Path | None
    models: dict[str, ModelConfig]
    max_agent_iterations: int = 15
    max_tool_result_chars: int = 20000
    system_prompt: str | None = None  # standing instructions for ask and chat (settings.system_prompt[_file])
    planning_attempts: int = 2  # replans of a plan_and_execute run after execution errors
    user: dict[str, str] = field(default_factory=dict)  # `user:` — who the planner works for
    # A tool result longer than this is cut, with a note, in the thread (issue 10 point 14).
    max_thread_result_chars: int = 1_000_000
    # At most this many tools are offered to the model on a request, the most relevant first.
    max_tools_offered: int = 128
    approvals: Approvals = field(default_factory=Approvals)
    model_override: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)
    packs: tuple[str, ...] = ()  # enabled builtin tool packs (TOOL_PACKS)
    github_api_url: str | None = None  # tools.github_api_url (GitHub Enterprise)
    warm: str = "auto"  # settings.warm: auto (the first ask starts a helper; the default), manual (`graphchat warm`), off
    warm_idle: int = WARM_IDLE_DEFAULT  # settings.warm_idle, in seconds
    # settings.mcp_roots: the folders MCP servers are told they may work in (replaces the
    # default: the workspace and the current folder); relative paths are the workspace's.
    mcp_roots: tuple[str, ...] | None = None
    # Budgets (graphchat.llm.budget): per turn or plan run, per answer, per map step.
    max_model_calls: int = 1000
    max_cost_usd: float | None = None  # off unless set; counts only calls whose price is known
    model_timeout: float = 120.0  # seconds without a byte from the model end the call
    max_output_tokens: int = 100_000  # of one answer
    max_map_items: int = 100_000
    max_run_seconds: float | None = None  # wall clock of a turn or run; off unless set
    keep_runs: int = KEEP_RUNS_DAYS  # days an ended run's record and journal are kept
    named: dict[str, ModelConfig] = field(default_factory=dict)  # models.named
    prompt_caching: bool = True  # settings.prompt_caching: cache_control where the provider takes it
    # plans.paths / tools.paths: more folders read beside the workspace's plans/ and tools/
    plan_paths: tuple[Path, ...] = ()
    tool_paths: tuple[Path, ...] = ()
    prompts: dict[str, str] = field(default_factory=dict)  # prompts.<name>: replaces a built-in prompt
    layers: tuple[Path, ...] = ()  # the configuration files read, user's first

    @property
    def catalog_dir(self) -> Path:
        return self.workspace / "catalog"

    @property
    def plans_dir(self) -> Path:
        return self.workspace / "plans"

    @property
    def threads_dir(self) -> Path:
        return self.workspace / "threads"

    def has_model(self, role: str = "chat") -> bool:
        return self.model_override is not None or role in self.models or "default" in self.models

    def model_for(self, role: str = "chat", override: str | None = None) -> ModelConfig:
        """The model of a role (falling back to default); --model overrides the command's role.

        Raises ConfigError (exit 2) naming what to set when no model is configured.
        """
        base = self.models.get(role) or self.models.get("default")
        name = override or self.model_override
        if name and name in self.named:
            return self._limited(self.named[name])
        if name:
            if base is None:
                base = ModelConfig(model=name, role=role)
            else:
                base = ModelConfig(**{**base.__dict__, "model": name, "role": role})
            return self._limited(base)
        if base is None:
            where = self.config_path or self.workspace / CONFIG_NAME
            hint = NO_MODEL_HINT if self.config_path else NO_MODEL_HINT + "; `graphchat init` writes one"
            raise ConfigError(f"no model configured for role '{role}' (workspace config: {where})", hint=hint)
        return self._limited(base if base.role == role else ModelConfig(**{**base.__dict__, "role": role}))

    def step_model(self, name: str | None, role: str, *, where: str = "") -> ModelConfig:
        """The model a step, tool or gate names with `model:` — a role, a named model
        (models.named) or a litellm model string (`provider/model`) — else `role`'s. An unknown
        bare name is a ConfigError naming `where` and the names known (never a silent default)."""
        if not name:
            return self.model_for(role)
        if name in ROLES:
            return self.model_for(name)
        problem = self.model_name_problem(name)
        if problem:
            raise ConfigError(
                f"{where}: {problem}" if where else problem,
                hint="name a role, a model of `models.named` in graphchat.yaml, or a litellm `provider/model`",
            )
        return self.model_for(role, override=name)

    def model_name_problem(self, name: str) -> str | None:
        """Why `name` is no model here (a role, a named model or a `provider/model`), else None."""
        if name in ROLES or name in self.named or "/" in name:
            return None
        guess = did_you_mean(name, [*ROLES, *self.named])
        named = ", ".join(self.named) or "none"
        return (
            f"unknown model '{name}' ({guess + ' ' if guess else ''}named models: {named}; "
            f"roles: {', '.join(ROLES)})"
        )

    def _limited(self, config: ModelConfig) -> ModelConfig:
        """`config` with the per-answer limits of the settings where its role sets none, the
        settings' prompt_caching, and the `repair` role's model for its one repair pass."""
        repair = self.models.get("repair")
        return ModelConfig(
            **{
                **config.__dict__,
                "model_timeout": config.model_timeout or self.model_timeout,
                "max_output_tokens": config.max_output_tokens or self.max_output_tokens,
                "fallbacks": tuple(self._limited(f) for f in config.fallbacks),
                "prompt_caching": config.prompt_caching if self.prompt_caching else False,
                "repair": self._limited(repair) if repair is not None and config.role != "repair" else None,
            }
        )


# --- loading ---------------------------------------------------------------------------------


class _Problem(Exception):
    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        self.path = path
        self.message = message


def _model_config(role: str, value: Any, path: tuple[str | int, ...] | None = None) -> ModelConfig:
    """One model entry: a litellm model string, or a mapping with `model` and call options
    (`fallbacks`: more entries, tried in order on provider errors). `role` is the role or the
    named model's name; `path` where the entry is in graphchat.yaml (default models.<role>)."""
    path = path or ("models", role)
    dotted = ".".join(str(p) for p in path)
    if isinstance(value, str) and value.strip():
        return ModelConfig(model=value.strip(), role=role)
    if not isinstance(value, dict):
        raise _Problem(path, f"{dotted}: expected a model string or a mapping with `model`")
    known = {
        f for f in ModelConfig.__dataclass_fields__ if f not in ("extra", "role", "repair", "written_in")
    }
    model = value.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _Problem(path, f"{dotted}: `model` is required (a litellm model string)")
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in value.items():
        if key == "fallbacks":
            if not isinstance(item, list) or not item:
                raise _Problem((*path, key), f"{dotted}.fallbacks: expected a list of model entries")
            kwargs[key] = tuple(
                _model_config(role, entry, (*path, key, index)) for index, entry in enumerate(item)
            )
            continue
        if key == "description":
            if not isinstance(item, str):
                raise _Problem((*path, key), f"{dotted}.description: expected text")
            kwargs[key] = item
            continue
        if key in known:
            if key in (
                "temperature",
                "input_cost_per_token",
                "output_cost_per_token",
                "cache_read_input_token_cost",
                "cache_creation_input_token_cost",
            ) and not isinstance(item, (int, float)):
                raise _Problem((*path, key), f"{dotted}.{key}: expected a number")
            if key in ("vision", "prompt_caching") and not isinstance(item, bool):
                raise _Problem((*path, key), f"{dotted}.{key}: expected true or false")
            if key in ("context_window", "max_output_tokens") and (
                not isinstance(item, int) or isinstance(item, bool) or item <= 0
            ):
                raise _Problem((*path, key), f"{dotted}.{key}: expected a positive integer")
            if key == "model_timeout":
                item = _duration(item, (*path, key))  # type: ignore[arg-type]
            kwargs[key] = item
        else:
            extra[key] = item
    return ModelConfig(**kwargs, extra=extra, role=role)


def _named_models(value: Any) -> dict[str, ModelConfig]:
    """`models.named`: name -> entry (graph's [models.named.<name>]); a name may not be a role's."""
    if not isinstance(value, dict):
        raise _Problem(("models", NAMED_KEY), "models.named: expected a mapping of name -> model entry")
    named: dict[str, ModelConfig] = {}
    for name, entry in value.items():
        if str(name) in ROLES:
            raise _Problem(
                ("models", NAMED_KEY, name), f"models.named.{name}: a named model may not take a role's name"
            )
        named[str(name)] = _model_config(str(name), entry, ("models", NAMED_KEY, str(name)))
    return named


def _parse_config(data: Any) -> dict[str, Any]:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _Problem((), "expected a mapping at the top level")
    allowed = {"models", "settings", "approvals", "tools", "user", "plans", "pricing", "prompts"}
    for key in data:
        if key not in allowed:
            guess = did_you_mean(str(key), allowed)
            raise _Problem(
                (key,),
                f"unknown key `{key}` ({guess + ' ' if guess else ''}expected one of: {', '.join(sorted(allowed))})",
            )
    out: dict[str, Any] = {"models": {}}
    models = data.get("models") or {}
    if not isinstance(models, dict):
        raise _Problem(("models",), "models: expected a mapping of role -> model")
    for role, value in models.items():
        if role == NAMED_KEY:
            out["named"] = _named_models(value)
            continue
        if role not in ROLES:
            guess = did_you_mean(str(role), ROLES)
            raise _Problem(
                ("models", role),
                f"models.{role}: unknown role ({guess + ' ' if guess else ''}roles: {', '.join(ROLES)}; "
                "named models go under models.named)",
            )
        out["models"][role] = _model_config(role, value)
    user = data.get("user") or {}
    if not isinstance(user, dict) or not all(isinstance(v, (str, int, float)) for v in user.values()):
        raise _Problem(("user",), "user: expected a mapping of free-text fields (name, role, preferences)")
    out["user"] = {str(k): str(v) for k, v in user.items()}
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise _Problem(("settings",), "settings: expected a mapping")
    for key, value in settings.items():
        if key not in SETTINGS_KEYS:
            guess = did_you_mean(str(key), SETTINGS_KEYS)
            guess = f"{guess} " if guess else ""
            raise _Problem(
                ("settings", key),
                f"settings.{key}: unknown setting ({guess}settings are: {', '.join(SETTINGS_KEYS)})",
            )
        if key == "prompt_caching":
            if not isinstance(value, bool):
                raise _Problem(
                    ("settings", key), f"settings.prompt_caching: expected true or false, got {value!r}"
                )
            out[key] = value
            continue
        if key == "warm":
            if value not in WARM_MODES:
                raise _Problem(
                    ("settings", key),
                    f"settings.warm: expected one of {', '.join(WARM_MODES)}, got {value!r}",
                )
            out[key] = value
            continue
        if key in OFF_SETTINGS and (value is None or value == "off"):
            out[key] = None
            continue
        if key in DURATION_SETTINGS:
            out[key] = _duration(value, ("settings", key))
            continue
        if key == "max_cost_usd":
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise _Problem(
                    ("settings", key),
                    f"settings.{key}: expected a positive number of dollars or off, got {value!r}",
                )
            out[key] = float(value)
            continue
        if key == "mcp_roots":
            if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
                raise _Problem(("settings", key), "settings.mcp_roots: expected a list of folders")
            out[key] = tuple(value)
            continue
        if key in TEXT_SETTINGS:
            if not isinstance(value, str) or not value.strip():
                raise _Problem(("settings", key), f"settings.{key}: expected a non-empty string")
            out[key] = value
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _Problem(("settings", key), f"settings.{key}: expected a positive integer, got {value!r}")
        out[key] = value
    if "system_prompt" in out and "system_prompt_file" in out:
        raise _Problem(
            ("settings", "system_prompt_file"), "settings: give system_prompt or system_prompt_file, not both"
        )
    approvals = data.get("approvals") or {}
    if not isinstance(approvals, dict):
        raise _Problem(("approvals",), "approvals: expected a mapping")
    mode = approvals.get("mode", "ask")
    if mode not in APPROVAL_MODES:
        raise _Problem(("approvals", "mode"), f"approvals.mode: expected one of {', '.join(APPROVAL_MODES)}")
    lists = {}
    for key in ("allow", "deny"):
        value = approvals.get(key) or []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _Problem(("approvals", key), f"approvals.{key}: expected a list of tool names or globs")
        lists[key] = tuple(value)
    for key in approvals:
        if key not in ("mode", "allow", "deny"):
            raise _Problem(("approvals", key), f"approvals.{key}: unknown key")
    out["approvals"] = Approvals(mode=mode, **lists)
    out.update(_parse_tools(data.get("tools")))
    out["plan_paths"] = _paths(data.get("plans"), "plans")
    out["pricing"] = _pricing(data.get("pricing"))
    out["prompts"] = _prompts(data.get("prompts"))
    return out


def _paths(section: Any, name: str) -> tuple[str, ...]:
    """`plans: {paths: [...]}` (graph's [plans].paths): folders read beside the workspace's own."""
    if section is None:
        return ()
    if not isinstance(section, dict) or set(section) - {"paths"}:
        raise _Problem((name,), f"{name}: expected a mapping with `paths` (a list of folders)")
    return _path_list(section.get("paths"), (name, "paths"))


def _path_list(value: Any, path: tuple[str, ...]) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise _Problem(path, f"{'.'.join(path)}: expected a list of folders")
    return tuple(value)


PRICE_KEYS = ("input", "output", "cache_write", "cache_read")  # USD per million tokens (graph's)


def _pricing(section: Any) -> dict[str, dict[str, float]]:
    """`pricing: {<model>: {input, output, cache_write?, cache_read?}}` in USD per million tokens,
    keyed by the model string as written (with or without its `provider/`)."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise _Problem(("pricing",), "pricing: expected a mapping of model -> {input, output}")
    out: dict[str, dict[str, float]] = {}
    for model, prices in section.items():
        where = ("pricing", str(model))
        if not isinstance(prices, dict):
            raise _Problem(where, f"pricing.{model}: expected a mapping with input and output")
        for key, value in prices.items():
            if key not in PRICE_KEYS:
                guess = did_you_mean(str(key), PRICE_KEYS)
                raise _Problem(
                    (*where, key),
                    f"pricing.{model}.{key}: unknown key ({guess + ' ' if guess else ''}"
                    f"expected: {', '.join(PRICE_KEYS)})",
                )
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise _Problem((*where, key), f"pricing.{model}.{key}: expected USD per million tokens")
        out[str(model)] = {k: float(v) for k, v in prices.items()}
    return out


# prompts.<key> replaces that built-in system prompt wholesale: graph's [prompts] (chat,
# workbench), and graphchat's own for a plan's solver, its judge (decide, infer gates) and the
# planner (plan draft, plan_and_execute)
PROMPT_KEYS = ("chat", "workbench", "solver", "judge", "planner")


def builtin_prompt(settings: Any, name: str, default: str) -> str:
    """The system prompt `name`: `prompts.<name>` of the configuration when set, else `default`
    (the built-in text). `settings` may be None (a run with no workspace)."""
    prompts = getattr(settings, "prompts", None) or {}
    return str(prompts.get(name) or default)


def _prompts(section: Any) -> dict[str, str]:
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise _Problem(("prompts",), "prompts: expected a mapping of prompt name -> text")
    for key, value in section.items():
        if key not in PROMPT_KEYS:
            guess = did_you_mean(str(key), PROMPT_KEYS)
            raise _Problem(
                ("prompts", key),
                f"prompts.{key}: unknown prompt ({guess + ' ' if guess else ''}prompts: {', '.join(PROMPT_KEYS)})",
            )
        if not isinstance(value, str) or not value.strip():
            raise _Problem(("prompts", key), f"prompts.{key}: expected a non-empty text")
    return {str(k): str(v) for k, v in section.items()}


def priced(config: ModelConfig, pricing: Mapping[str, Mapping[str, float]]) -> ModelConfig:
    """`config` with the prices of `pricing` (per million tokens) where it sets none itself;
    its fallbacks too."""
    import dataclasses

    fallbacks = tuple(priced(f, pricing) for f in config.fallbacks)
    bare = config.model.split("/", 1)[-1]
    prices = pricing.get(config.model) or pricing.get(bare)
    changes: dict[str, Any] = {"fallbacks": fallbacks}
    if prices and config.input_cost_per_token is None and config.output_cost_per_token is None:
        changes["input_cost_per_token"] = prices.get("input", 0.0) / 1e6
        changes["output_cost_per_token"] = prices.get("output", 0.0) / 1e6
        if "cache_read" in prices:
            changes["cache_read_input_token_cost"] = prices["cache_read"] / 1e6
        if "cache_write" in prices:
            changes["cache_creation_input_token_cost"] = prices["cache_write"] / 1e6
    return dataclasses.replace(config, **changes)


def _duration(value: Any, path: tuple[str, ...] = ("settings", "warm_idle")) -> Any:
    """A duration setting (warm_idle, model_timeout, max_run_seconds): seconds (900, 0.5) or a
    duration (`90s`, `15m`, `2h`); warm_idle takes whole seconds."""
    import re

    whole = path[-1] == "warm_idle"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, float) and not whole and value > 0:
        return value
    match = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", str(value)) if isinstance(value, str) else None
    if match is None or int(match.group(1)) < 1:
        off = " or off" if path[-1] in OFF_SETTINGS else ""
        raise _Problem(
            path,
            f"{'.'.join(path)}: expected seconds or a duration like 15m{off}, got {value!r}",
        )
    return int(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[match.group(2)]


def _parse_tools(tools: Any) -> dict[str, Any]:
    """`tools: {packs: [git, github], github_api_url: URL}`; an unknown pack lists the packs."""
    if tools is None:
        return {}
    if not isinstance(tools, dict):
        raise _Problem(("tools",), "tools: expected a mapping (e.g. `tools: {packs: [git]}`)")
    for key in tools:
        if key not in TOOLS_KEYS:
            raise _Problem(
                ("tools", key), f"tools.{key}: unknown key (expected one of: {', '.join(TOOLS_KEYS)})"
            )
    packs = tools.get("packs") or []
    if not isinstance(packs, list) or not all(isinstance(p, str) for p in packs):
        raise _Problem(("tools", "packs"), "tools.packs: expected a list of pack names")
    for index, pack in enumerate(packs):
        if pack not in TOOL_PACKS + ALWAYS_ON_PACKS:
            raise _Problem(
                ("tools", "packs", index),
                f"tools.packs: unknown tool pack '{pack}' (available: {', '.join(TOOL_PACKS + ALWAYS_ON_PACKS)})",
            )
    url = tools.get("github_api_url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise _Problem(("tools", "github_api_url"), "tools.github_api_url: expected an http(s) URL")
    return {
        "packs": tuple(dict.fromkeys(p for p in packs if p in TOOL_PACKS)),
        "github_api_url": url,
        "tool_paths": _path_list(tools.get("paths"), ("tools", "paths")),
    }


def _env_default_model(
    models: dict[str, ModelConfig], environ: Mapping[str, str] | None = None
) -> dict[str, ModelConfig]:
    env = os.environ if environ is None else environ
    env_model = env.get("GRAPHCHAT_MODEL")
    env_base = env.get("GRAPHCHAT_API_BASE")
    env_key = env.get("GRAPHCHAT_API_KEY")
    if not (env_model or env_base or env_key):
        return models
    current = models.get("default")
    if current is None and not env_model:
        return models
    fields = dict(current.__dict__) if current else {"model": env_model, "role": "default"}
    if env_model:
        fields["model"] = env_model
    if env_base:
        fields["api_base"] = env_base
    if env_key:
        fields["api_key"] = env_key
    return {**models, "default": ModelConfig(**fields)}


def _system_prompt(parsed: dict[str, Any], workspace: Path, doc: Any) -> str | None:
    """`settings.system_prompt`, or the text of `settings.system_prompt_file` (relative to the
    workspace); an unreadable file is a config error naming it and the line that names it."""
    if parsed.get("system_prompt"):
        return str(parsed["system_prompt"])
    name = parsed.get("system_prompt_file")
    if not name:
        return None
    path = Path(os.path.expanduser(name))
    if not path.is_absolute():
        path = workspace / path
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        where = doc.where(("settings", "system_prompt_file")) if doc is not None else CONFIG_NAME
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{where}: settings.system_prompt_file: cannot read {path}: {why}") from None


def written_in(
    config: ModelConfig, path: tuple[str | int, ...], layers: list[tuple[Path, Any]]
) -> ModelConfig:
    """`config` (the entry at `path`) and its fallbacks marked with the file that writes them
    (the last layer holding the entry), which a `${VAR}` error names."""
    import dataclasses

    source = next((str(file) for file, layer in reversed(layers) if _holds(layer.data, path)), CONFIG_NAME)
    fallbacks = tuple(
        written_in(f, (*path, "fallbacks", index), layers) for index, f in enumerate(config.fallbacks)
    )
    where = (".".join(str(p) for p in path), source)
    return dataclasses.replace(config, fallbacks=fallbacks, written_in=where)


def _holds(data: Any, path: tuple[str | int, ...]) -> bool:
    for key in path:
        if isinstance(data, dict) and key in data:
            data = data[key]
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return False
    return True


def default_warm(environ: Mapping[str, str]) -> str:
    """settings.warm when graphchat.yaml does not say: `auto`, or `manual` under
    GRAPHCHAT_WARM=manual (scripts and test suites that start no helper unless told to)."""
    return "manual" if environ.get("GRAPHCHAT_WARM", "").strip().lower() == "manual" else "auto"


# plans.paths: a workspace's plans folder -> the further folders read after it (registered by
# load_settings; plans/discovery.py reads it wherever that plans folder is searched).
_more_plan_folders: dict[Path, tuple[Path, ...]] = {}


def more_plan_folders(plans_dir: Path) -> tuple[Path, ...]:
    """The folders of `plans.paths` read after `plans_dir` (none when no settings named it)."""
    return _more_plan_folders.get(plans_dir, ())


def load_settings(
    home: str | os.PathLike[str] | None = None,
    model_override: str | None = None,
    *,
    workspace: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Settings of the workspace: graphchat.yaml, then environment, then flags. `workspace`:
    a folder already found (a warm helper's), used as it is; `environ`: the asking process's
    environment when it is not this one's (a warm helper's request)."""
    workspace = workspace if workspace is not None else find_workspace(home)

    set_workspace(workspace)  # a failed write names its path relative to it
    config_path = workspace / CONFIG_NAME
    parsed: dict[str, Any] = {"models": {}}
    raw: dict[str, Any] = {}
    doc: Any = None
    layers: list[tuple[Path, Any]] = []  # (file, its document), the user's first

    for path in (user_config_path(environ), config_path):
        if not path.is_file():
            continue
        layer = load_yaml_file(path)
        try:
            _parse_config(layer.data)  # each layer is checked alone, so an error names its file
        except _Problem as problem:
            raise ConfigError(f"{layer.where(problem.path)}: {problem.message}") from None
        layers.append((path, layer))
        raw = merge_layers(raw, layer.data or {})
    if layers:
        doc = layers[-1][1]
        try:
            parsed = _parse_config(raw)
        except _Problem as problem:
            raise ConfigError(f"{doc.where(problem.path)}: {problem.message}") from None
    if not config_path.is_file():
        config_path = None  # type: ignore[assignment]

    def folders(section: str, key: str) -> tuple[Path, ...]:
        """The layer's folders, relative ones from its own folder (the workspace's, the user's)."""
        for path, layer in reversed(layers):
            data = layer.data if isinstance(layer.data, dict) else {}
            if isinstance(data.get(section), dict) and key in data[section]:
                root = workspace if path == workspace / CONFIG_NAME else path.parent
                return tuple(
                    (root / Path(p).expanduser()).resolve() for p in parsed.get(f"{section[:-1]}_paths", ())
                )
        return ()

    pricing = parsed.get("pricing", {})
    parsed["models"] = {
        role: written_in(priced(config, pricing), ("models", role), layers)
        for role, config in parsed["models"].items()
    }
    named = {
        name: written_in(priced(config, pricing), ("models", NAMED_KEY, name), layers)
        for name, config in parsed.get("named", {}).items()
    }
    prompts = parsed.get("prompts", {})
    models = _env_default_model(parsed["models"], environ)
    _more_plan_folders[workspace / "plans"] = tuple(
        f for f in folders("plans", "paths") if f != workspace / "plans"
    )
    return Settings(
        workspace=workspace,
        config_path=config_path,
        models=models,
        max_agent_iterations=parsed.get("max_agent_iterations", 15),
        max_tool_result_chars=parsed.get("max_tool_result_chars", 20000),
        system_prompt=prompts.get("chat") or _system_prompt(parsed, workspace, doc),
        planning_attempts=parsed.get("planning_attempts", 2),
        user=parsed.get("user", {}),
        max_thread_result_chars=parsed.get("max_thread_result_chars", 1_000_000),
        max_tools_offered=parsed.get("max_tools_offered", 128),
        approvals=parsed.get("approvals", Approvals()),
        model_override=model_override,
        raw=raw,
        packs=parsed.get("packs", ()),
        github_api_url=parsed.get("github_api_url"),
        warm=parsed.get("warm", default_warm(os.environ if environ is None else environ)),
        warm_idle=parsed.get("warm_idle", WARM_IDLE_DEFAULT),
        mcp_roots=parsed.get("mcp_roots"),
        max_model_calls=parsed.get("max_model_calls", 1000),
        max_cost_usd=parsed.get("max_cost_usd"),
        model_timeout=float(parsed.get("model_timeout", 120.0)),
        max_output_tokens=parsed.get("max_output_tokens", 100_000),
        max_map_items=parsed.get("max_map_items", 100_000),
        max_run_seconds=parsed.get("max_run_seconds"),
        keep_runs=parsed.get("keep_runs", KEEP_RUNS_DAYS),
        named=named,
        prompt_caching=parsed.get("prompt_caching", True),
        plan_paths=folders("plans", "paths"),
        tool_paths=folders("tools", "paths"),
        prompts=prompts,
        layers=tuple(path for path, _ in layers),
    )
