"""The workbench's read-only research tools over the project: `read_file`, `grep`, `glob`.

Contained to the launch directory: a path is resolved (symlinks and `..` followed) *before* the
check, so `..`, an absolute path elsewhere and a symlink pointing out are all refused. The walk
honours every `.gitignore` on the way down (a directory's patterns apply below it, as git reads
them, through `pathspec`), skips `.git`, never follows a symlinked directory, and skips binary
files. Every answer is capped (lines, bytes, matches, files, entries walked) and says when it was
cut. `grep` patterns are RE2 (linear time: no catastrophic backtracking) searched on a worker
thread under a time limit, the same limit the github pack gives a model-chosen pattern.

These tools are the agent's only: `tools.py` registers them in the agent's catalog, never in the
plan catalog.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

READ_DEFAULT_LINES = 500
READ_MAX_LINES = 2000
READ_MAX_LINE_CHARS = 2000
READ_MAX_BYTES = 128 * 1024
GREP_DEFAULT_MATCHES = 100
GREP_MAX_MATCHES = 500
GREP_MAX_LINE_CHARS = 300
GREP_MAX_FILE_BYTES = 2 * 1024 * 1024  # a bigger file is not searched (said in `skipped`)
GREP_MAX_TOTAL_BYTES = 32 * 1024 * 1024  # what one grep reads at most
GREP_SECONDS = 2.0
GLOB_MAX_FILES = 500
WALK_MAX_ENTRIES = 50_000
BINARY_SNIFF = 8 * 1024
REGEX_MAX_MEM = 8 << 20


class ResearchError(Exception):
    """A research call that cannot be answered (a path outside, a bad pattern…): told to the model."""


def _pattern_spec(patterns: list[str]) -> Any:
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(patterns)


class Project:
    """The launch directory, resolved once; everything is answered relative to it."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self._ignores: dict[Path, Any] = {}

    # -- containment -----------------------------------------------------------------------

    def resolve(self, raw: str) -> Path:
        """`raw` (relative to the root, or absolute) resolved; refused outside the root."""
        if not isinstance(raw, str) or not raw or "\0" in raw:
            raise ResearchError("a path must be a non-empty string")
        candidate = Path(raw) if os.path.isabs(raw) else self.root / raw
        try:
            resolved = candidate.resolve(strict=True)
        except FileNotFoundError:
            resolved = candidate.resolve()
            if resolved.is_relative_to(self.root):
                raise ResearchError(f"'{raw}' not found") from None
            raise ResearchError(f"'{raw}' is outside the project directory {self.root}") from None
        except (OSError, RuntimeError) as exc:  # a symlink loop, a permission
            raise ResearchError(f"cannot resolve '{raw}': {exc}") from None
        if not resolved.is_relative_to(self.root):
            raise ResearchError(f"'{raw}' is outside the project directory {self.root}")
        if self.ignored(resolved):
            raise ResearchError(f"'{raw}' is ignored by the project's .gitignore")
        return resolved

    def relative(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    # -- .gitignore ------------------------------------------------------------------------

    def _spec(self, directory: Path) -> Any:
        """The patterns of `directory`'s own .gitignore (None without one)."""
        if directory not in self._ignores:
            spec = None
            try:
                lines = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                lines = []
            if lines:
                spec = _pattern_spec(lines)
            self._ignores[directory] = spec
        return self._ignores[directory]

    def ignored(self, path: Path, *, is_dir: bool | None = None) -> bool:
        """Whether `path` (inside the root) is `.git`, or ignored by a .gitignore above it — its
        own directory's, or any ancestor's up to the root, or an ignored ancestor directory."""
        parts = path.relative_to(self.root).parts
        if ".git" in parts:
            return True
        directory = self.root
        for depth, part in enumerate(parts):
            last = depth == len(parts) - 1
            here = directory / part
            entry_is_dir = (here.is_dir() if is_dir is None else is_dir) if last else True
            base = self.root
            for level in range(depth + 1):  # every .gitignore from the root down to `directory`
                spec = self._spec(base)
                if spec is not None:
                    rel = Path(*parts[level : depth + 1]).as_posix() + ("/" if entry_is_dir else "")
                    if spec.match_file(rel):
                        return True
                if level < depth:
                    base = base / parts[level]
            directory = here
        return False

    def walk(self, start: Path) -> tuple[list[Path], bool]:
        """The files under `start` that are not ignored, sorted; True when the walk was capped."""
        files: list[Path] = []
        seen = 0
        for directory, dirs, names in os.walk(start, followlinks=False):
            here = Path(directory)
            dirs[:] = sorted(
                d for d in dirs if not (here / d).is_symlink() and not self.ignored(here / d, is_dir=True)
            )
            for name in sorted(names):
                seen += 1
                if seen > WALK_MAX_ENTRIES:
                    return sorted(files), True
                path = here / name
                if path.is_symlink():  # a link is followed only when named (and checked) itself
                    continue
                if not self.ignored(path, is_dir=False):
                    files.append(path)
        return sorted(files), False

    # -- the tools -------------------------------------------------------------------------

    def read_file(self, arguments: dict[str, Any]) -> dict[str, Any]:
        raw = arguments.get("path")
        path = self.resolve(raw)  # type: ignore[arg-type]
        if path.is_dir():
            raise ResearchError(f"'{raw}' is a directory; workbench__glob lists files")
        try:
            with path.open("rb") as handle:
                data = handle.read(READ_MAX_BYTES * 16 + 1)
        except OSError as exc:
            raise ResearchError(f"cannot read '{raw}': {exc.strerror or exc}") from None
        if b"\0" in data[:BINARY_SNIFF]:
            raise ResearchError(f"'{raw}' is a binary file")
        lines = data.decode("utf-8", errors="replace").splitlines()
        offset = max(1, _int(arguments.get("offset"), 1))
        limit = min(max(1, _int(arguments.get("limit"), READ_DEFAULT_LINES)), READ_MAX_LINES)
        if lines and offset > len(lines):
            raise ResearchError(f"offset {offset} is beyond the end of '{raw}' ({len(lines)} lines)")
        out: list[str] = []
        size = 0
        for line in lines[offset - 1 : offset - 1 + limit]:
            line = line[:READ_MAX_LINE_CHARS]
            if size + len(line) + 1 > READ_MAX_BYTES:
                break
            out.append(line)
            size += len(line) + 1
        whole = len(data) <= READ_MAX_BYTES * 16
        return {
            "path": self.relative(path),
            "content": "".join(f"{line}\n" for line in out),
            "offset": offset,
            "linesReturned": len(out),
            "totalLines": len(lines) if whole else None,
            "truncated": offset - 1 + len(out) < len(lines) or not whole,
        }

    def glob(self, arguments: dict[str, Any]) -> dict[str, Any]:
        matcher = _glob(arguments.get("pattern"))
        start = self.resolve(arguments["dir"]) if arguments.get("dir") else self.root
        if not start.is_dir():
            raise ResearchError("'dir' must be a directory")
        files, truncated = self.walk(start)
        found: list[str] = []
        for path in files:
            rel = self.relative(path)
            if matcher.match_file(rel):
                if len(found) >= GLOB_MAX_FILES:
                    truncated = True
                    break
                found.append(rel)
        return {"files": found, "count": len(found), "truncated": truncated}

    async def grep(self, arguments: dict[str, Any]) -> dict[str, Any]:
        pattern = arguments.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise ResearchError("grep needs a 'pattern' (an RE2 regular expression)")
        compiled = await asyncio.to_thread(_compile, pattern, bool(arguments.get("case_insensitive")))
        names = _glob(arguments["glob"]) if arguments.get("glob") else None
        start = self.resolve(arguments.get("path") or ".")
        limit = min(max(1, _int(arguments.get("max_matches"), GREP_DEFAULT_MATCHES)), GREP_MAX_MATCHES)
        stop = threading.Event()
        try:
            return await asyncio.wait_for(
                asyncio.to_thread(self._grep, compiled, start, names, limit, stop), GREP_SECONDS
            )
        except TimeoutError:
            stop.set()
            raise ResearchError(
                f"grep took more than {GREP_SECONDS:g} s; narrow it with 'path' or 'glob'"
            ) from None

    def _grep(
        self, compiled: Any, start: Path, names: Any, limit: int, stop: threading.Event
    ) -> dict[str, Any]:
        files, truncated = self.walk(start) if start.is_dir() else ([start], False)
        matches: list[dict[str, Any]] = []
        skipped: list[str] = []
        budget = GREP_MAX_TOTAL_BYTES
        for path in _each(files, stop):
            rel = self.relative(path)
            if names is not None and not names.match_file(rel):
                continue
            try:
                size = path.stat().st_size
                if size > GREP_MAX_FILE_BYTES or size > budget:
                    skipped.append(rel)
                    continue
                data = path.read_bytes()
            except OSError:
                continue
            budget -= len(data)
            if b"\0" in data[:BINARY_SNIFF]:
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if stop.is_set():
                    break
                if compiled.search(line):
                    if len(matches) >= limit:
                        return _grep_result(matches, True, skipped)
                    matches.append({"path": rel, "line": number, "text": line.strip()[:GREP_MAX_LINE_CHARS]})
        return _grep_result(matches, truncated, skipped)


def _grep_result(matches: list[dict[str, Any]], truncated: bool, skipped: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"matches": matches, "matchCount": len(matches), "truncated": truncated}
    if skipped:
        out["skipped"] = {"over the size cap": skipped[:20], "count": len(skipped)}
        out["truncated"] = True
    return out


def _each(files: list[Path], stop: threading.Event) -> Iterator[Path]:
    for path in files:
        if stop.is_set():
            return
        yield path


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _glob(pattern: Any) -> Any:
    """A glob as git reads one: without `/` it matches a file name at any depth, `**` any depth."""
    if not isinstance(pattern, str) or not pattern.strip() or pattern.startswith("!"):
        raise ResearchError("a glob pattern is needed, e.g. **/*.yaml or plans/*.yaml")
    try:
        return _pattern_spec([pattern])
    except (ValueError, TypeError) as exc:
        raise ResearchError(f"invalid glob {pattern!r}: {exc}") from None


def _compile(pattern: str, case_insensitive: bool) -> Any:
    import re2

    options = re2.Options()
    options.log_errors = False
    options.max_mem = REGEX_MAX_MEM
    options.case_sensitive = not case_insensitive
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise ResearchError(f"invalid pattern {pattern!r} (RE2 syntax): {why}") from None
