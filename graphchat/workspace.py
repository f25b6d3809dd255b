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

CONFIG_NAME = "graphchat.yaml"
ROLES = ("default", "chat", "solver", "judge", "planner", "sampling")
APPROVAL_MODES = ("ask", "auto", "deny")
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
TOOLS_KEYS = ("packs", "github_api_url")
NO_MODEL_HINT = "set GRAPHCHAT_MODEL (e.g. GRAPHCHAT_MODEL=openai/gpt-4o-mini) or `models: {default: ...}` in graphchat.yaml"


def user_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "graphchat"


def is_workspace(path: Path) -> bool:
    """A folder holding graphchat.yaml, or any of the folders a workspace keeps."""
    return (path / CONFIG_NAME).is_file() or any(
        (path / sub).is_dir() for sub in ("catalog", "plans", "threads")
    )


def find_workspace(home: str | os.PathLike[str] | None = None) -> Path:
    """The workspace folder (see module doc). Never fails; creates the per-user folder if used."""
    from graphchat.fsutil import set_workspace

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
    vision: bool | None = None  # whether it accepts images (None: litellm's supports_vision says)
    # per-answer limits: the role's own, else settings.model_timeout / settings.max_output_tokens
    model_timeout: float | None = None
    max_output_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    role: str = "default"


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

    def _limited(self, config: ModelConfig) -> ModelConfig:
        """`config` with the per-answer limits of the settings where its role sets none."""
        if config.model_timeout is not None and config.max_output_tokens is not None:
            return config
        return ModelConfig(
            **{
                **config.__dict__,
                "model_timeout": config.model_timeout or self.model_timeout,
                "max_output_tokens": config.max_output_tokens or self.max_output_tokens,
            }
        )


# --- loading ---------------------------------------------------------------------------------


class _Problem(Exception):
    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        self.path = path
        self.message = message


def _model_config(role: str, value: Any) -> ModelConfig:
    if isinstance(value, str) and value.strip():
        return ModelConfig(model=value.strip(), role=role)
    if not isinstance(value, dict):
        raise _Problem(("models", role), f"models.{role}: expected a model string or a mapping with `model`")
    known = {f for f in ModelConfig.__dataclass_fields__ if f not in ("extra", "role")}
    model = value.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _Problem(("models", role), f"models.{role}: `model` is required (a litellm model string)")
    kwargs: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for key, item in value.items():
        if key in known:
            if key in ("temperature", "input_cost_per_token", "output_cost_per_token") and not isinstance(
                item, (int, float)
            ):
                raise _Problem(("models", role, key), f"models.{role}.{key}: expected a number")
            if key == "vision" and not isinstance(item, bool):
                raise _Problem(("models", role, key), f"models.{role}.{key}: expected true or false")
            if key in ("context_window", "max_output_tokens") and (
                not isinstance(item, int) or isinstance(item, bool) or item <= 0
            ):
                raise _Problem(("models", role, key), f"models.{role}.{key}: expected a positive integer")
            if key == "model_timeout":
                item = _duration(item, ("models", role, key))
            kwargs[key] = item
        else:
            extra[key] = item
    return ModelConfig(**kwargs, extra=extra, role=role)


def _parse_config(data: Any) -> dict[str, Any]:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise _Problem((), "expected a mapping at the top level")
    allowed = {"models", "settings", "approvals", "tools", "user"}
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
        if role not in ROLES:
            guess = did_you_mean(str(role), ROLES)
            raise _Problem(
                ("models", role),
                f"models.{role}: unknown role ({guess + ' ' if guess else ''}roles: {', '.join(ROLES)})",
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
    return out


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
    return {"packs": tuple(dict.fromkeys(p for p in packs if p in TOOL_PACKS)), "github_api_url": url}


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


def default_warm(environ: Mapping[str, str]) -> str:
    """settings.warm when graphchat.yaml does not say: `auto`, or `manual` under
    GRAPHCHAT_WARM=manual (scripts and test suites that start no helper unless told to)."""
    return "manual" if environ.get("GRAPHCHAT_WARM", "").strip().lower() == "manual" else "auto"


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
    from graphchat.fsutil import set_workspace

    set_workspace(workspace)  # a failed write names its path relative to it
    config_path = workspace / CONFIG_NAME
    parsed: dict[str, Any] = {"models": {}}
    raw: dict[str, Any] = {}
    doc: Any = None
    if config_path.is_file():
        from graphchat.yamlfile import load_yaml_file

        doc = load_yaml_file(config_path)
        try:
            parsed = _parse_config(doc.data)
        except _Problem as problem:
            raise ConfigError(f"{doc.where(problem.path)}: {problem.message}") from None
        raw = doc.data or {}
    else:
        config_path = None  # type: ignore[assignment]
    models = _env_default_model(parsed["models"], environ)
    return Settings(
        workspace=workspace,
        config_path=config_path,
        models=models,
        max_agent_iterations=parsed.get("max_agent_iterations", 15),
        max_tool_result_chars=parsed.get("max_tool_result_chars", 20000),
        system_prompt=_system_prompt(parsed, workspace, doc),
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
    )
