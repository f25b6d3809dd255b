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
CODE_THEME = "monokai"


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


class MarkdownStream:
    """Streamed markdown printed on a terminal as it arrives, one finished block at a time:
    what ends up on the screen is exactly the whole text rendered at once (`ask` on a terminal
    renders as the chat does; on a pipe the text is written as it is)."""

    def __init__(self, stream: Any) -> None:
        from rich.console import Console

        self.console = Console(file=stream, highlight=False, soft_wrap=False)
        self.pending = ""  # text of a block not finished yet
        self.segment = ""  # finished text since the last `end()`
        self.printed = 0  # rendered lines of `segment` already printed

    def write(self, text: str) -> None:
        self.pending += text
        stable, tail = split_stable(self.pending)
        if stable:
            self.pending = tail
            self.segment += stable
            if stable.strip():
                self._print()

    def end(self) -> None:
        """Print what is pending (before a tool line, at the end of the answer); the next text
        starts a new segment."""
        pending, self.pending = self.pending, ""
        if pending.strip():
            self.segment += pending
            self._print()
        self.segment, self.printed = "", 0

    def _print(self) -> None:
        from rich.markdown import Markdown

        lines = self.console.render_lines(
            Markdown(self.segment.strip("\n"), code_theme=CODE_THEME), self.console.options, pad=False
        )
        fresh, self.printed = lines[self.printed :], len(lines)
        if fresh:
            self.console.print(Segments(fresh))


class Segments:
    """Rendered lines, printed as they are, each ending its line."""

    def __init__(self, lines: list[Any]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        for line in self.lines:
            yield from _without_trailing_blanks(list(line))
            yield Segment.line()


def _without_trailing_blanks(line: list[Any]) -> list[Any]:
    """A rendered line without the blanks that pad it to the width (a terminal copies them
    along with the text); padding with a background colour (a code block) stays."""
    from rich.segment import Segment

    while line and not line[-1].control and not line[-1].text.strip():
        style = line[-1].style
        if style is not None and style.bgcolor is not None:
            return line
        line.pop()
    if line and not line[-1].control:
        last = line[-1]
        if last.style is None or last.style.bgcolor is None:
            line[-1] = Segment(last.text.rstrip(), last.style, last.control)
    return line
