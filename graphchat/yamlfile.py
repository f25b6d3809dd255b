"""YAML files the user writes (graphchat.yaml, servers.yaml, --answers): safe loading with the
C parser when present, and `file:line` for every problem.

The node tree that knows line numbers is composed only when a problem needs a line: on the
happy path a file is parsed once, by libyaml.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from graphchat.errors import ConfigError


def _loader() -> Any:
    return yaml12_loader()


class YamlDoc:
    """A loaded YAML document: `data`, and `line_of(path)` for error messages."""

    def __init__(self, path: Path, text: str, data: Any) -> None:
        self.path = path
        self.text = text
        self.data = data
        self._node: Any = None

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


def load_yaml_file(path: Path) -> YamlDoc:
    """safe-load a YAML file; unreadable or invalid is one ConfigError line `<file>:<line>: …`."""
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 - a safe loader class
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # An unclosed bracket or quote is reported at end of file; its opening line helps more.
        if exc.context_mark is not None and mark is not None and mark.index >= len(text.rstrip()):
            mark = exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    return YamlDoc(path, text, data)


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
