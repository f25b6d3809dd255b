"""YAML files the user writes (graphchat.yaml, servers.yaml, --answers, plans): safe loading
with the C parser when present, aliases checked against a budget before anything is built, and
`file:line` for every problem.

The node tree that knows line numbers is composed only when a problem needs a line: on the
happy path a file is parsed once, by libyaml.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from graphchat.errors import ConfigError

# Aliases may add at most this many nodes to what the file itself holds: a few hundred bytes of
# nested aliases ("billion laughs") otherwise expand to 10^9 nodes for whoever walks the data.
ALIAS_BUDGET = 10_000


def _loader() -> Any:
    return yaml12_loader()


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def check_aliases(root: Any, budget: int = ALIAS_BUDGET) -> None:
    """Raise yaml.YAMLError when aliases make the document recursive, or expand it by more
    than `budget` nodes. Linear in the composed (unexpanded) node graph; no recursion."""
    import yaml

    expanded: dict[int, int] = {}  # node id -> node count with every alias expanded
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        if finished:
            expanded[key] = 1 + sum(expanded[id(child)] for child in _children(node))
            open_nodes.discard(key)
            continue
        if key in expanded:
            continue
        if key in open_nodes:
            line = node.start_mark.line + 1 if node.start_mark is not None else "?"
            raise yaml.YAMLError(f"a recursive alias (the node at line {line} contains itself)")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in expanded)
    extra = expanded[id(root)] - len(expanded)
    if extra > budget:
        raise yaml.YAMLError(
            f"aliases expand the document by {extra:,} nodes (at most {budget:,} are allowed: "
            "a YAML alias bomb?)"
        )


def parse_yaml(text: str) -> tuple[Any, Any]:
    """(node, data) of one YAML document: safe loader, parsed once, aliases checked before
    anything is built. Errors are yaml.YAMLError (MarkedYAMLError with a line when known)."""
    loader = _loader()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        check_aliases(node)
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


class YamlDoc:
    """A loaded YAML document: `data`, and `line_of(path)` for error messages."""

    def __init__(self, path: Path, text: str, data: Any, node: Any = None) -> None:
        self.path = path
        self.text = text
        self.data = data
        self._node: Any = node

    def line_of(self, keys: tuple[str | int, ...]) -> int | None:
        """1-based line of the value at `keys` (mapping keys / sequence indexes), or of the
        deepest part of it that exists."""
        import yaml

        if self._node is None:
            self._node = yaml.compose(self.text, Loader=_loader())
        node = self._node
        line = node.start_mark.line + 1 if node is not None else None
        for part in keys:
            if isinstance(node, yaml.MappingNode):
                for key_node, value_node in node.value:
                    if key_node.value == part:
                        line = key_node.start_mark.line + 1
                        node = value_node
                        break
                else:
                    return line
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    def where(self, keys: tuple[str | int, ...]) -> str:
        """`<file>:<line>` of `keys` (just the file when no line is known)."""
        line = self.line_of(keys)
        return f"{self.path}:{line}" if line else str(self.path)


def read_utf8(path: Path) -> str:
    """A text file's content; not UTF-8 is a ValueError `<file>:<line>: not UTF-8 text (…)`."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save the file as UTF-8"
        ) from None


def load_yaml_file(path: Path) -> YamlDoc:
    """safe-load a YAML file; unreadable or invalid is one ConfigError line `<file>:<line>: …`."""
    import yaml

    try:
        text = read_utf8(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    try:
        node, data = parse_yaml(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # An unclosed bracket or quote is reported at end of file; its opening line helps more.
        if exc.context_mark is not None and mark is not None and mark.index >= len(text.rstrip()):
            mark = exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    return YamlDoc(path, text, data, node)


# --- YAML 1.2 ----------------------------------------------------------------------------------

# graph reads its files with serde_yaml (YAML 1.2 core schema, duplicate keys rejected); PyYAML
# reads YAML 1.1, where `yes`/`no`/`on`/`off` are booleans, `12:30` is 750 and `010` is 8.
# `yaml12_loader()` is the one loader class for every YAML file graphchat reads: the safe loader
# (C parser when present) with the core schema's implicit resolvers, no `<<` merge and no
# timestamps (both YAML 1.1 only), and a repeated mapping key as a load error.

_CORE_RESOLVERS: list[tuple[str, str, list[str]]] = [
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    (
        "tag:yaml.org,2002:float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        list("-+.0123456789"),
    ),
]


@cache
def yaml12_loader() -> Any:
    """The YAML 1.2 core-schema safe loader class (see above)."""
    import re

    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class Yaml12Loader(base):  # type: ignore[valid-type,misc]
        yaml_implicit_resolvers: dict[str | None, list[tuple[str, Any]]] = {}

        def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _value in node.value:
                    key = self.construct_object(key_node, deep=True)
                    try:
                        repeated = key in seen
                        seen.add(key)
                    except TypeError:
                        continue  # an unhashable key: the base class reports it
                    if repeated:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping",
                            node.start_mark,
                            f"duplicate key {key!r}",
                            key_node.start_mark,
                        )
            return dict(super().construct_mapping(node, deep=deep))

        def construct_yaml_int(self, node: Any) -> int:
            text = str(self.construct_scalar(node))
            if text.startswith("0o"):
                return int(text[2:], 8)
            if text.startswith("0x"):
                return int(text[2:], 16)
            return int(text, 10)

    for tag, pattern, first in _CORE_RESOLVERS:
        Yaml12Loader.add_implicit_resolver(tag, re.compile(pattern), first)
    Yaml12Loader.add_constructor("tag:yaml.org,2002:int", Yaml12Loader.construct_yaml_int)
    return Yaml12Loader


@cache
def yaml12_dumper() -> Any:
    """A safe dumper whose plain scalars read back the same under YAML 1.1 and 1.2: a string
    that either schema would read as something else (`yes`, `0o10`, `12:30`) is quoted."""
    import re

    import yaml

    class Yaml12Dumper(yaml.SafeDumper):
        yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeDumper.yaml_implicit_resolvers.items()}

    for tag, pattern, first in _CORE_RESOLVERS:
        Yaml12Dumper.add_implicit_resolver(tag, re.compile(pattern), first)
    return Yaml12Dumper
