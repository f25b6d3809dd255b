"""What a person sees: text from a model, a tool or a thread made safe for a terminal.

One function, `safe`, for everything shown to a person (activity lines, answers on a terminal,
approvals, questions, `threads show/export`, `tools list/show`, `mcp list`): control characters
that a terminal would act on — C0 except newline and tab, DEL, C1, ESC, and the bidirectional
overrides that reorder what is shown — are written out as visible escapes (`\\x1b`, `\\u202e`),
so a hostile string can neither move the cursor, retitle the window, write the clipboard
(OSC 52) nor fake an activity line. The deliverable on a pipe is not passed through it.
"""

from __future__ import annotations

import re
from typing import Any

# C0 but tab and newline, DEL, C1; bidi embeddings/overrides/isolates; line/paragraph separators.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_OR_NEWLINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\n":
        return "\\n"
    if char == "\t":
        return "\\t"
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe(text: Any, *, newlines: bool = True) -> str:
    """`text` with every control character written as a visible escape. `newlines=False` also
    escapes newline and tab: for text that must stay on one line (a name, an activity line)."""
    if not isinstance(text, str):
        text = str(text)
    pattern = _CONTROL if newlines else _CONTROL_OR_NEWLINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)


def has_control(text: str) -> bool:
    """True when `safe` would change `text` (newlines and tabs allowed)."""
    return _CONTROL.search(text) is not None
