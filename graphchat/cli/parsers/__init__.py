"""Each command group's arguments, apart from its code.

`graphchat --help` imports every module here to build its parser, and a command imports its
group's: none of them imports a command's code. A command is named by `Command("module:function")`
and imported when it runs (command dispatch), so the command modules in `graphchat/cli/` can
import what they need at their top.
"""

from __future__ import annotations

import argparse
from importlib import import_module
from typing import Any


class Command:
    """A command's function, "graphchat.cli.module:function", imported when the command runs."""

    def __init__(self, target: str) -> None:
        self.module, _, self.name = target.partition(":")
        self.__name__ = self.name  # as the function's: `plan set` names itself from it

    def resolve(self) -> Any:
        return getattr(import_module(self.module), self.name)

    def __call__(self, args: argparse.Namespace) -> Any:
        return self.resolve()(args)

    def __repr__(self) -> str:
        return f"Command({self.module}:{self.name})"
