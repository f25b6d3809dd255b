"""`graphchat config`: its arguments (its code: `cli/config.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "config",
        help="show the merged configuration or the files it is read from",
        description="The configuration as graphchat merges it: defaults, the user's "
        "$XDG_CONFIG_HOME/graphchat/config.yaml, graphchat.yaml, catalog/servers.yaml, the environment.",
    )
    commands = parser.add_subparsers(dest="config_command", metavar="SUBCOMMAND")
    p = commands.add_parser("show", help="the merged configuration, secrets masked, each value's source")
    p.add_argument(
        "--json", action="store_true", help="print graph's {config, sources} (with value_sources beside)"
    )
    p.set_defaults(func=Command("graphchat.cli.config:run_show"))
    p = commands.add_parser(
        "init", help="create a workspace (the same as `graphchat init`; --from-graph carries a graph project)"
    )
    p.add_argument("dir", nargs="?", default=".", metavar="DIR", help="the workspace folder (default: .)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    p.add_argument("--from-graph", action="store_true", help="DIR is a graph project (.graph/config.toml)")
    p.set_defaults(func=Command("graphchat.cli.config:_run_init"))
    p = commands.add_parser("path", help="the configuration files, and whether each exists")
    p.add_argument("--json", action="store_true", help="print graph's {files: [{path, exists}], count}")
    p.set_defaults(func=Command("graphchat.cli.config:run_path"))
