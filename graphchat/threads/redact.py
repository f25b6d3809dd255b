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
    for model in settings.models.values():
        if model.api_key is not None and _is_secret_value(model.api_key):
            found.add(model.api_key)
    return found


class Redactor:
    """Replaces known secret values inside an encoded JSON line."""

    def __init__(self, secrets: Iterable[str]) -> None:
        # A secret appears JSON-escaped inside an encoded line, and escaped again when it sits in
        # JSON text held in a string (a tool result): look for each level. Longest first, so a
        # secret that contains another is replaced whole.
        encoded: set[bytes] = set()
        for secret in secrets:
            if not _is_secret_value(secret):
                continue
            text = secret
            for _ in range(_ESCAPE_LEVELS):
                text = orjson.dumps(text).decode()[1:-1]
                encoded.add(text.encode())
        self._needles = sorted(encoded, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self._needles)

    def line(self, data: bytes) -> bytes:
        for needle in self._needles:
            if needle in data:
                data = data.replace(needle, REDACTED.encode())
        return data
