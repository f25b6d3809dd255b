"""Errors a user can cause or fix, and the exit codes of docs/cli.md."""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INPUT_NEEDED = 3
EXIT_PLAN_ERROR_EXIT = 4
EXIT_WAITING = 5  # parked: the run waits for a person (`graphchat requests`, issue 9)
EXIT_INTERRUPTED = 130


class GraphchatError(Exception):
    """A clear one-line failure shown as `error: <message>` (plus an optional hint line).

    Raised anywhere below the CLI; `cli.main` turns it into the exit code, never a traceback.
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code
        self.hint = hint


class ConfigError(GraphchatError):
    """A bad settings file or a missing setting: exit 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message, EXIT_USAGE, hint)
