"""The logs of MCP servers, bounded: a server's stderr (`catalog/logs/<server>.log`) and the
SDK's complaints (`client.log`) are capped and rotated (one old file kept), and a complaint
repeated many times (a server flooding stdout with junk: one parse error a line) is written a
few times, then counted.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import threading
import time
from pathlib import Path
from typing import IO

from graphchat.ci import memory_storage

LOG_MAX_BYTES = 1_000_000  # per file; one rotated file (`.1`) is kept besides
REPEATS_KEPT = 3  # identical complaints written in full before they are only counted
REPEAT_SUMMARY_S = 10.0  # how often a count of the suppressed ones is written


def rotate(path: Path) -> None:
    """`path` → `path.1` (replacing an older one)."""
    try:
        os.replace(path, path.with_name(path.name + ".1"))
    except OSError:
        pass


class CappedLog:
    """A server's stderr, written to `path` by a thread that caps the file at `max_bytes`
    (rotating it once full). `stream` is the write end to give the server process."""

    def __init__(self, path: Path, header: str, max_bytes: int = LOG_MAX_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > max_bytes:
            rotate(path)
        self._file = open(path, "ab")  # noqa: SIM115 - owned by the reader thread
        self._file.write(header.encode("utf-8", "replace"))
        self._file.flush()
        self.offset = self._file.tell()  # where this start's lines begin
        read_fd, write_fd = os.pipe()
        self.stream: IO[str] = os.fdopen(write_fd, "w", encoding="utf-8")
        self._reader = threading.Thread(target=self._copy, args=(read_fd,), name="mcp-stderr", daemon=True)
        self._reader.start()

    def _copy(self, read_fd: int) -> None:
        file = self._file
        try:
            while True:
                try:
                    chunk = os.read(read_fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                if file.tell() + len(chunk) > self.max_bytes:
                    file.close()
                    rotate(self.path)
                    file = self._file = open(self.path, "ab")  # noqa: SIM115
                    file.write(b"--- (log rotated: the earlier lines are in the .1 file)\n")
                file.write(chunk)
                file.flush()
        finally:
            os.close(read_fd)
            file.close()

    def wait(self, timeout: float) -> None:
        """Wait (a little) for the reader to copy what the server wrote before it ended."""
        self._reader.join(timeout)

    def close(self) -> None:
        """Close graphchat's copy of the write end (the reader ends once the server's is closed)."""
        try:
            self.stream.close()
        except OSError:
            pass


class RepeatFilter(logging.Filter):
    """Lets the first few records of one kind through, then counts the rest and writes a
    count every REPEAT_SUMMARY_S seconds. Repeats lose their traceback (the first one has it)."""

    def __init__(self, kept: int = REPEATS_KEPT, every_s: float = REPEAT_SUMMARY_S) -> None:
        super().__init__()
        self.kept = kept
        self.every_s = every_s
        self.seen: dict[tuple[str, str], int] = {}
        self.suppressed: dict[tuple[str, str], int] = {}
        self.last_summary: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        with self._lock:
            count = self.seen.get(key, 0) + 1
            self.seen[key] = count
            if count == 1:
                return True
            if count <= self.kept:
                record.exc_info = None
                record.exc_text = None
                return True
            self.suppressed[key] = self.suppressed.get(key, 0) + 1
            now = time.monotonic()
            if now - self.last_summary.setdefault(key, now) < self.every_s:
                return False
            self.last_summary[key] = now
            skipped, self.suppressed[key] = self.suppressed[key], 0
        record.exc_info = None
        record.exc_text = None
        record.msg = f"{record.msg} (repeated; {skipped:,} like it since the last line like this)"
        record.args = ()
        return True

    def pending(self) -> list[str]:
        """Counts of the complaints suppressed since their last summary (written at close)."""
        with self._lock:
            out = [
                f"{name} {msg} (repeated; {n:,} more like it)"
                for (name, msg), n in self.suppressed.items()
                if n
            ]
            self.suppressed.clear()
        return out


class _SdkLog(logging.handlers.RotatingFileHandler):
    """client.log: rotated; at close, the counts of the complaints not written yet."""

    def close(self) -> None:
        for flt in self.filters:
            if isinstance(flt, RepeatFilter):
                for line in flt.pending():
                    try:
                        if self.stream is None:
                            self.stream = self._open()
                        self.stream.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
                    except (OSError, ValueError):
                        pass
        super().close()


def sdk_log_handler(log_dir: Path) -> logging.Handler:
    """The handler of the MCP SDK's own log lines: client.log, capped, rotated, de-duplicated
    (GRAPHCHAT_STORAGE=memory: none, no file)."""
    if memory_storage():
        return logging.NullHandler()
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = _SdkLog(
            log_dir / "client.log", maxBytes=LOG_MAX_BYTES, backupCount=1, encoding="utf-8", delay=True
        )
        handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    except OSError:
        return logging.NullHandler()
    handler.addFilter(RepeatFilter())
    return handler
