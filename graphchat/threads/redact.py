"""Keep secrets out of thread files: API keys and the values `${VAR}` expands to in servers.yaml.

A thread is a plain file people share and paste; a key can reach it through a tool's output, an
error message a provider echoes, or a model repeating what it saw. So every line is scrubbed
right before it is written: each known secret value becomes `[redacted]`.

Known secrets: the `api_key` of every configured model, the values of environment variables whose
name says they hold a credential (`GRAPHCHAT_API_KEY`, `OPENAI_API_KEY`, `GITHUB_TOKEN`, …), and
the values of the variables `catalog/servers.yaml` refers to as `${VAR}`. Values shorter than
MIN_SECRET_CHARS, and existing absolute paths, are not secrets (redacting them would mangle
every line that happens to contain them).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from graphchat.errors import GraphchatError

if TYPE_CHECKING:
    from graphchat.workspace import Settings

REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8
_ESCAPE_LEVELS = 3
_SECRET_NAME = re.compile(
    r"(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)(?:$|_)", re.IGNORECASE
)
_VAR_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)")
# Variables graphchat itself provides to servers.yaml: a path, not a secret.
_BUILTIN_VARIABLES = frozenset({"GRAPHCHAT_PYTHON", "GRAPHCHAT_WORKSPACE"})


# Answers a person typed into a `secret: true` field of a plan's `ask` (issue 19): held for the
# rest of this process, and scrubbed from every line graphchat writes from then on. Shorter
# ones are not looked for in text (they would mangle every line that happens to hold them).
MIN_ANSWERED_CHARS = 4
_ANSWERED: set[str] = set()
_ANSWERED_NEEDLES: list[tuple[str, bytes]] = []  # (the value, one JSON-escaped spelling of it)


def hold_answered(values: Iterable[str]) -> None:
    """Never write these secret answers again in this process (see `Redactor`, `scrub_answered`)."""
    for value in values:
        if len(value) < MIN_ANSWERED_CHARS or value in _ANSWERED:
            continue
        _ANSWERED.add(value)
        text = value
        for _ in range(_ESCAPE_LEVELS):
            text = orjson.dumps(text).decode()[1:-1]
            _ANSWERED_NEEDLES.append((value, text.encode()))
    _ANSWERED_NEEDLES.sort(key=lambda pair: len(pair[1]), reverse=True)


def holds_answers() -> bool:
    """Whether any secret answer is held in this process (`scrub_answered` changes nothing else)."""
    return bool(_ANSWERED)


def scrub_answered(text: str) -> str:
    """`text` (a line, JSON or not) with every held secret answer replaced by `[redacted]`."""
    if not _ANSWERED:
        return text
    for value, needle in _ANSWERED_NEEDLES:
        spelled = needle.decode()
        if spelled in text:
            text = text.replace(spelled, REDACTED)
        if value in text:
            text = text.replace(value, REDACTED)
    return text


def _is_secret_value(value: str | None) -> bool:
    if not value or len(value) < MIN_SECRET_CHARS:
        return False
    return not (os.path.isabs(value) and os.path.exists(value))


def environment_secrets(workspace: Path | None, environ: Mapping[str, str] | None = None) -> set[str]:
    """Credential-like environment values, plus the values of servers.yaml's `${VAR}` variables."""
    env = os.environ if environ is None else environ
    names = {name for name in env if _SECRET_NAME.search(name)}
    if workspace is not None:
        try:
            text = (workspace / "catalog" / "servers.yaml").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        names |= set(_VAR_REFERENCE.findall(text)) - _BUILTIN_VARIABLES
    values = (env.get(name) for name in names)
    return {value for value in values if value is not None and _is_secret_value(value)}


def settings_secrets(settings: Settings) -> set[str]:
    """Everything above, plus the `api_key` of every configured model role."""
    found = environment_secrets(settings.workspace)

    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.llm.keys import expanded

    for model in (*settings.models.values(), *settings.named.values()):
        for entry in (model, *model.fallbacks):
            try:  # `api_key: ${VAR}`: the variable's value is the secret
                key = expanded(entry, "api_key")
            except GraphchatError:  # unset: nothing to look for
                continue
            if key is not None and _is_secret_value(key):
                found.add(key)
    return found


class Redactor:
    """Replaces known secret values: inside an encoded JSON line (`line`, for every file graphchat
    writes: threads, the shape cache) or in plain text (`text`, for chat history and error lines).
    """

    def __init__(self, secrets: Iterable[str]) -> None:
        # A secret appears JSON-escaped inside an encoded line, and escaped again when it sits in
        # JSON text held in a string (a tool result): look for each level. Longest first, so a
        # secret that contains another is replaced whole.
        encoded: set[bytes] = set()
        self._secrets = sorted({s for s in secrets if _is_secret_value(s)}, key=len, reverse=True)
        for secret in self._secrets:
            text = secret
            for _ in range(_ESCAPE_LEVELS):
                text = orjson.dumps(text).decode()[1:-1]
                encoded.add(text.encode())
        self._needles = sorted(encoded, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._needles) or bool(_ANSWERED)

    def line(self, data: bytes) -> bytes:
        for _value, needle in _ANSWERED_NEEDLES:
            if needle in data:
                data = data.replace(needle, REDACTED.encode())
        for needle in self._needles:
            if needle in data:
                data = data.replace(needle, REDACTED.encode())
        if self._secrets and b"\\u" in data:  # a secret spelled with \u escapes: decode, then scrub
            data = self._decoded_line(data)
        return data

    def text(self, value: str) -> str:
        """Plain text with every known secret replaced."""
        value = scrub_answered(value)
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value

    def _decoded_line(self, data: bytes) -> bytes:
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError:
            return data
        cleaned, changed = self._scrub(obj, 0)
        if not changed:
            return data
        option = orjson.OPT_INDENT_2 if data.startswith(b"{\n") else 0
        return orjson.dumps(cleaned, option=option) + (b"\n" if data.endswith(b"\n") else b"")

    def _scrub(self, value: object, depth: int) -> tuple[object, bool]:
        """`value` with secrets replaced in every string after decoding, including JSON text held
        in a string (tool-call arguments), up to _ESCAPE_LEVELS deep."""
        if isinstance(value, str):
            cleaned = self.text(value)
            if cleaned != value:
                return cleaned, True
            if depth < _ESCAPE_LEVELS and "\\u" in value:
                try:
                    inner = orjson.loads(value)
                except orjson.JSONDecodeError:
                    return value, False
                scrubbed, changed = self._scrub(inner, depth + 1)
                if changed:
                    return orjson.dumps(scrubbed).decode(), True
            return value, False
        if isinstance(value, dict):
            out: dict[object, object] = {}
            any_changed = False
            for key, item in value.items():
                new_key, key_changed = self._scrub(key, depth)
                new_item, item_changed = self._scrub(item, depth)
                out[new_key] = new_item
                any_changed = any_changed or key_changed or item_changed
            return (out, True) if any_changed else (value, False)
        if isinstance(value, list):
            items = [self._scrub(item, depth) for item in value]
            if any(changed for _, changed in items):
                return [item for item, _ in items], True
            return value, False
        return value, False
