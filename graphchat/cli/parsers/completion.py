"""`graphchat completion`: its arguments (its code: `cli/completion.py`, imported when a command runs)."""

from __future__ import annotations

import argparse

from graphchat.cli.parsers import Command

SHELLS = ("bash", "zsh", "fish")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "completion",
        help="print the shell completion script: bash, zsh or fish",
        description="Print the script that makes Tab complete graphchat's commands, flags, plan "
        'names, thread ids, tool names and models. bash: eval "$(graphchat completion bash)" in '
        '~/.bashrc; zsh: eval "$(graphchat completion zsh)" in ~/.zshrc (after compinit); fish: '
        "graphchat completion fish > ~/.config/fish/completions/graphchat.fish",
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to print the script for")
    p.set_defaults(func=Command("graphchat.cli.completion:run_completion"))
