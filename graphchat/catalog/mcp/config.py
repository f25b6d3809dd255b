"""`catalog/servers.yaml`: the MCP servers of a workspace, and `${VAR}` expansion.

The root key is `mcpServers`, the shape every MCP client uses, so a pasted `.mcp.json` works
(JSON is YAML). Keys other MCP clients add (`disabled`, `autoApprove`, …) are tolerated; a key
that looks like a typo of one of ours is an error. Variables are expanded only when a server is
about to start (`ServerConfig.expanded`): a missing token must not break `tools list`, and it
must never reach the server as an empty or literal string.

Pure stdlib + yaml: `tools list` from the cache must not import the MCP SDK.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from graphchat.catalog.base import FAMILIES
from graphchat.errors import ConfigError, GraphchatError
from graphchat.naming import reserved_server_name, valid_server_name
from graphchat.yamlfile import load_yaml_file

SERVERS_FILE = "servers.yaml"
DEFAULT_TIMEOUT_S = 60.0

_OUR_KEYS = (
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "include_tools",
    "exclude_tools",
    "timeout_s",
    "tool_overrides",
    "capabilities",
)
# What graphchat declares to a server beyond tools and elicitation; each can be turned off per server.
CAPABILITIES = ("roots", "sampling")
CAPABILITIES_DECLARED = ("roots", "sampling")  # what this version declares
_OVERRIDE_KEYS = ("description", "output_schema", "output_example", "family")
_HTTP_TYPES = ("http", "streamable-http", "streamable_http", "streamableHttp")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Expanded:
    """A server's connection fields with every `${VAR}` replaced (ready to start)."""

    command: str | None
    args: list[str]
    env: dict[str, str]
    cwd: str | None
    url: str | None
    headers: dict[str, str]


@dataclass(frozen=True)
class ServerConfig:
    """One configured server, as written (variables not yet expanded)."""

    name: str
    transport: str  # stdio | http
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    include_tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()
    timeout_s: float = DEFAULT_TIMEOUT_S
    tool_overrides: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    base_dir: str | None = None  # relative `cwd` is resolved against the workspace
    capabilities: Mapping[str, bool] = field(default_factory=dict)  # `roots: false` turns one off

    def declares(self, capability: str) -> bool:
        """Whether graphchat declares `capability` (roots, sampling) to this server: on unless turned off."""
        return self.capabilities.get(capability, True)

    @property
    def config_hash(self) -> str:
        """Key of the tool-list cache: what decides which tools the server has, as written.

        Unexpanded on purpose: `tools list` must find the cache even when a variable is unset.
        Header values are left out (a rotated token does not change the tools).
        """
        identity = {
            "transport": self.transport,
            "command": self.command,
            "args": list(self.args),
            "env": dict(sorted(self.env.items())),
            "cwd": self.cwd,
            "url": self.url,
            "headers": sorted(self.headers),
        }
        # servers register tools by what the client declares (server-everything's get-roots-list)
        identity["declares"] = [c for c in CAPABILITIES_DECLARED if self.declares(c)]
        blob = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def expanded(self, environ: Mapping[str, str] | None = None) -> Expanded:
        """Fields with `${VAR}` / `${VAR:-default}` expanded; an unset variable is a GraphchatError
        naming the server, the field and the variable."""
        environ = builtin_variables(self.base_dir) | dict(os.environ if environ is None else environ)

        def one(value: str, where: str) -> str:
            return expand(value, environ, server=self.name, field=where)

        cwd = one(self.cwd, "cwd") if self.cwd else None
        if cwd and self.base_dir and not os.path.isabs(cwd):
            cwd = os.path.normpath(os.path.join(self.base_dir, cwd))
        if cwd is None and self.transport == "stdio":
            cwd = self.base_dir  # a stated folder (the workspace), not wherever graphchat was started
        env = {k: one(v, f"env.{k}") for k, v in self.env.items()}
        if self.command and self.command.strip() == "${GRAPHCHAT_PYTHON}":
            # graphchat's own interpreter runs installed modules (`-m mcp_server_time`): the
            # current folder must not shadow them (a user's mcp.py or git.py).
            env.setdefault("PYTHONSAFEPATH", "1")
        return Expanded(
            command=one(self.command, "command") if self.command else None,
            args=[one(a, f"args[{i}]") for i, a in enumerate(self.args)],
            env=env,
            cwd=cwd,
            url=one(self.url, "url") if self.url else None,
            headers={k: one(v, f"headers.{k}") for k, v in self.headers.items()},
        )

    def expanded_to_start(self) -> Expanded:
        """`expanded()`, checked for what would otherwise fail with a misleading message (a
        missing `cwd` makes the process start fail as if the command were not found)."""
        expanded = self.expanded()
        if expanded.cwd is not None and not os.path.isdir(expanded.cwd):
            what = "is not a folder" if os.path.exists(expanded.cwd) else "does not exist"
            raise ConfigError(f"server '{self.name}': cwd {expanded.cwd} {what}")
        return expanded

    def start_problem(self) -> str | None:
        """Why this server cannot start, found without starting it: an unset variable (with
        its field), a missing `cwd`, a command that is not on PATH. None: nothing known."""
        try:
            expanded = self.expanded_to_start()
        except GraphchatError as exc:
            return exc.message.removeprefix(f"MCP server '{self.name}': ").removeprefix(
                f"server '{self.name}': "
            )
        command = expanded.command
        if self.transport != "stdio" or not command:
            return None
        import shutil

        if os.sep in command:
            path = command if os.path.isabs(command) else os.path.join(expanded.cwd or ".", command)
            found = os.path.isfile(path) and os.access(path, os.X_OK)
        else:
            found = (
                shutil.which(command, path=(expanded.env or {}).get("PATH", os.environ.get("PATH")))
                is not None
            )
        return None if found else f"command not found: {command}"

    def wants_tool(self, tool: str) -> bool:
        """include_tools / exclude_tools (names or globs) decide what the catalog shows."""
        from fnmatch import fnmatchcase

        if self.include_tools is not None and not any(fnmatchcase(tool, p) for p in self.include_tools):
            return False
        return not any(fnmatchcase(tool, p) for p in self.exclude_tools)

    @property
    def where(self) -> str:
        return self.url or " ".join([self.command or "", *self.args]).strip()


def builtin_variables(workspace: str | None) -> dict[str, str]:
    """Variables graphchat provides (the environment overrides them): `GRAPHCHAT_PYTHON`, the
    interpreter graphchat runs on (servers installed with graphchat, e.g. `-m mcp_server_time`),
    and `GRAPHCHAT_WORKSPACE`, the workspace folder."""
    import sys

    out = {"GRAPHCHAT_PYTHON": sys.executable}
    if workspace:
        out["GRAPHCHAT_WORKSPACE"] = workspace
    return out


def expand(value: str, environ: Mapping[str, str], *, server: str, field: str) -> str:
    """Replace `${VAR}` and `${VAR:-default}` in one string (`:-` also covers an empty VAR)."""

    def sub(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        current = environ.get(name)
        if current:
            return current
        if default is not None:
            return default
        if current is not None:  # set but empty, no default: still a value the user chose
            return current
        raise GraphchatError(
            f"MCP server '{server}': {field} uses ${{{name}}}, but the environment variable {name} is not set",
            hint=f"export {name}=... or write ${{{name}:-default}} in catalog/servers.yaml",
        )

    return _VAR.sub(sub, value)


# --- loading ----------------------------------------------------------------------------------


class _Problem(Exception):
    def __init__(self, path: tuple[str | int, ...], message: str) -> None:
        self.path = path
        self.message = message


def _str_list(value: Any, path: tuple[str | int, ...], what: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise _Problem(path, f"{what}: expected a list of strings")
    return tuple(str(v) for v in value)


def _str_map(value: Any, path: tuple[str | int, ...], what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _Problem(path, f"{what}: expected a mapping of names to strings")
    out = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise _Problem((*path, k), f"{what}.{k}: expected a string")
        out[str(k)] = str(v)
    return out


def _server(name: Any, body: Any, base_dir: str | None) -> ServerConfig | None:
    path: tuple[str | int, ...] = ("mcpServers", name)
    if not isinstance(name, str) or not valid_server_name(name):
        raise _Problem(path, f"server name {name!r}: use letters, digits and '-' only (no '__')")
    if reserved_server_name(name):
        raise _Problem(
            path,
            f"server name '{name}' is reserved: graphchat's own tools are named {name.lower()}__…; "
            "give this server another name",
        )
    if not isinstance(body, dict):
        raise _Problem(path, f"server '{name}': expected a mapping (command/args or type: http + url)")
    if body.get("disabled") is True:  # other clients' switch: honour it
        return None
    for key in body:
        if key in _OUR_KEYS:
            continue
        close = difflib.get_close_matches(str(key), _OUR_KEYS, n=1, cutoff=0.8)
        if close:
            raise _Problem((*path, key), f"server '{name}': unknown key `{key}` (did you mean `{close[0]}`?)")
    kind = body.get("type")
    if kind is None:
        kind = "http" if "url" in body and "command" not in body else "stdio"
    if kind == "sse":
        raise _Problem(
            (*path, "type"),
            f"server '{name}': type sse (the deprecated HTTP+SSE transport) is not supported; "
            "use the server's streamable HTTP endpoint with type: http",
        )
    if kind in _HTTP_TYPES:
        kind = "http"
    if kind not in ("stdio", "http"):
        raise _Problem((*path, "type"), f"server '{name}': type must be stdio or http, got {kind!r}")
    command = body.get("command")
    url = body.get("url")
    if kind == "stdio":
        if not isinstance(command, str) or not command.strip():
            raise _Problem(path, f"server '{name}': `command` is required for a stdio server")
        if url is not None:
            raise _Problem((*path, "url"), f"server '{name}': `url` is for type: http servers")
    else:
        if not isinstance(url, str) or not url.strip():
            raise _Problem(path, f"server '{name}': `url` is required for type: http")
        if command is not None:
            raise _Problem((*path, "command"), f"server '{name}': `command` is for stdio servers")
    cwd = body.get("cwd")
    if cwd is not None and not isinstance(cwd, str):
        raise _Problem((*path, "cwd"), f"server '{name}': cwd: expected a path")
    include = body.get("include_tools")
    timeout = body.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise _Problem((*path, "timeout_s"), f"server '{name}': timeout_s: expected a positive number")
    overrides_raw = body.get("tool_overrides") or {}
    if not isinstance(overrides_raw, dict):
        raise _Problem((*path, "tool_overrides"), f"server '{name}': tool_overrides: expected a mapping")
    overrides: dict[str, dict[str, Any]] = {}
    for tool, over in overrides_raw.items():
        opath = (*path, "tool_overrides", tool)
        if not isinstance(over, dict):
            raise _Problem(opath, f"server '{name}': tool_overrides.{tool}: expected a mapping")
        for key, value in over.items():
            if key not in _OVERRIDE_KEYS:
                raise _Problem(
                    (*opath, key),
                    f"server '{name}': tool_overrides.{tool}.{key}: unknown key "
                    f"(expected one of: {', '.join(_OVERRIDE_KEYS)})",
                )
            if key == "family" and value not in FAMILIES:
                raise _Problem((*opath, key), f"server '{name}': family must be one of {', '.join(FAMILIES)}")
            if key == "output_schema" and not isinstance(value, dict):
                raise _Problem(
                    (*opath, key), f"server '{name}': output_schema: expected a JSON schema mapping"
                )
        overrides[str(tool)] = dict(over)
    caps_raw = body.get("capabilities") or {}
    if not isinstance(caps_raw, dict):
        raise _Problem((*path, "capabilities"), f"server '{name}': capabilities: expected a mapping")
    for key, value in caps_raw.items():
        if key not in CAPABILITIES or not isinstance(value, bool):
            raise _Problem(
                (*path, "capabilities", key),
                f"server '{name}': capabilities.{key}: expected one of {', '.join(CAPABILITIES)} with true or false",
            )
    return ServerConfig(
        name=name,
        transport=kind,
        command=command.strip() if isinstance(command, str) else None,
        args=_str_list(body.get("args") or [], (*path, "args"), f"server '{name}': args"),
        env=_str_map(body.get("env"), (*path, "env"), f"server '{name}': env"),
        cwd=cwd,
        url=url.strip() if isinstance(url, str) else None,
        headers=_str_map(body.get("headers"), (*path, "headers"), f"server '{name}': headers"),
        include_tools=None
        if include is None
        else _str_list(include, (*path, "include_tools"), f"server '{name}': include_tools"),
        exclude_tools=_str_list(
            body.get("exclude_tools") or [], (*path, "exclude_tools"), f"server '{name}': exclude_tools"
        ),
        timeout_s=float(timeout),
        tool_overrides=overrides,
        base_dir=base_dir,
        capabilities={str(k): bool(v) for k, v in caps_raw.items()},
    )


def parse_servers(
    data: Any, base_dir: str | None = None, skipped: list[_Problem] | None = None
) -> list[ServerConfig]:
    """The servers of a parsed servers.yaml document, in file order.

    A problem of the file as a whole raises _Problem. A problem of one server raises too,
    unless `skipped` is given: then that server is left out and its problem kept there, so
    one unsupported entry of a pasted .mcp.json does not break every command.
    """
    if data is None:
        return []
    if not isinstance(data, dict):
        raise _Problem((), "expected a mapping with the key `mcpServers`")
    if "mcpServers" not in data:
        hint = " (rename `servers` to `mcpServers`)" if "servers" in data else ""
        raise _Problem((), f"expected the key `mcpServers` at the top level{hint}")
    servers = data["mcpServers"]
    if servers is None:
        return []
    if not isinstance(servers, dict):
        raise _Problem(("mcpServers",), "mcpServers: expected a mapping of server name -> settings")
    out = []
    for name, body in servers.items():
        try:
            server = _server(name, body, base_dir)
        except _Problem as problem:
            if skipped is None:
                raise
            skipped.append(problem)
            continue
        if server is not None:
            out.append(server)
    return out


def load_servers(
    catalog_dir: Path, workspace: Path | None = None, warnings: list[str] | None = None
) -> list[ServerConfig]:
    """Servers of `catalog_dir/servers.yaml` (none when the file is absent).

    A bad file is one ConfigError line `<file>:<line>: <problem>`. With `warnings`, a server
    whose entry is bad is skipped instead, and `<file>:<line>: <problem> (skipped)` is added
    there; the other servers work.
    """
    path = catalog_dir / SERVERS_FILE
    if not path.is_file():
        return []
    doc = load_yaml_file(path)
    skipped: list[_Problem] | None = [] if warnings is not None else None
    try:
        servers = parse_servers(doc.data, str(workspace or catalog_dir.parent), skipped)
    except _Problem as problem:
        raise ConfigError(f"{doc.where(problem.path)}: {problem.message}") from None
    for skip in skipped or []:
        assert warnings is not None
        warnings.append(f"{doc.where(skip.path)}: {skip.message}; this server is skipped")
    return servers
