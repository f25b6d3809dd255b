"""stdout/stderr discipline: only the deliverable on stdout; errors as one clear line."""

from __future__ import annotations

import sys
from typing import Any

from graphchat.errors import EXIT_USAGE, GraphchatError


def report_error(message: str, hint: str | None = None) -> None:
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.display import safe
    from graphchat.threads.redact import Redactor, environment_secrets

    message = Redactor(environment_secrets(None)).text(message)  # a provider may echo the key
    # An error may quote a tool, a server or a model: its control characters are escaped.
    sys.stderr.write(f"error: {safe(message)}\n")
    if hint:
        sys.stderr.write(f"  {safe(hint)}\n")
    sys.stderr.flush()


def warn(message: str) -> None:
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.display import safe

    sys.stderr.write(f"warning: {safe(message)}\n")
    sys.stderr.flush()


def note(message: str) -> None:
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.display import safe

    sys.stderr.write(safe(message) + "\n")
    sys.stderr.flush()


def print_json(value: Any, *, pretty: bool = True) -> None:
    """The deliverable as JSON on stdout. DEL and C1 controls (which JSON leaves raw, and a
    terminal acts on) are written as `\\u` escapes: the same JSON, nothing for a terminal to run."""
    import re

    import orjson

    option = orjson.OPT_INDENT_2 if pretty else 0
    text = orjson.dumps(value, option=option, default=str).decode()
    text = re.sub("[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", text)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def read_piped_text(stream: Any = None, what: str = "piped stdin", limit: int | None = None) -> str:
    """All of a piped stream as text (newlines normalized, as text mode reads them). Binary
    data (a NUL byte, or bytes that are not UTF-8) is a usage error naming where it starts;
    more than `limit` bytes is one too (never more than the limit is held in memory)."""
    stream = sys.stdin if stream is None else stream
    buffer = getattr(stream, "buffer", None)
    source = buffer if buffer is not None else stream
    raw = source.read() if limit is None else source.read(limit + 1)
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogateescape")
    if limit is not None and len(raw) > limit:
        raise GraphchatError(
            f"piped input is too long: ask reads at most {limit:,} bytes from stdin",
            EXIT_USAGE,
            hint="pipe a smaller part (head -c, a grep), or give the file's path in the message for a tool to read",
        )
    bad = raw.find(b"\0")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = exc.start if bad < 0 else min(bad, exc.start)
    if bad >= 0:
        raise GraphchatError(
            f"{what} is binary data, not UTF-8 text (byte {bad}); pipe text, e.g. through `strings` or `base64`",
            EXIT_USAGE,
        )
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_json_document(text: str, source: str) -> Any:
    """Parse a JSON (or YAML) document given on the command line, naming `source` on error."""
    import orjson

    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise GraphchatError(f"{source}: invalid JSON: {exc}", 2) from None


def read_document_arg(arg: str | None, *, what: str = "input") -> Any:
    """`JSON`, `@file` or `-` (stdin) → a JSON value (None when arg is None)."""
    if arg is None:
        return None
    if arg == "-":
        return parse_json_document(read_piped_text(what=f"{what} from stdin") or "null", f"{what} from stdin")
    if arg.startswith("@"):
        path = arg[1:]
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except OSError as exc:
            raise GraphchatError(f"{what} {arg}: cannot read: {exc.strerror}", 2) from None
        except UnicodeDecodeError as exc:
            raise GraphchatError(f"{what} {arg}: not UTF-8 text (offset {exc.start})", 2) from None
        if path.endswith((".yaml", ".yml")):
            import yaml

            # on `ask`'s path before it hands the turn to a warm helper: imported when used
            from graphchat.yamlfile import parse_yaml

            try:
                return parse_yaml(text)[1]
            except yaml.YAMLError as exc:
                why = getattr(exc, "problem", None) or exc
                raise GraphchatError(f"{what} {arg}: invalid YAML: {why}", 2) from None
        return parse_json_document(text, f"{what} {arg}")
    return parse_json_document(arg, what)


def apply_input_flags(document: Any, pairs: list[str] | None) -> Any:
    """`--input k=v` flags over a document: v is JSON when it parses, else a string."""
    import orjson

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
