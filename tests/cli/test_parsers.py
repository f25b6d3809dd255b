"""The parser and the commands' code apart (issue 20): `--help` and one group's parser import
`cli/parsers/` only, and each command the parser names is a function that exists."""

from __future__ import annotations

import argparse
import subprocess
import sys

from graphchat.cli.main import build_parser
from graphchat.cli.parsers import Command


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], object]:
    """Every (sub-)command's path → its `func` default."""
    found: dict[tuple[str, ...], object] = {}
    func = parser._defaults.get("func")
    if func is not None:
        found[path] = func
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found.update(_commands(child, (*path, name)))
    return found


def test_every_command_the_parser_names_is_a_function_that_exists() -> None:
    commands = _commands(build_parser())
    named = {path: func for path, func in commands.items() if isinstance(func, Command)}
    assert len(named) >= 50, sorted(commands)
    for path, command in named.items():
        assert isinstance(command, Command)
        assert command.module.startswith("graphchat.cli."), (path, command)
        assert callable(command.resolve()), (path, command)
    assert ("plan", "run") in named and ("tools", "list") in named and ("runs", "prune") in named


def test_the_parser_imports_no_commands_code() -> None:
    """In a fresh interpreter: the whole parser built, only cli/main, cli/parsers and what they
    need are imported (a command's module is imported when the command runs)."""
    code = (
        "import sys\nfrom graphchat.cli.main import build_parser\nbuild_parser()\n"
        "print('\\n'.join(m for m in sys.modules if m.startswith('graphchat.cli')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    assert "graphchat.cli.parsers.plan" in loaded
    commands_code = sorted(
        m
        for m in loaded
        if m not in ("graphchat.cli", "graphchat.cli.main") and not m.startswith("graphchat.cli.parsers")
    )
    assert commands_code == [], commands_code
