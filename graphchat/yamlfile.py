"""YAML files the user writes (graphchat.yaml, servers.yaml, --answers): safe loading with the
C parser when present, and `file:line` for every problem.

The node tree that knows line numbers is composed only when a problem needs a line: on the
happy path a file is parsed once, by libyaml.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from graphchat.errors import ConfigError


def _loader() -> Any:
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
