"""Typed template errors.

Callers treat the kinds differently: `MissingStep` and `BadPath` are plan defects,
`EmptyData` means the data ran out ("nothing found"), `TemplateSyntaxError` is a load-time
problem. Every message names the step (when known) and the offending path or tag.
"""

from __future__ import annotations

from typing import Any


class TemplateError(Exception):
    """Base of every template failure.

    `step` may be filled in after the fact (the renderer does it when the caller passes
    `step=`), so the message is built lazily in `__str__`.
    """

    def __init__(self, detail: str, *, step: str | None = None, path: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.step = step
        self.path = path

    def __str__(self) -> str:
        parts = []
        if self.step:
            parts.append(f"step {self.step}")
        if self.path is not None:
            parts.append("{{" + self.path + "}}")
        parts.append(self.detail)
        return ": ".join(parts)

    def __reduce__(self) -> tuple[Any, ...]:
        # Keyword-only attributes would otherwise be lost when pickled (e.g. across processes).
        return (self.__class__, (self.detail,), dict(self.__dict__))


class TemplateSyntaxError(TemplateError):
    """The template text itself is malformed or uses unsupported syntax (found at load time)."""


class MissingStep(TemplateError):
    """The path's root is neither an input nor a step that has a result."""

    def __init__(
        self,
        detail: str,
        *,
        step: str | None = None,
        path: str | None = None,
        root: str | None = None,
    ) -> None:
        super().__init__(detail, step=step, path=path)
        self.root = root


class BadPath(TemplateError):
    """The data exists but the path walks off it (unknown key, wrong type)."""

    def __init__(
        self,
        detail: str,
        *,
        step: str | None = None,
        path: str | None = None,
        available: list[str] | None = None,
    ) -> None:
        super().__init__(detail, step=step, path=path)
        self.available = available or []


class EmptyData(TemplateError):
    """The path is plausible but the data ran out: empty array, index out of range, null."""
