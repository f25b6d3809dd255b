"""Parse the plan template dialect into an immutable node tree.

Grammar (logic-less, strict, no escape for literal braces):

- `{{path}}` a value; whitespace around the path inside the braces is ignored.
- `{{#path}}…{{/path}}` a section, `{{^path}}…{{/path}}` an inverted section.
- `{{@index}}`, `{{@first}}`, `{{@last}}` (also as section names) only inside a section.
- path: dot-separated segments holding any character but `.` (`{{E0.first name}}`,
  `{{E0.a(b)}}`, as the reference product); an all-ASCII-digit segment indexes an array
  (never an object's key); `length` only as the last segment, and it is always the length
  pseudo-key (never an object's key). Outside sections a path must start with a root name
  (not a digit, not `length`); inside a section `{{length}}`/`{{0}}` read the current item.

Everything else — partials, comments, blocks, parents, delimiter changes, unescaped tags,
empty segments, `@` inside a path — is a `TemplateSyntaxError`.

Parsed templates are cached: the executor renders the same strings thousands of times.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from graphchat.template.errors import TemplateSyntaxError

# Path kinds.
DATA = 0
AT_INDEX = 1
AT_FIRST = 2
AT_LAST = 3
_LOOP_VARS = {"@index": AT_INDEX, "@first": AT_FIRST, "@last": AT_LAST}


class _NoKey:
    """Stands in the key slot of an index segment: no JSON object has it as a key, so a numeric
    segment never reads an object (`dict.get` misses) at no cost on the hot path."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<index segment>"


NO_KEY = _NoKey()

_SIGIL_NAMES = {
    ">": "partials",
    "!": "comments",
    "<": "parent templates",
    "$": "blocks",
    "=": "delimiter changes",
    "&": "unescaped tags",
    "{": "triple-brace (unescaped) tags",
}


@dataclass(frozen=True, slots=True)
class Path:
    """A parsed path. `segs` are the raw segments; `idx[i]` is the int of an all-digit one;
    `keys[i]` is the segment as an object key (`NO_KEY` for an index segment)."""

    text: str
    kind: int
    segs: tuple[str, ...] = ()
    idx: tuple[int | None, ...] = ()
    keys: tuple[object, ...] = ()
    nwalk: int = 0  # segments to walk (all but a trailing `length`)
    length: bool = False  # last segment is `length`

    @property
    def root(self) -> str:
        return self.segs[0] if self.segs else self.text


@dataclass(frozen=True, slots=True)
class Section:
    path: Path
    inverted: bool
    body: tuple[Node, ...]


# A node is literal text, a value tag, or a section.
Node = str | Path | Section


@dataclass(frozen=True, slots=True)
class Template:
    source: str
    nodes: tuple[Node, ...]
    # Set when the whole string is exactly one value tag: the typed-splice case.
    splice: Path | None = None
    # Root names that are certainly roots (see `renderer.references`).
    roots: frozenset[str] = field(default_factory=frozenset)
    # First segments of dotted paths inside sections: roots when such a root exists at render
    # time, otherwise read relative to the section item.
    section_roots: frozenset[str] = field(default_factory=frozenset)


def _error(tag: str, reason: str, source: str) -> TemplateSyntaxError:
    where = "" if source.strip() == "{{" + tag + "}}" else f" (in {_clip(source)!r})"
    return TemplateSyntaxError(reason + where, path=tag)


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def parse_path(raw: str, *, in_section: bool, source: str = "", tag: str | None = None) -> Path:
    """Parse one path (already stripped of sigil and surrounding whitespace)."""
    tag = raw if tag is None else tag
    if not raw:
        raise _error(tag, "empty tag: a path is required", source)
    kind = _LOOP_VARS.get(raw)
    if kind is not None:
        if not in_section:
            raise _error(tag, f"{raw} is only available inside a section over an array", source)
        return Path(text=raw, kind=kind)
    segs = tuple(raw.split("."))
    if "" in segs:
        raise _error(tag, f"empty segment in path {raw!r} (a stray '.')", source)
    for seg in segs:
        if seg.startswith("@"):
            raise _error(tag, f"loop variable {seg} cannot be part of a dotted path", source)
    if "length" in segs[:-1]:
        raise _error(tag, "`length` can only be the last segment of a path", source)
    if not in_section and (segs[0] == "length" or _is_index(segs[0])):
        raise _error(tag, "a path must start with a root name (input, a step id, …)", source)
    length = segs[-1] == "length"
    idx = tuple(int(s) if _is_index(s) else None for s in segs)
    return Path(
        text=raw,
        kind=DATA,
        segs=segs,
        idx=idx,
        keys=tuple(NO_KEY if i is not None else s for s, i in zip(segs, idx, strict=True)),
        nwalk=len(segs) - 1 if length else len(segs),
        length=length,
    )


def _is_index(seg: str) -> bool:
    return seg.isascii() and seg.isdigit()


@functools.lru_cache(maxsize=8192)
def parse(text: str) -> Template:
    """Parse a template string; raises `TemplateSyntaxError`. Results are cached."""
    # Each frame: (opening tag name, path, inverted, collected nodes).
    stack: list[tuple[str, Path | None, bool, list[Node]]] = [("", None, False, [])]
    roots: set[str] = set()
    section_roots: set[str] = set()
    pos = 0
    n = len(text)
    while pos < n:
        open_at = text.find("{{", pos)
        if open_at < 0:
            stack[-1][3].append(text[pos:])
            break
        if open_at > pos:
            stack[-1][3].append(text[pos:open_at])
        close_at = text.find("}}", open_at + 2)
        if close_at < 0:
            raise TemplateSyntaxError(f"unclosed '{{{{' (in {_clip(text)!r})", path=None)
        raw = text[open_at + 2 : close_at].strip()
        pos = close_at + 2
        in_section = len(stack) > 1
        if not raw:
            raise _error(raw, "empty tag: a path is required", text)
        sigil = raw[0]
        if sigil in _SIGIL_NAMES:
            raise _error(raw, f"{_SIGIL_NAMES[sigil]} are not part of the template language", text)
        if sigil in "#^":
            name = raw[1:].strip()
            path = parse_path(name, in_section=in_section, source=text, tag=raw)
            _note_root(path, in_section, roots, section_roots)
            stack.append((name, path, sigil == "^", []))
        elif sigil == "/":
            name = raw[1:].strip()
            if len(stack) == 1:
                raise _error(raw, f"closing tag for {name!r} without an open section", text)
            open_name, open_path, inverted, body = stack.pop()
            if open_name != name:
                raise _error(raw, f"section mismatch: opened {open_name!r} but closed {name!r}", text)
            assert open_path is not None
            stack[-1][3].append(Section(open_path, inverted, tuple(body)))
        else:
            path = parse_path(raw, in_section=in_section, source=text)
            _note_root(path, in_section, roots, section_roots)
            stack[-1][3].append(path)
    if len(stack) > 1:
        names = ", ".join(repr(frame[0]) for frame in stack[1:])
        raise TemplateSyntaxError(
            f"unclosed section {names} (in {_clip(text)!r})",
            path=("^" if stack[-1][2] else "#") + stack[-1][0],
        )
    nodes = tuple(stack[0][3])
    splice = None
    if len(nodes) == 1 and isinstance(nodes[0], Path) and nodes[0].kind == DATA:
        splice = nodes[0]
    return Template(text, nodes, splice, frozenset(roots), frozenset(section_roots))


def _note_root(path: Path, in_section: bool, roots: set[str], section_roots: set[str]) -> None:
    if path.kind != DATA:
        return
    if not in_section:
        roots.add(path.segs[0])
    elif len(path.segs) > 1 and not _is_index(path.segs[0]) and path.segs[0] != "length":
        section_roots.add(path.segs[0])
