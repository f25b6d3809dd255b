"""Catalog names for MCP tools: `<server>__<tool>`, provider-safe and reversible.

Providers accept only `[A-Za-z0-9_-]` and at most 64 characters. Sanitizing and shortening can
make two real tools land on the same name; `NameMap` keeps every one of them reachable (the
later one gets a hash suffix) and records the collision so `tools list` can report it.
"""

from __future__ import annotations

import hashlib
import re

MAX_NAME = 64
SEPARATOR = "__"
HASH_LEN = 6

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SERVER_NAME = re.compile(r"[A-Za-z0-9-]+")


def sanitize(name: str) -> str:
    """Replace every character outside `[A-Za-z0-9_-]` with `_` (empty becomes `_`)."""
    return _UNSAFE.sub("_", name) or "_"


# graphchat's own namespaces: a server by one of these names would put its tools where the
# workspace's plans, packs, user tools or control tools are (`plan__echo` running a server's
# tool without approval). Compared without case.
RESERVED_SERVER_NAMES = frozenset(
    {"plan", "plans", "builtin", "user", "ask_user", "core", "control", "debug", "workbench", "graphchat"}
)


def reserved_server_name(name: str) -> bool:
    return name.lower() in RESERVED_SERVER_NAMES


def valid_server_name(name: str) -> bool:
    """A server name is `[A-Za-z0-9-]+` and never contains `__` (the catalog separator)."""
    return bool(_SERVER_NAME.fullmatch(name)) and SEPARATOR not in name


def _hash(text: str, length: int = HASH_LEN) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:length]


def _fit(name: str, digest: str) -> str:
    """`name` with `digest` inserted so the whole fits in MAX_NAME: head + `_hash_` + tail.

    Keeping both ends matters: the head carries the server, the tail the tool's distinctive verb.
    """
    room = MAX_NAME - len(digest) - 2
    head = (room + 1) // 2
    tail = room - head
    return f"{name[:head]}_{digest}_{name[-tail:]}"


def tool_name(server: str, tool: str) -> str:
    """Catalog name of `tool` on `server`: sanitized `<server>__<tool>`, at most 64 characters.

    Longer names keep head and tail around a stable 6-hex hash of the real (unsanitized) pair.
    """
    name = sanitize(f"{server}{SEPARATOR}{tool}")
    if len(name) <= MAX_NAME:
        return name
    return _fit(name, _hash(f"{server}{SEPARATOR}{tool}"))


def _disambiguate(name: str, server: str, tool: str, attempt: int) -> str:
    """A different name for the pair that lost a collision; re-salted if that is taken too."""
    pair = f"{server}{SEPARATOR}{tool}"
    digest = _hash(f"{pair}#{attempt}" if attempt else pair)
    if len(name) + len(digest) + 1 <= MAX_NAME:
        return f"{name}_{digest}"
    return _fit(name, digest)


class NameMap:
    """Assigns catalog names to (server, tool) pairs and maps them back.

    Names depend on the order of `add` calls for colliding pairs only: add in a stable order
    (configuration order, then the server's tool order) so names stay the same across runs.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, tuple[str, str]] = {}
        self._by_pair: dict[tuple[str, str], str] = {}
        self._collisions: dict[str, list[tuple[str, str]]] = {}

    def add(self, server: str, tool: str) -> str:
        """Register a real tool and return its catalog name (same pair, same name)."""
        pair = (server, tool)
        known = self._by_pair.get(pair)
        if known is not None:
            return known
        name = tool_name(server, tool)
        if name in self._by_name:
            holders = self._collisions.setdefault(name, [self._by_name[name]])
            holders.append(pair)
            attempt = 0
            candidate = _disambiguate(name, server, tool, attempt)
            while candidate in self._by_name:
                attempt += 1
                candidate = _disambiguate(name, server, tool, attempt)
            name = candidate
        self._by_name[name] = pair
        self._by_pair[pair] = name
        return name

    def resolve(self, name: str) -> tuple[str, str] | None:
        """The real (server, tool) behind a catalog name, or None if unknown."""
        return self._by_name.get(name)

    def name_of(self, server: str, tool: str) -> str | None:
        """The catalog name already given to a real pair, or None."""
        return self._by_pair.get((server, tool))

    @property
    def collisions(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """Each contested name with every real pair that wanted it (first holder first)."""
        return [(name, list(pairs)) for name, pairs in self._collisions.items()]

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name
