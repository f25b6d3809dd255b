"""Streaming markdown without flicker or duplicated scrollback.

Why this approach: re-rendering a whole growing answer in a live region makes the region taller
than the screen, and terminals then push half-drawn frames into the scrollback (the classic
duplicated-lines bug). Instead the answer is cut into *stable* markdown blocks — everything up to
the last blank line outside a code fence can no longer change — and each stable block is printed
once, for good. Only the block still being written lives in a small transient region, cropped
to the screen, which disappears when the block is printed.
"""

from __future__ import annotations

from typing import Any

FENCES = ("```", "~~~")


def split_stable(text: str) -> tuple[str, str]:
    """Split streamed markdown into (finished blocks, tail still growing).

    A block is finished once a blank line follows it outside a fenced code block; a closed
    fence followed by a newline is finished too.
    """
    cut = 0
    pos = 0
    fence: str | None = None
    for line in text.splitlines(keepends=True):
        pos += len(line)
        if not line.endswith("\n"):
            break  # the last, unfinished line never decides anything
        stripped = line.strip()
        indent = len(line) - len(line.lstrip(" "))
        if indent < 4 and stripped.startswith(FENCES):
            marker = stripped[:3]
            if fence is None:
                fence = marker
            elif marker == fence and stripped.strip("`~") == "":
                fence = None
                cut = pos
            continue
        if fence is None and stripped == "":
            cut = pos
    return text[:cut], text[cut:]


class TailView:
    """A rich renderable: the markdown of the growing tail, cropped to its last `max_lines`,
    with optional status lines (running tools) below it."""

    def __init__(
        self, markdown: str, status: list[Any], max_lines: int, code_theme: str = "monokai", gap: bool = False
    ) -> None:
        self.markdown = markdown
        self.gap = gap  # a blank line first, as between two markdown blocks
        self.status = status
        self.max_lines = max(1, max_lines)
        self.code_theme = code_theme

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.markdown import Markdown
        from rich.segment import Segment

        budget = self.max_lines - len(self.status)
        if self.markdown.strip() and budget > 0:
            lines = console.render_lines(
                Markdown(self.markdown, code_theme=self.code_theme), options, pad=False
            )
            while lines and not any(seg.text.strip() for seg in lines[-1]):
                lines.pop()  # rich ends blocks with a blank line; not while streaming
            if self.gap:
                lines.insert(0, [])
            for line in lines[-budget:]:
                yield from line
                yield Segment.line()
        yield from self.status
