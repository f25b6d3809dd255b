"""`graphchat config show|path`: the configuration graphchat runs with, and where it is read from."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from graphchat.cli.init import run_init
from graphchat.cli.output import print_json
from graphchat.config_view import config_files, effective_config
from graphchat.workspace import load_settings


def _run_init(args: argparse.Namespace) -> int:
    return run_init(args)


def _settings(args: argparse.Namespace) -> Any:
    return load_settings(getattr(args, "home", None))  # a bad graphchat.yaml is exit 2, as everywhere


def run_show(args: argparse.Namespace) -> int:
    config, files, origins = effective_config(_settings(args))
    if args.json:
        # graph's {config, sources} (config_cmd.rs `show`); `value_sources`: each value's layer
        print_json({"config": config, "sources": files, "value_sources": origins})
        return 0
    if files:
        for path in files:
            print(f"# merged from {path}", file=sys.stderr)
    else:
        print("# no configuration files found — showing defaults (run `graphchat init`)", file=sys.stderr)
    sys.stdout.write(_render(config, origins))
    return 0


def _render(config: dict[str, Any], origins: dict[str, str]) -> str:
    """YAML, each value followed by a comment naming the layer it came from."""
    import json

    lines: list[str] = []

    def scalar(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    def walk(node: Any, path: tuple[str, ...], indent: int) -> None:
        pad = "  " * indent
        for key, value in node.items():
            dotted = ".".join((*path, str(key)))
            if isinstance(value, dict) and value:
                lines.append(f"{pad}{key}:")
                walk(value, (*path, str(key)), indent + 1)
            else:
                origin = origins.get(dotted)
                note = f"  # {origin}" if origin else ""
                lines.append(f"{pad}{key}: {scalar(value)}{note}")

    walk(config, (), 0)
    return "\n".join(lines) + "\n"


def run_path(args: argparse.Namespace) -> int:
    files = [{"path": str(p), "exists": p.is_file()} for p in config_files(_settings(args))]
    if args.json:
        print_json({"files": files, "count": len(files)})  # graph's config_cmd.rs `path`
        return 0
    sys.stdout.write("".join(f"{f['path']}\t{'exists' if f['exists'] else 'missing'}\n" for f in files))
    return 0
