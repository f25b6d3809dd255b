"""Errors a user can cause or fix, and the exit codes of docs/cli.md."""

from __future__ import annotations

from collections.abc import Iterable

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


def close_matches(word: str, names: Iterable[str]) -> list[str]:
    """Up to three known names close to `word` (difflib, cutoff 0.6); nothing is corrected."""
    import difflib

    return difflib.get_close_matches(word, list(dict.fromkeys(names)), n=3, cutoff=0.6)


def did_you_mean(word: str, names: Iterable[str], *, close: list[str] | None = None) -> str:
    """`did you mean a, b or c?` for the names close to `word`; empty when none is."""
    found = close if close is not None else close_matches(word, names)
    if not found:
        return ""
    listed = found[0] if len(found) == 1 else f"{', '.join(found[:-1])} or {found[-1]}"
    return f"did you mean {listed}?"
