"""`graphchat init --from-graph`: a graph project's configuration as a graphchat workspace.

graph keeps a project in `.graph/` (`config.toml`, `plans/`, `tools/`) over a global layer,
`~/.config/graph/config.toml`. Both are read (TOML, the standard library's tomllib; later
wins, tables merge) and translated into `graphchat.yaml` and `catalog/servers.yaml`, each
value with a comment naming the line it came from. graph's plans and tools are read where
they are through `plans.paths` / `tools.paths`: nothing under `.graph/` is copied or changed.
What has no equivalent is listed (`Translation.dropped`), never dropped silently.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphchat.errors import ConfigError
from graphchat.workspace import ALWAYS_ON_PACKS, TOOL_PACKS

PROJECT_CONFIG = Path(".graph") / "config.toml"
# graph's provider types -> litellm's provider prefix (openai_compat: an OpenAI-compatible api_base)
PROVIDER_PREFIX = {"anthropic": "anthropic", "openai": "openai", "openai_compat": "openai"}
# The variable litellm reads itself for a provider: `${VAR}` of that name needs no api_key line.
PROVIDER_KEY_VARIABLE = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
GRAPH_ROLES = ("default", "chat", "planner", "solver", "repair", "judge")  # graphchat has each
SETTINGS_CARRIED = ("max_agent_iterations", "planning_attempts")
SERVER_KEYS = ("command", "args", "env", "url", "headers", "include_tools", "exclude_tools", "tool_overrides")


def global_config_path(environ: dict[str, str] | None = None) -> Path:
    """graph's global layer: `~/.config/graph/config.toml` on every platform (load.rs)."""
    home = (environ or os.environ).get("HOME") or os.path.expanduser("~")
    return Path(home) / ".config" / "graph" / "config.toml"


@dataclass
class Translation:
    """What `init --from-graph` writes, and what it carried and did not (one line each)."""

    config: list[str] = field(default_factory=list)  # graphchat.yaml lines
    servers: list[str] = field(default_factory=list)  # catalog/servers.yaml lines
    carried: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)


class _Lines:
    """Where a dotted key is written in each TOML file read (`file:line`), for the comments."""

    def __init__(self) -> None:
        self.files: list[tuple[str, list[str]]] = []

    def add(self, label: str, text: str) -> None:
        self.files.append((label, text.splitlines()))

    def where(self, *path: str) -> str:
        """The last file (the layer that wins) naming `path`: its table header `[a.b]`, or the
        key inside its parent table (`b = ` under `[a]`, or `a.b` quoted)."""
        for label, lines in reversed(self.files):
            line = _find(lines, path)
            if line:
                return f"{label}:{line}"
        return self.files[-1][0] if self.files else ""


def _find(lines: list[str], path: tuple[str, ...]) -> int | None:
    def header(parts: tuple[str, ...]) -> re.Pattern[str]:
        dotted = r"\s*\.\s*".join(rf'(?:"{re.escape(p)}"|{re.escape(p)})' for p in parts)
        return re.compile(rf"^\s*\[\s*{dotted}\s*\]\s*(#.*)?$")

    exact = header(path)
    for number, line in enumerate(lines, 1):
        if exact.match(line):
            return number
    for cut in range(len(path) - 1, 0, -1):
        table, key = header(path[:cut]), path[cut]
        inside = False
        for number, line in enumerate(lines, 1):
            if re.match(r"^\s*\[", line):
                inside = bool(table.match(line))
                continue
            if inside and re.match(rf'^\s*(?:"{re.escape(key)}"|{re.escape(key)})\s*=', line):
                return number
    return None


def read_graph_config(project: Path, environ: dict[str, str] | None = None) -> tuple[dict[str, Any], _Lines]:
    """graph's layers merged (the global one, then the project's): tables merge, values replace."""
    lines = _Lines()
    merged: dict[str, Any] = {}
    found = False
    for path, label in (
        (global_config_path(environ), str(global_config_path(environ))),
        (project / PROJECT_CONFIG, str(PROJECT_CONFIG)),
    ):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        lines.add(label, text)
        _merge(merged, data)
        found = found or path == project / PROJECT_CONFIG
    if not found:
        raise ConfigError(
            f"{project / PROJECT_CONFIG}: no graph project here (no .graph/config.toml)",
            hint="run it in the folder holding .graph/, or name it: graphchat init --from-graph DIR",
        )
    return merged, lines


def _merge(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def _scalar(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def translate(project: Path, environ: dict[str, str] | None = None) -> Translation:
    """graph's configuration of `project` as graphchat's two files (see the module doc)."""
    data, lines = read_graph_config(project, environ)
    out = Translation(sources=[Path(label) for label, _ in lines.files])
    providers = data.get("providers") or {}
    cfg = out.config
    cfg.append("# Written by `graphchat init --from-graph` from graph's configuration; each value")
    cfg.append("# names the line it came from. graph's own files are read in place, never changed.")

    def entry(choice: Any, path: tuple[str, ...]) -> dict[str, Any] | None:
        """A graph model choice ({provider, model, temperature, description, fallbacks}) as a
        graphchat model entry; None (and a `dropped` line) when its provider cannot be carried."""
        dotted = ".".join(path)
        if not isinstance(choice, dict) or not isinstance(choice.get("model"), str):
            out.dropped.append(f"{dotted}: not a model entry ({lines.where(*path)})")
            return None
        name = choice.get("provider")
        provider = providers.get(name) if isinstance(name, str) else None
        if not isinstance(provider, dict):
            out.dropped.append(f"{dotted}: provider {name!r} is not under [providers] ({lines.where(*path)})")
            return None
        kind = provider.get("type")
        if kind not in PROVIDER_PREFIX:
            out.dropped.append(
                f"{dotted}: provider type {kind!r} has no litellm route here ({lines.where(*path)})"
            )
            return None
        result: dict[str, Any] = {"model": f"{PROVIDER_PREFIX[kind]}/{choice['model']}"}
        if provider.get("base_url"):
            result["api_base"] = provider["base_url"]
        key = provider.get("api_key")
        if isinstance(key, str) and key:
            variable = re.fullmatch(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", key)
            if variable is None or variable.group(1) != PROVIDER_KEY_VARIABLE.get(kind):
                result["api_key"] = key  # `${VAR}` is expanded at each call, as graph does
        for option in ("temperature", "description"):
            if option in choice:
                result[option] = choice[option]
        if choice.get("dimensions") is not None:
            out.dropped.append(
                f"{dotted}.dimensions: graphchat has no embedding models ({lines.where(*path)})"
            )
        fallbacks = []
        for index, fallback in enumerate(choice.get("fallbacks") or []):
            carried = entry(fallback, (*path, "fallbacks", str(index)))
            if carried is not None:
                fallbacks.append(carried)
        if fallbacks:
            result["fallbacks"] = fallbacks
        return result

    models = data.get("models") or {}
    model_lines: list[str] = []
    for role, choice in models.items():
        if role == "named":
            continue
        if role not in GRAPH_ROLES:
            out.dropped.append(f"models.{role}: graphchat has no {role} role ({lines.where('models', role)})")
            continue
        carried = entry(choice, ("models", role))
        if carried is not None:
            model_lines.append(f"  {role}: {_scalar(carried)}  # {lines.where('models', role)}")
            out.carried.append(f"models.{role}: {carried['model']}")
    named = models.get("named") or {}
    named_lines = []
    for name, choice in named.items():
        carried = entry(choice, ("models", "named", name))
        if carried is not None:
            named_lines.append(f"    {name}: {_scalar(carried)}  # {lines.where('models', 'named', name)}")
            out.carried.append(f"models.named.{name}: {carried['model']}")
    if model_lines or named_lines:
        cfg.append("models:")
        cfg += model_lines
        if named_lines:
            cfg.append("  named:")
            cfg += named_lines

    settings = data.get("settings") or {}
    setting_lines = []
    for key, value in settings.items():
        if key in SETTINGS_CARRIED:
            setting_lines.append(f"  {key}: {_scalar(value)}  # {lines.where('settings', key)}")
            out.carried.append(f"settings.{key}")
        else:
            out.dropped.append(f"settings.{key}: no graphchat equivalent ({lines.where('settings', key)})")
    if setting_lines:
        cfg.append("settings:")
        cfg += setting_lines

    pricing = data.get("pricing") or {}
    if pricing:
        cfg.append("pricing:  # USD per million tokens")
        for model, prices in pricing.items():
            cfg.append(f"  {_scalar(model)}: {_scalar(prices)}  # {lines.where('pricing', model)}")
            out.carried.append(f"pricing.{model}")

    prompts = data.get("prompts") or {}
    if isinstance(prompts.get("chat"), str):
        cfg.append("prompts:")
        cfg.append(f"  chat: |-  # {lines.where('prompts', 'chat')}")
        cfg += [f"    {line}".rstrip() for line in prompts["chat"].strip("\n").splitlines()]
        out.carried.append("prompts.chat")
    for key in prompts:
        if key != "chat":
            reason = "it names workbench tools graph no longer has" if key == "workbench" else "no equivalent"
            out.dropped.append(f"prompts.{key}: not carried, {reason} ({lines.where('prompts', key)})")

    user = data.get("user") or {}
    if user:
        cfg.append("user:")
        for key, value in user.items():
            cfg.append(f"  {key}: {_scalar(str(value))}  # {lines.where('user', key)}")
        out.carried.append("user")

    tools = data.get("tools") or {}

    packs = [p for p in tools.get("packs") or [] if p in TOOL_PACKS + ALWAYS_ON_PACKS]
    for pack in tools.get("packs") or []:
        if pack not in packs:
            out.dropped.append(
                f"tools.packs: pack {pack!r} is not built into graphchat ({lines.where('tools', 'packs')})"
            )
    cfg.append("tools:")
    if packs:
        cfg.append(f"  packs: {_scalar(packs)}  # {lines.where('tools', 'packs')}")
        out.carried.append(f"tools.packs: {', '.join(packs)}")
    tool_paths = _paths(tools.get("paths"), ".graph/tools", "tools", environ)
    cfg.append(f"  paths: {_scalar(tool_paths)}  # graph's tools, read in place")
    out.carried.append(f"tools.paths: {', '.join(tool_paths)}")
    plan_paths = ["plans", *_paths((data.get("plans") or {}).get("paths"), ".graph/plans", "plans", environ)]
    cfg.append("plans:")
    cfg.append(f"  paths: {_scalar(plan_paths)}  # new plans go to plans/; graph's are read in place")
    out.carried.append(f"plans.paths: {', '.join(plan_paths)}")

    for section in ("storage", "workbench"):
        if section in data:
            why = "set GRAPHCHAT_STORAGE instead" if section == "storage" else "no equivalent"
            out.dropped.append(f"[{section}]: not carried, {why} ({lines.where(section)})")
    for section in data:
        if section not in (
            "providers", "models", "settings", "pricing", "prompts", "user", "tools", "plans", "mcp",
            "storage", "workbench",
        ):  # fmt: skip
            out.dropped.append(f"[{section}]: unknown to graphchat ({lines.where(section)})")

    servers = data.get("mcp") or {}
    out.servers.append("# MCP servers carried by `graphchat init --from-graph` from graph's [mcp.*].")
    out.servers.append("mcpServers:")
    if not servers:
        out.servers[-1] = "mcpServers: {}"
    for name, server in servers.items():
        body = {k: v for k, v in server.items() if k in SERVER_KEYS} if isinstance(server, dict) else {}
        if "url" in body:
            body = {"type": "http", **body}
        out.servers.append(f"  {name}: {_scalar(body)}  # {lines.where('mcp', name)}")
        out.carried.append(f"mcp.{name}")
        for key in server if isinstance(server, dict) else ():
            if key not in SERVER_KEYS:
                out.dropped.append(f"mcp.{name}.{key}: no graphchat equivalent ({lines.where('mcp', name)})")
    return out


def _paths(value: Any, default: str, kind: str, environ: dict[str, str] | None) -> list[str]:
    """graph's [plans]/[tools] `paths` (default: the project's folder and the global one, kept when
    it exists), as graphchat paths: relative to the project, `~` kept."""
    global_folder = f"~/.config/graph/{kind}"
    paths = [str(p) for p in value] if isinstance(value, list) else [default, global_folder]
    home = (environ or os.environ).get("HOME") or os.path.expanduser("~")
    kept = []
    for path in paths:
        path = path.removeprefix("./")
        if path.startswith("~/") and not (Path(home) / path[2:]).is_dir() and path == global_folder:
            continue  # graph's default global folder, absent: nothing to read
        kept.append(path)
    return kept
