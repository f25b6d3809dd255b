"""The in-process tier: the real CLI entry point, run inside the test process.

`run_cli(argv)` is what `python -m graphchat ARGV` does, minus the process: the real argument
parsing (`graphchat.cli.main.main`), the real host, the real catalog with its real MCP servers
(still processes of their own), litellm's real HTTP path against the scripted server. litellm
is imported once per test process instead of once per command (6-7 s each on the 2-core
machine). It returns what the process runner returns, a `CompletedProcess[str]`, so a test
reads `.returncode`, `.stdout` and `.stderr` the same way in both tiers.

Around each run it sets and then restores what a process would have had fresh: the
environment (`clean_env`), the working directory, `sys.argv`, stdin (the given text, never a
terminal), stdout and stderr (captured, never terminals), the signal handlers `main` installs,
the logging handlers and levels, and the process-wide state the product keeps (warn-once sets, the plan cache, the workspace
that failed writes are named against, where the MCP SDK's logs go, a signal already received).

What it cannot show is left to the process tier (`graphchat` fixture, `tests/process_support`
helpers): signals, exit codes as a process sees them, stdout purity at the file-descriptor
level, the pty, the warm helper, start-up budgets.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import traceback
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

from tests.conftest import clean_env

# The loggers the product routes to a workspace's log file on first use (catalog.mcp_connection).
_ROUTED_LOGGERS = ("mcp", "httpx2", "httpx")
_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)


class _CliTimeout(BaseException):
    """The run took longer than its timeout (a BaseException: the product's `except Exception`
    must not turn it into an exit code)."""


def _capture() -> io.TextIOWrapper:
    # what a child's stdout/stderr is on a pipe under C.UTF-8: utf-8, surrogateescape, no tty
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape", write_through=True)


def _captured(stream: io.TextIOWrapper) -> str:
    stream.flush()
    raw = stream.buffer.getvalue()  # type: ignore[attr-defined]
    text = raw.decode("utf-8", "surrogateescape")
    return text.replace("\r\n", "\n").replace("\r", "\n")  # what subprocess's text mode reads


def _reset_process_state() -> None:
    """What a fresh process starts with, for the product's process-wide state."""
    if (store := sys.modules.get("graphchat.threads.store")) is not None:
        store._warned.clear()
    if (fsutil := sys.modules.get("graphchat.fsutil")) is not None:
        fsutil._workspace = None
    if (discovery := sys.modules.get("graphchat.plans.discovery")) is not None:
        discovery._cache.clear()
    if (interrupts := sys.modules.get("graphchat.interrupts")) is not None:
        interrupts._received.clear()
    if (connection := sys.modules.get("graphchat.catalog.mcp.connection")) is not None:
        connection._sdk_logs_routed = False


def _logger_levels() -> dict[str, int]:
    loggers = logging.Logger.manager.loggerDict.items()
    levels = {name: logger.level for name, logger in loggers if isinstance(logger, logging.Logger)}
    levels[""] = logging.getLogger().level
    return levels


def _restore_logger_levels(saved: dict[str, int]) -> None:
    """Each logger's level as before the run (NOTSET for one the run created)."""
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(logger, logging.Logger) and logger.level != saved.get(name, logging.NOTSET):
            logger.setLevel(saved.get(name, logging.NOTSET))
    logging.getLogger().setLevel(saved[""])


def _swap_environment(env: dict[str, str]) -> None:
    """Make the environment `env` without emptying it first: a variable both hold is never
    absent, even for a moment, to a thread still running from an earlier run (litellm's import
    in the background reads LITELLM_LOCAL_MODEL_COST_MAP; without it, it fetches its price list
    from the network)."""
    for name in [name for name in os.environ if name not in env]:
        del os.environ[name]
    os.environ.update(env)


@contextmanager
def _isolated(env: dict[str, str], cwd: Path, argv: Sequence[str], stdin: bytes) -> Iterator[tuple[Any, Any]]:
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv = sys.argv
    saved_streams = (sys.stdin, sys.stdout, sys.stderr)
    saved_signals = {signum: signal.getsignal(signum) for signum in _SIGNALS}
    saved_loggers = {
        name: (list(logging.getLogger(name).handlers), logging.getLogger(name).propagate)
        for name in _ROUTED_LOGGERS
    }
    root = logging.getLogger()
    saved_root = list(root.handlers)
    saved_levels = _logger_levels()  # -v and GRAPHCHAT_LOG set the root's and targets' levels
    out, err = _capture(), _capture()
    _reset_process_state()
    # a fresh process has no root handler (pytest's would swallow what `logging.lastResort`
    # writes to stderr) and shows warnings on stderr (pytest's recorder would keep them)
    root.handlers[:] = []
    for name in _ROUTED_LOGGERS:  # routed afresh to this run's workspace
        logging.getLogger(name).handlers[:] = []
        logging.getLogger(name).propagate = True
    caught = warnings.catch_warnings()
    caught.__enter__()
    warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
    _swap_environment(env)
    os.chdir(cwd)
    sys.argv = ["graphchat", *argv]
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8", errors="surrogateescape")
    sys.stdout, sys.stderr = out, err
    try:
        yield out, err
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        caught.__exit__(None, None, None)
        root.handlers[:] = saved_root
        _restore_logger_levels(saved_levels)
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        sys.argv = saved_argv
        os.chdir(saved_cwd)
        _swap_environment(saved_env)
        for signum, handler in saved_signals.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        for name, (handlers, propagate) in saved_loggers.items():
            logger = logging.getLogger(name)
            for handler in logger.handlers:
                if handler not in handlers:
                    handler.close()  # the run's log file says its last lines, as at exit
            logger.handlers[:] = handlers
            logger.propagate = propagate
        _reset_process_state()


def run_cli(
    argv: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    input: str | bytes | None = None,
    cwd: Path | None = None,
    home: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run `graphchat ARGV` in this process: its exit code, stdout and stderr.

    `env` is added to the clean environment a test's graphchat runs in (`clean_env`, with
    `XDG_DATA_HOME` under `home` when given); `input` is stdin (empty when None; text or
    bytes, a pipe's content, never a terminal); `cwd` the working directory (the current one when None). A
    run longer than `timeout` raises `subprocess.TimeoutExpired`, as the process runner does.
    """
    from graphchat.cli.main import main

    args = list(argv)
    environment = clean_env(env, home)
    # what a process has from the moment `graphchat.cli.main` is imported (clean_env drops LITELLM_*)
    environment.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    where = cwd if cwd is not None else Path.cwd()

    def expire(signum: int, frame: FrameType | None) -> None:
        raise _CliTimeout

    stdin = input.encode("utf-8") if isinstance(input, str) else (input or b"")
    with _isolated(environment, where, args, stdin) as (out, err):
        signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            code = main(args)
        except SystemExit as exc:  # argparse: --help, --version, usage errors
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                err.write(f"{exc.code}\n")
                code = 1
        except _CliTimeout:
            raise subprocess.TimeoutExpired(
                ["graphchat", *args], timeout, _captured(out), _captured(err)
            ) from None
        except Exception:  # what an uncaught exception does to a process: a traceback, exit 1
            traceback.print_exc(file=err)
            code = 1
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return subprocess.CompletedProcess(["graphchat", *args], code, _captured(out), _captured(err))
