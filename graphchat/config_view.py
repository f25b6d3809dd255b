"""The merged configuration as `config show` prints it: every layer graphchat reads, later layers
over earlier ones (a mapping merges key by key, a list or a value is replaced whole), secrets
masked, and the layer each value came from.

The layers, in order: the defaults, the user's `$XDG_CONFIG_HOME/graphchat/config.yaml`, the
workspace's `graphchat.yaml` (its `approvals.deny` combined with the user's), its `catalog/servers.yaml`
(under `mcpServers`, the shape that file is written in), and the environment variables that set
the default model (`GRAPHCHAT_MODEL`, `GRAPHCHAT_API_BASE`, `GRAPHCHAT_API_KEY`)."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graphchat.workspace import CONFIG_NAME, WARM_IDLE_DEFAULT, Settings, user_config_path
from graphchat.yamlfile import load_yaml_file

DEFAULTS_SOURCE = "(default)"
MASK = "********"
# A key whose literal value is a secret; a value that reads `${VAR}` names a variable, not a secret.
_SECRET_KEY = re.compile(r"api[_-]?key|token|secret|password|passwd|authorization|credential|cookie", re.I)
_ENV_MODEL = (
    ("GRAPHCHAT_MODEL", "model"),
    ("GRAPHCHAT_API_BASE", "api_base"),
    ("GRAPHCHAT_API_KEY", "api_key"),
)


def _defaults() -> dict[str, Any]:
    return {
        "settings": {
            "max_agent_iterations": 15,
            "max_tool_result_chars": 20000,
            "max_thread_result_chars": 1_000_000,
            "max_tools_offered": 128,
            "planning_attempts": 2,
            "warm": "manual",
            "warm_idle": WARM_IDLE_DEFAULT,
        },
        "approvals": {"mode": "ask", "allow": [], "deny": []},
    }


def config_files(settings: Settings) -> list[Path]:
    """The files graphchat reads its configuration from, in the order they are layered."""
    return [user_config_path(), settings.workspace / CONFIG_NAME, settings.catalog_dir / "servers.yaml"]


def _leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    if isinstance(value, Mapping) and value:
        return [leaf for key, sub in value.items() for leaf in _leaves(sub, (*path, str(key)))]
    return [path]


def _merge(base: dict[str, Any], layer: Mapping[str, Any], source: str, origins: dict[str, str]) -> None:
    for key, value in layer.items():
        key = str(key)
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            sub_origins: dict[str, str] = {}
            _merge(base[key], value, source, sub_origins)
            origins.update({f"{key}.{k}": v for k, v in sub_origins.items()})
            continue
        for dotted in [k for k in origins if k == key or k.startswith(key + ".")]:
            del origins[dotted]  # replaced whole
        base[key] = copy.deepcopy(value) if isinstance(value, (Mapping, list)) else value
        for leaf in _leaves(value):
            origins[".".join((key, *leaf))] = source


def _mask(value: Any, key: str = "") -> Any:
    if isinstance(value, Mapping):
        return {k: _mask(v, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(v, key) for v in value]
    if isinstance(value, str) and value and _SECRET_KEY.search(key) and "${" not in value:
        return MASK
    return value


def effective_config(
    settings: Settings, environ: Mapping[str, str] | None = None
) -> tuple[dict[str, Any], list[str], dict[str, str]]:
    """(the merged configuration with secrets masked, the files read, dotted key -> its source)."""
    env = os.environ if environ is None else environ
    config: dict[str, Any] = {}
    origins: dict[str, str] = {}
    _merge(config, _defaults(), DEFAULTS_SOURCE, origins)
    files: list[str] = []
    user_path, yaml_path, servers_path = config_files(settings)
    denied: list[Any] = []
    for path in (user_path, yaml_path):
        if not path.is_file():
            continue
        data = load_yaml_file(path).data
        if isinstance(data, Mapping):
            _merge(config, data, str(path), origins)
            deny = (
                (data.get("approvals") or {}).get("deny")
                if isinstance(data.get("approvals"), Mapping)
                else None
            )
            if isinstance(deny, list):
                denied += [d for d in deny if d not in denied]
                config["approvals"]["deny"] = list(denied)  # combined across layers, never dropped
        files.append(str(path))
    if servers_path.is_file():
        data = load_yaml_file(servers_path).data
        if isinstance(data, Mapping):
            servers = data.get("mcpServers", data.get("servers", data))
            if isinstance(servers, Mapping):
                _merge(config, {"mcpServers": servers}, str(servers_path), origins)
        files.append(str(servers_path))
    for variable, field in _ENV_MODEL:
        value = env.get(variable)
        if not value:
            continue
        models = config.setdefault("models", {})
        current = models.get("default")
        if field == "model" and not isinstance(current, dict):
            _merge(config, {"models": {"default": value}}, f"environment: {variable}", origins)
        else:
            if not isinstance(current, dict):
                if current is None and field != "model" and not env.get("GRAPHCHAT_MODEL"):
                    continue  # as the loader: a base or key alone sets no model
                _merge(
                    config,
                    {"models": {"default": {"model": current}}},
                    origins.get("models.default", ""),
                    origins,
                )
            _merge(config, {"models": {"default": {field: value}}}, f"environment: {variable}", origins)
    return _mask(config), files, dict(sorted(origins.items()))
