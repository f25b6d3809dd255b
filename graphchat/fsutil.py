"""Small files: written so that readers see the old content or the new, never half of it, and
JSON objects read back without raising."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def read_json(path: str | Path) -> Any:
    """The JSON value in `path`, or None (missing, unreadable, not JSON)."""
    import orjson

    try:
        with open(path, "rb") as handle:
            return orjson.loads(handle.read())
    except (OSError, orjson.JSONDecodeError):
        return None


def read_object(path: str | Path) -> dict[str, Any] | None:
    """The JSON object in `path`, or None (missing, unreadable, not JSON, not an object)."""
    doc = read_json(path)
    return doc if isinstance(doc, dict) else None


def write_atomic(path: Path, data: bytes | str, *, keep_mode: bool = False, parents: bool = True) -> None:
    """Write `data` to a temp file beside `path`, then rename it over `path`.

    No fsync: these are caches and settings where a power cut may lose the last write but a
    crash never leaves a torn file. `keep_mode` keeps the permissions of the file replaced.
    `parents=False`: a missing folder is FileNotFoundError (it was removed: do not bring it back).
    """
    if parents:
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data.encode("utf-8") if isinstance(data, str) else data)
        if keep_mode and path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
