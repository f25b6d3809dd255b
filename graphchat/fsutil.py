"""Small files: written so that readers see the old content or the new, never half of it, and
JSON objects read back without raising. A write the disk refuses (read-only, full) is said in
one line naming the path and the errno's words: `no space left on device: threads/…`."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The errors of a disk that says no: they are the person's to fix, not a bug of ours.
WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EFBIG, errno.EIO}
)

_workspace: Path | None = None  # paths inside it are shown relative to it


def set_workspace(root: Path | None) -> None:
    """The command's workspace: failed writes inside it name their path relative to it."""
    global _workspace
    _workspace = root


def shown_path(path: str | os.PathLike[str]) -> str:
    where = Path(path)
    if _workspace is not None:
        try:
            return str(where.relative_to(_workspace))
        except ValueError:
            pass
    return str(where)


def is_failed_write(exc: BaseException) -> bool:
    """An OSError of a disk that says no (read-only, full, no permission, quota, I/O)."""
    return isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS


def failed_write_message(exc: OSError, path: str | os.PathLike[str] | None = None) -> str:
    """The one line of a failed write: the errno's words and the path,
    `no space left on device: threads/<id>/messages.jsonl`. This module owns the wording."""
    words = os.strerror(exc.errno) if exc.errno else (exc.strerror or type(exc).__name__)
    words = words[:1].lower() + words[1:]
    where = path if path is not None else exc.filename
    return f"{words}: {shown_path(where)}" if where else words


def describe_failure(exc: BaseException) -> str:
    """An unexpected exception in one line: a failed write in its one wording, else
    `<Class>: <message>`."""
    if isinstance(exc, OSError) and exc.errno in WRITE_ERRNOS:
        return failed_write_message(exc)
    return f"{type(exc).__name__}: {exc}"


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Name `path` in an OSError raised while writing it: `write()` and `close()` name no file,
    and a temp file's name is not the one the person knows."""
    try:
        yield
    except OSError as exc:
        if exc.errno in WRITE_ERRNOS and (exc.filename != str(path) or exc.filename2 is not None):
            # the same class (OSError picks it from the errno), naming `path` alone
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise


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
    A failure (a full disk) removes the temp file and names `path`.
    """
    with writing(path):
        if parents:
            path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        _write_and_rename(fd, tmp, path, data, keep_mode)


def _write_and_rename(fd: int, tmp: str, path: Path, data: bytes | str, keep_mode: bool) -> None:
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
