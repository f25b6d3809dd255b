"""Diagnostic logs on stderr: `-v` info, `-vv` debug, `-vvv` trace, or a filter in
`GRAPHCHAT_LOG` (graph's `GRAPH_LOG`, RUST_LOG's syntax): comma-separated `LEVEL` (everything)
and `TARGET=LEVEL` items, a target being a logger name and everything under it
(`GRAPHCHAT_LOG=graphchat.catalog=debug`, `GRAPHCHAT_LOG=warn,graphchat.llm=info`). The filter
wins over `-v`, as graph's does. Levels: trace, debug, info, warn (warning), error, off.

Nothing is configured without either: Python's default then (warnings and errors only), as
before. The loggers: `graphchat.catalog` (tool calls), `graphchat.catalog.mcp` (server starts
and stops), `graphchat.llm` (model calls), `graphchat.shapes`. litellm's own logs stay off
(`LITELLM_LOG` is litellm's switch).
"""

from __future__ import annotations

import logging
import os
import sys

from graphchat.errors import EXIT_USAGE, GraphchatError

TRACE = 5
LEVELS = {
    "trace": TRACE,
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "off": logging.CRITICAL + 10,
}
VERBOSITY = {0: logging.WARNING, 1: logging.INFO, 2: logging.DEBUG}  # 3 and more: trace
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def _level(word: str, var: str) -> int:
    level = LEVELS.get(word.strip().lower())
    if level is None:
        raise GraphchatError(
            f"{var}: unknown level {word.strip()!r}", EXIT_USAGE, hint=f"levels: {', '.join(LEVELS)}"
        )
    return level


def parse_filter(text: str, var: str = "GRAPHCHAT_LOG") -> tuple[int | None, dict[str, int]]:
    """`warn,graphchat.catalog=debug` → (WARNING, {"graphchat.catalog": DEBUG}); a part that is
    no level is a usage error naming the variable."""
    default: int | None = None
    targets: dict[str, int] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        target, eq, word = part.partition("=")
        if eq:
            if not target.strip():
                raise GraphchatError(f"{var}: {part!r} names no target", EXIT_USAGE)
            targets[target.strip().replace("::", ".")] = _level(word, var)
        else:
            default = _level(part, var)
    return default, targets


def configure(verbosity: int) -> None:
    """Set up stderr logging for `-v` × `verbosity` and the filter variable; nothing when
    neither is given."""
    found = next(
        ((var, os.environ[var]) for var in ("GRAPHCHAT_LOG", "GRAPH_LOG") if os.environ.get(var, "").strip()),
        None,
    )
    if not verbosity and found is None:
        return
    logging.addLevelName(TRACE, "TRACE")
    default = VERBOSITY.get(verbosity, TRACE)
    targets: dict[str, int] = {}
    if found is not None:
        given, targets = parse_filter(found[1], found[0])
        default = given if given is not None else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(FORMAT))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(default)
    for name, level in targets.items():
        logging.getLogger(name).setLevel(level)
