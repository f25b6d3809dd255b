"""stdout/stderr discipline: only the deliverable on stdout; errors as one clear line."""

from __future__ import annotations

import sys
from typing import Any


def report_error(message: str, hint: str | None = None) -> None:
    sys.stderr.write(f"error: {message}\n")
    if hint:
        sys.stderr.write(f"  {hint}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def note(message: str) -> None:
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def print_json(value: Any, *, pretty: bool = True) -> None:
    """The deliverable as JSON on stdout."""
    import orjson

    option = orjson.OPT_INDENT_2 if pretty else 0
    sys.stdout.write(orjson.dumps(value, option=option, default=str).decode() + "\n")
    sys.stdout.flush()


def parse_json_document(text: str, source: str) -> Any:
    """Parse a JSON (or YAML) document given on the command line, naming `source` on error."""
    import orjson

    from graphchat.errors import GraphchatError

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise GraphchatError(f"{source}: invalid JSON: {exc}", 2) from None


def read_document_arg(arg: str | None, *, what: str = "input") -> Any:
    """`JSON`, `@file` or `-` (stdin) → a JSON value (None when arg is None)."""
    from graphchat.errors import GraphchatError

    if arg is None:
        return None
    if arg == "-":
        return parse_json_document(sys.stdin.read() or "null", f"{what} from stdin")
    if arg.startswith("@"):
        path = arg[1:]
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise GraphchatError(f"{what} {arg}: cannot read: {exc.strerror}", 2) from None
        if path.endswith((".yaml", ".yml")):
            import yaml

            try:
                from graphchat.yamlfile import yaml12_loader

                return yaml.load(text, Loader=yaml12_loader())  # noqa: S506 - a safe loader class
            except yaml.YAMLError as exc:
                raise GraphchatError(f"{what} {arg}: invalid YAML: {exc}", 2) from None
        return parse_json_document(text, f"{what} {arg}")
    return parse_json_document(arg, what)


def apply_input_flags(document: Any, pairs: list[str] | None) -> Any:
    """`--input k=v` flags over a document: v is JSON when it parses, else a string."""
    import orjson

    from graphchat.errors import GraphchatError

    if not pairs:
        return document
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise GraphchatError("--input needs the input document to be a JSON object", 2)
    document = dict(document)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise GraphchatError(f"--input {pair}: expected key=value", 2)
        try:
            document[key] = orjson.loads(raw)
        except orjson.JSONDecodeError:
            document[key] = raw
    return document
