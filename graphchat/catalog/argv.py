"""Argument hygiene: a value a model, a plan or an MCP client chooses is data, never an option
of the program it reaches.

`as_data` is the one rule; everything else here applies it where a chosen value meets a
program's command line: the argv of a user `exec` tool (`exec_argv`) and the git pack's refs
and paths (`graphchat.catalog.packs.git`). A value starting with `-` in a place where the
program would read it as an option is refused with a one-line error naming the argument —
never passed on, never "fixed".
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from pathlib import Path

# Shells whose `-c SCRIPT` makes every later argument a positional parameter ($0, $1, …).
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"})
_LEADING_INPUT = re.compile(r"^\{\{-?\s*input\.([A-Za-z0-9_-]+)")


class UnsafeArgument(ValueError):
    """A chosen value that would reach a program as an option (or outside its repository)."""


def as_data(value: str, what: str, *, hint: str = "") -> str:
    """The argument rule: `value` goes to a program as data, so it may not start with `-`."""
    if value.startswith("-"):
        tail = f"; {hint}" if hint else ""
        raise UnsafeArgument(
            f"{what} is {_shown(value)}, which starts with '-': a value is data, never an option{tail}"
        )
    return value


def inside(root: Path, base: Path, path: str, what: str) -> str:
    """`path` (relative to `base`) must stay inside `root` once `.`/`..` are resolved."""
    joined = os.path.normpath(os.path.join(base, path))
    top = os.path.normpath(root)
    if joined != top and not joined.startswith(top.rstrip(os.sep) + os.sep):
        raise UnsafeArgument(f"{what} {_shown(path)} is outside the repository")
    return path


def exec_argv(
    tool: str,
    command: str,
    templates: Sequence[str],
    rendered: Sequence[str],
    options_allowed: Collection[str] = (),
) -> list[str]:
    """The argv of a user exec tool, each templated value held to the argument rule.

    An element is exempt when the tool's author wrote it as an option (its template starts
    with `-`), when it comes after a `--` element or after the script of `sh -c` (a positional
    parameter there), or when the input it starts with is listed under `options_allowed`.
    """
    free_from = _positional_from(command, templates)
    for index, (template, value) in enumerate(zip(templates, rendered, strict=True)):
        if index >= free_from or template.startswith("-") or "{{" not in template:
            continue
        lead = _LEADING_INPUT.match(template)
        name = lead.group(1) if lead else None
        if name is not None and name in options_allowed:
            continue
        what = f"{tool}: argument '{name}'" if name else f"{tool}: args[{index}]"
        as_data(
            value,
            what,
            hint="the tool's author can place it after '--' in `args` or list it under `options_allowed`",
        )
    return [command, *rendered]


def _positional_from(command: str, templates: Sequence[str]) -> int:
    """The index from which arguments are positional: after `--`, or after a shell's `-c` script
    (`bash -ceuo pipefail SCRIPT $0 $1 …`: each `o` in a cluster takes the next element)."""
    end = templates.index("--") + 1 if "--" in templates else len(templates)
    if os.path.basename(command) not in _SHELLS:
        return end
    index, takes, script = 0, 0, False
    while index < end:
        template = templates[index]
        if takes:
            takes -= 1
        elif template.startswith("-") and not template.startswith("--") and len(template) > 1:
            script = script or "c" in template[1:]
            takes = template[1:].count("o")
        elif not template.startswith("--"):
            break
        index += 1
    return min(end, index + 1) if script else end


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")
