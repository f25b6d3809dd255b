"""`graphchat init [DIR]` writes a starter workspace; `graphchat where` says which one is in use,
and how its models are reached (API base, whether each needed key is set)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from graphchat.catalog.mcp.config import load_servers
from graphchat.cli.models import key_status, provider_of
from graphchat.cli.output import print_json
from graphchat.errors import GraphchatError
from graphchat.fsutil import write_atomic
from graphchat.graph_import import translate
from graphchat.llm.keys import unset_variables
from graphchat.workspace import ROLES, load_settings

CONFIG = """\
# graphchat workspace settings. Every key is optional; the comments show the defaults.
#
# A model: set GRAPHCHAT_MODEL (and GRAPHCHAT_API_BASE / GRAPHCHAT_API_KEY), or uncomment
# `models:`. Any litellm model string works; roles fall back to `default`.
# models:
#   default: openai/gpt-4o-mini            # needs OPENAI_API_KEY
#   solver: {model: anthropic/claude-sonnet-4-5, temperature: 0.2}
#   planner: {model: ollama_chat/qwen2.5, api_base: "http://127.0.0.1:11434"}
settings:
  max_agent_iterations: 15      # model rounds a turn may take
  max_tool_result_chars: 20000  # a longer tool result is cut for the model (the thread keeps it)
  max_thread_result_chars: 1000000  # …and the thread keeps a result up to this, cut with a note
  max_tools_offered: 128        # tools offered to the model a request (most relevant first)
approvals:
  mode: ask                     # ask | auto | deny: what happens to tools that are not read-only
  allow: ["time__*"]            # globs over tool names (or server/tool) that never ask
  deny: []                      # globs that are always refused (deny wins)
"""

SERVERS = """\
# MCP servers of this workspace: the `mcpServers` shape every MCP client uses, so a pasted
# .mcp.json works too. Tools are named <server>__<tool>. Servers start only when needed.
mcpServers:
  time:                         # installed with graphchat: the current time in any timezone
    command: "${GRAPHCHAT_PYTHON}"
    args: [-m, mcp_server_time, --local-timezone, "${GRAPHCHAT_TIMEZONE:-UTC}"]
  # files:                      # any stdio server: a command and its arguments
  #   command: npx
  #   args: [-y, "@modelcontextprotocol/server-filesystem", "${GRAPHCHAT_WORKSPACE}"]
  # search:                     # or a remote one over streamable HTTP
  #   type: http
  #   url: https://example.test/mcp
  #   headers: {Authorization: "Bearer ${SEARCH_TOKEN}"}
"""

PLAN = """\
# A first plan: no model needed. Run it with
#   graphchat plan run clocks
#   graphchat plan run clocks --input 'zones=["Europe/Paris","Asia/Tokyo"]'
identifier: clocks
name: Clocks
description: The current time in a few timezones, as JSON.
input_schema:
  type: object
  properties:
    zones:
      type: array
      items: {type: string}
      description: IANA timezone names
      default: [Europe/London, America/New_York, Asia/Tokyo]
steps:
  - id: times
    tool_name: map
    input:
      over: "{{input.zones}}"
      do:
        tool_name: time__get_current_time
        input: {timezone: "{{item}}"}
output:
  times: "{{times.results}}"
"""

FILES = {
    "graphchat.yaml": CONFIG,
    "catalog/servers.yaml": SERVERS,
    "plans/clocks.yaml": PLAN,
}


def run_init(args: argparse.Namespace) -> int:
    root = Path(args.dir).expanduser()
    if root.exists() and not root.is_dir():
        raise GraphchatError(f"{args.dir}: not a directory", 2)
    if getattr(args, "from_graph", False):
        return _init_from_graph(root, force=args.force)
    existing = [name for name in FILES if (root / name).exists()]
    if existing and not args.force:
        raise GraphchatError(
            f"{root / existing[0]} exists; nothing was written",
            hint="use --force to overwrite " + ", ".join(existing),
        )
    for sub in ("catalog", "plans", "threads"):
        (root / sub).mkdir(parents=True, exist_ok=True)

    for name, text in FILES.items():
        write_atomic(root / name, text.encode())
    where = root.resolve()
    sys.stdout.write(f"{where}\n")
    sys.stderr.write(
        f"wrote {', '.join(FILES)} in {where}\n"
        "next: set a model (GRAPHCHAT_MODEL=openai/gpt-4o-mini and OPENAI_API_KEY, or `models:` in "
        "graphchat.yaml), then\n"
        '  graphchat ask "what time is it in Tokyo?"\n'
        "  graphchat plan run clocks\n"
    )
    return 0


def _init_from_graph(root: Path, *, force: bool) -> int:
    """`init --from-graph`: graphchat.yaml and catalog/servers.yaml from graph's configuration
    (graphchat.graph_import); the same files again is a no-op, different ones need --force."""
    result = translate(root)
    files = {
        "graphchat.yaml": "\n".join(result.config) + "\n",
        "catalog/servers.yaml": "\n".join(result.servers) + "\n",
    }
    differing = [
        name for name, text in files.items() if (root / name).exists() and (root / name).read_text() != text
    ]
    if differing and not force:
        raise GraphchatError(
            f"{root / differing[0]} exists and differs; nothing was written",
            hint="use --force to rewrite " + ", ".join(differing),
        )
    written = [name for name, text in files.items() if not (root / name).exists() or name in differing]
    for sub in ("catalog", "plans", "threads"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    for name in written:
        write_atomic(root / name, files[name].encode())
    where = root.resolve()
    sys.stdout.write(f"{where}\n")
    err = sys.stderr
    err.write(f"read {', '.join(str(p) for p in result.sources)}\n")
    err.write(
        f"wrote {', '.join(written)}\n" if written else "nothing to write: the workspace is up to date\n"
    )
    for line in result.carried:
        err.write(f"carried: {line}\n")
    for line in result.dropped:
        err.write(f"not carried: {line}\n")
    return 0


def where_report(settings: Any) -> dict[str, Any]:
    """What `where` prints: workspace, config file, model per role, servers, counts."""
    models: dict[str, str | None] = {}
    access: dict[str, dict[str, Any]] = {}
    for role in ROLES:
        try:
            config = settings.model_for(role) if settings.has_model(role) else None
        except Exception:
            config = None
        models[role] = config.model if config is not None else None
        if config is not None:
            access[role] = model_access(config)
    servers: list[str] = []
    server_error = None
    try:
        servers = [s.name for s in load_servers(settings.catalog_dir, settings.workspace, warnings=[])]
    except Exception as exc:  # a broken servers.yaml is reported, not fatal here
        server_error = str(getattr(exc, "message", exc))
    plans_dir = settings.plans_dir
    return {
        "workspace": str(settings.workspace),
        "config": str(settings.config_path) if settings.config_path else None,
        "models": models,
        "access": access,
        "servers": servers,
        "servers_error": server_error,
        "plans": len(list(plans_dir.glob("*.yaml"))) + len(list(plans_dir.glob("*.yml")))
        if plans_dir.is_dir()
        else 0,
        "threads_dir": str(settings.threads_dir),
    }


def model_access(config: Any) -> dict[str, Any]:
    """How a role's model is reached: its provider, the API base, and whether the key (or
    other variables) its provider needs is set, as litellm would decide (litellm not imported)."""
    import os

    provider = provider_of(config.model)
    unset = unset_variables(config.api_key)  # `api_key: ${VAR}` with VAR not set
    status = key_status(provider, api_key=config.api_key, api_base=config.api_base)
    base, base_variable = config.api_base, None
    if base is None:  # litellm's convention: <PROVIDER>_API_BASE in the environment
        variable = f"{provider.upper()}_API_BASE"
        if os.environ.get(variable):
            base, base_variable = os.environ[variable], variable
    return {
        "provider": provider,
        "api_base": base,
        "api_base_from": base_variable,
        "api_key_configured": config.api_key is not None,
        "key_set": (config.api_key is not None and not unset) or (config.api_key is None and status.ok),
        "keys_set": list(status.set),
        "keys_missing": unset if config.api_key is not None else list(status.missing),
        "keys_needed": status.needed,
    }


def _access_text(access: dict[str, Any]) -> str:
    import os

    base = access["api_base"] or "the provider's default"
    if access.get("api_base_from"):
        base += f" (from {access['api_base_from']})"
    if access["api_key_configured"] and access["keys_missing"]:
        key = f"{' and '.join(access['keys_missing'])} not set (named by api_key)"
    elif access["api_key_configured"]:
        key = "set (api_key, or GRAPHCHAT_API_KEY)"
    elif access["keys_missing"]:
        key = f"{' and '.join(access['keys_missing'])} not set"
    elif access["keys_set"]:
        key = f"{', '.join(access['keys_set'])} set"
    elif not access["keys_needed"]:
        conventional = f"{access['provider'].upper()}_API_KEY"
        key = (
            f"{conventional} set"
            if os.environ.get(conventional)
            else f"none checked by litellm for {access['provider']}"
        )
    else:
        key = "none needed"
    return f"api base: {base} · key: {key}"


def run_where(args: argparse.Namespace) -> int:
    settings = load_settings(getattr(args, "home", None))
    report = where_report(settings)
    if args.json:
        print_json(report)
        return 0
    lines = [
        f"workspace  {report['workspace']}",
        f"config     {report['config'] or '(none: graphchat init writes one)'}",
    ]
    default = report["models"].get("default")
    access = report["access"]
    lines.append(f"model      {default or '(none configured)'}")
    if "default" in access:
        lines.append(f"           {_access_text(access['default'])}")
    for role, model in report["models"].items():
        if role != "default" and model and (model != default or access[role] != access.get("default")):
            lines.append(f"  {role:<8} {model}")
            lines.append(f"           {_access_text(access[role])}")
    if report["servers_error"]:
        lines.append(f"servers    (catalog/servers.yaml: {report['servers_error']})")
    else:
        lines.append(f"servers    {', '.join(report['servers']) or '(none)'}")
    lines.append(f"plans      {report['plans']}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
