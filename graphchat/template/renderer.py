"""Render parsed templates against a scope (root name -> JSON value).

Resolution rules (compatible with the reference product):

- A path whose first segment is a root present in the scope is *root-anchored* and strict,
  wherever it appears: failures raise `BadPath` / `EmptyData`.
- Outside any section, a path whose root is not in the scope raises `MissingStep`.
- Inside a section, a path whose first segment is not a scope root is read from the section
  items, innermost first, falling back outward; when no item has it, it renders empty (list
  items legitimately omit optional fields). Scope roots win over item keys of the same name.
- Section tests are conditionals, never data errors: a root-anchored section path that walks
  off the data, into null or past the end is simply falsy. Only an unknown root outside any
  section raises (`MissingStep`) — `{{^E0.optional}}…{{/E0.optional}}` works, `{{#E9.x}}` with
  no E9 is a defect.
- Falsy: missing, null, false, [], "". Everything else (0, {}, "0") is truthy. An array
  iterates (with @index/@first/@last), an object becomes the context, a scalar renders once.
- Typed splice: a string that is exactly one value tag returns the raw JSON value. The value
  is *not copied*: it shares structure with the scope, so treat it as read-only.
- Mixed text (inputs, prompts, questions, messages alike): strings bare, true/false, numbers
  as JSON, null as nothing, objects and arrays as pretty-printed JSON (two-space indent, keys
  sorted) — the reference product's `serde_json::to_string_pretty` over sorted maps.
- `.length` is the length of an array or a string; of anything else (null, an object — even
  one with a `length` key) it is `BadPath`. A numeric segment indexes an array; on an object
  it is `BadPath`, never a key lookup.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from graphchat.jsontype import json_type
from graphchat.template.errors import BadPath, EmptyData, MissingStep, TemplateError
from graphchat.template.parser import AT_FIRST, AT_INDEX, DATA, Node, Path, Section, parse

try:  # orjson is a dependency; keep a stdlib fallback for values it refuses (huge ints).
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None  # type: ignore[assignment]

_MISS = object()  # sentinel: the walk went nowhere
_PRETTY = _orjson.OPT_INDENT_2 | _orjson.OPT_SORT_KEYS if _orjson is not None else 0
_MAX_KEYS = 12


def render_value(value: Any, scope: Mapping[str, Any], *, step: str | None = None) -> Any:
    """Render every string anywhere in a JSON tree; other values are returned as they are."""
    try:
        return _render_any(value, scope)
    except TemplateError as err:
        if err.step is None:
            err.step = step
        raise


def render_string(text: str, scope: Mapping[str, Any], *, step: str | None = None) -> Any:
    """Render one template string (typed splice applies)."""
    return render_value(text, scope, step=step)


def render_text(text: str, scope: Mapping[str, Any], *, step: str | None = None) -> str:
    """Render one template string always to text (no typed splice): for prompts and messages."""
    try:
        tpl = parse(text)
        if tpl.splice is not None:
            return to_text(_resolve_root(tpl.splice, scope))
        out: list[str] = []
        _render_nodes(tpl.nodes, scope, [], [], out)
        return "".join(out)
    except TemplateError as err:
        if err.step is None:
            err.step = step
        raise


def to_text(value: Any) -> str:
    """How a value appears inside mixed text."""
    t = type(value)
    if t is str:
        return value  # type: ignore[no-any-return]
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if t is int:
        return str(value)
    if _orjson is not None:
        if t is float:
            return _orjson.dumps(value).decode()  # shortest round-trip form, as serde_json
        try:
            return _orjson.dumps(value, option=_PRETTY).decode()
        except TypeError:
            pass
    if t is float:
        return json.dumps(value)
    try:
        return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    except TypeError:  # keys of mixed types cannot be sorted
        return json.dumps(value, ensure_ascii=False, indent=2, default=str)


# --- tree walk ---------------------------------------------------------------------------


def _render_any(value: Any, scope: Mapping[str, Any]) -> Any:
    t = type(value)
    if t is str:
        return _render_str(value, scope) if "{{" in value else value
    if t is dict:
        return {k: _render_any(v, scope) for k, v in value.items()}
    if t is list:
        return [_render_any(v, scope) for v in value]
    if isinstance(value, Mapping):
        return {k: _render_any(v, scope) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_render_any(v, scope) for v in value]
    if isinstance(value, str):
        return _render_str(str(value), scope) if "{{" in value else value
    return value


def _render_str(text: str, scope: Mapping[str, Any]) -> Any:
    tpl = parse(text)
    if tpl.splice is not None:
        return _resolve_root(tpl.splice, scope)
    out: list[str] = []
    _render_nodes(tpl.nodes, scope, [], [], out)
    return "".join(out)


# --- node rendering ----------------------------------------------------------------------


def _render_nodes(
    nodes: tuple[Node, ...],
    scope: Mapping[str, Any],
    contexts: list[Any],
    loops: list[list[int]],
    out: list[str],
) -> None:
    for node in nodes:
        t = type(node)
        if t is str:
            out.append(node)  # type: ignore[arg-type]
        elif t is Path:
            value = _lookup(node, scope, contexts, loops, strict=True)  # type: ignore[arg-type]
            if value is not _MISS:
                out.append(to_text(value))
        else:
            _render_section(node, scope, contexts, loops, out)  # type: ignore[arg-type]


def _render_section(
    section: Section,
    scope: Mapping[str, Any],
    contexts: list[Any],
    loops: list[list[int]],
    out: list[str],
) -> None:
    value = _lookup(section.path, scope, contexts, loops, strict=False)
    truthy = not (
        value is _MISS
        or value is None
        or value is False
        or (not value and isinstance(value, (str, list, tuple)))
    )
    if section.inverted:
        if not truthy:
            _render_nodes(section.body, scope, contexts, loops, out)
        return
    if not truthy:
        return
    if isinstance(value, (list, tuple)):
        meta = [0, len(value)]
        loops.append(meta)
        contexts.append(None)
        for i, item in enumerate(value):
            meta[0] = i
            contexts[-1] = item
            _render_nodes(section.body, scope, contexts, loops, out)
        contexts.pop()
        loops.pop()
    elif isinstance(value, Mapping):
        contexts.append(value)
        _render_nodes(section.body, scope, contexts, loops, out)
        contexts.pop()
    else:
        _render_nodes(section.body, scope, contexts, loops, out)


def _lookup(
    path: Path, scope: Mapping[str, Any], contexts: list[Any], loops: list[list[int]], *, strict: bool
) -> Any:
    """Resolve a tag. `strict` (value tags) raises on root-anchored failures; section tests
    (`strict=False`) turn them into falsy. Returns `_MISS` for "nothing here"."""
    if path.kind != DATA:
        if not loops:
            raise BadPath(f"{path.text} is only available inside a section over an array", path=path.text)
        index, size = loops[-1]
        if path.kind == AT_INDEX:
            return index
        if path.kind == AT_FIRST:
            return index == 0
        return index == size - 1
    root = path.segs[0]
    if root in scope:
        value = _walk(scope[root], path, 1)
        if value is _MISS and strict:
            _diagnose(scope[root], path, 1)
        return value
    if contexts:
        for ctx in reversed(contexts):
            value = _walk(ctx, path, 0)
            if value is not _MISS:
                return value
        return _MISS
    raise _missing(path, scope)


def _resolve_root(path: Path, scope: Mapping[str, Any]) -> Any:
    """Strict resolution of a root-anchored path (typed splice, values outside sections)."""
    root = path.segs[0]
    try:
        start = scope[root]
    except KeyError:
        raise _missing(path, scope) from None
    value = _walk(start, path, 1)
    if value is _MISS:
        _diagnose(start, path, 1)
    return value


def _walk(cur: Any, path: Path, start: int) -> Any:
    """Fast walk: no exceptions, no messages; `_MISS` on any failure."""
    keys = path.keys  # an index segment's key is NO_KEY: it never reads an object
    for i in range(start, path.nwalk):
        t = type(cur)
        if t is dict:
            cur = cur.get(keys[i], _MISS)
            if cur is _MISS:
                return _MISS
        elif t is list or t is tuple:
            j = path.idx[i]
            if j is None or j >= len(cur):
                return _MISS
            cur = cur[j]
        elif isinstance(cur, Mapping):
            cur = cur.get(keys[i], _MISS)
            if cur is _MISS:
                return _MISS
        else:
            return _MISS
    if path.length:
        if isinstance(cur, (list, tuple, str)):
            return len(cur)
        return _MISS  # null and objects (even with a `length` key) have no length
    return cur


def _diagnose(cur: Any, path: Path, start: int) -> None:
    """Re-walk a failed path to raise the precise typed error."""
    segs = path.segs
    text = path.text
    for i in range(start, path.nwalk):
        at = ".".join(segs[:i])
        seg = segs[i]
        if isinstance(cur, Mapping):
            if path.idx[i] is not None:
                raise BadPath(
                    f"cannot index into an object at {at} ({seg!r} is an index; objects are read by key)",
                    path=text,
                )
            if seg not in cur:
                keys = sorted(str(k) for k in cur.keys())[:_MAX_KEYS]
                more = ", …" if len(cur) > _MAX_KEYS else ""
                listing = ", ".join(keys) + more if keys else "none — it is an empty object"
                raise BadPath(f"no key {seg!r} at {at} (available: {listing})", path=text, available=keys)
            cur = cur[seg]
        elif isinstance(cur, (list, tuple)):
            j = path.idx[i]
            if j is None:
                raise BadPath(f"{at} is an array of {len(cur)} items; {seg!r} is not an index", path=text)
            if j >= len(cur):
                if not cur:
                    raise EmptyData(f"{at} is an empty array", path=text)
                raise EmptyData(f"{at} has {len(cur)} items; index {j} is out of range", path=text)
            cur = cur[j]
        elif cur is None:
            raise EmptyData(f"{at} is null", path=text)
        else:
            raise BadPath(f"cannot read {seg!r} from {json_kind(cur)} at {at}", path=text)
    if path.length:
        at = ".".join(segs[: path.nwalk])
        raise BadPath(f".length applies to arrays and strings; {at} is {json_kind(cur)}", path=text)
    raise BadPath("path does not resolve", path=text)  # pragma: no cover - walk and diagnose agree


def _missing(path: Path, scope: Mapping[str, Any]) -> MissingStep:
    root = path.segs[0]
    names = [str(k) for k in list(scope.keys())[:_MAX_KEYS]]
    more = ", …" if len(scope) > _MAX_KEYS else ""
    listing = ", ".join(names) + more if names else "none"
    return MissingStep(
        f"unknown root {root!r}: no input or step result by that name yet (available: {listing})",
        path=path.text,
        root=root,
    )


_KIND = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "a number",
    "number": "a number",
    "string": "a string",
    "array": "an array",
    "object": "an object",
}


def json_kind(value: Any) -> str:
    """`a number`, `an array`, … — what a JSON value is, for error messages."""
    return _KIND.get(json_type(value) or "") or type(value).__name__


# --- introspection -----------------------------------------------------------------------


def references(value: Any) -> set[str]:
    """Root names that every template in a JSON tree certainly reads.

    These are the first segments of every path outside any section (section names included):
    they are resolved strictly against the scope, so an unknown one is a `MissingStep` at
    run time — the loader reports it (and forward references) at load time. Paths inside a
    section are left out: a bare name there reads the section item, and a dotted one is a root
    only when such a root exists (see `section_references`). Raises `TemplateSyntaxError`.
    """
    found: set[str] = set()
    for text, _ in _strings(value, ""):
        found |= parse(text).roots
    return found


def section_references(value: Any) -> set[str]:
    """First segments of dotted paths inside sections: possibly roots, possibly item keys.

    The reference product's validator treats these as roots for step inputs; a loader may use
    them to flag a forward reference to a later step id. Raises `TemplateSyntaxError`."""
    found: set[str] = set()
    for text, _ in _strings(value, ""):
        found |= parse(text).section_roots
    return found


def check_syntax(value: Any) -> list[str]:
    """Every template syntax problem in a JSON tree, as messages (`<where>: <problem>`)."""
    problems: list[str] = []
    for text, where in _strings(value, ""):
        try:
            parse(text)
        except TemplateError as err:
            problems.append(f"{where}: {err}" if where else str(err))
    return problems


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    """(template string, dotted location) for every string holding `{{` in a JSON tree."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        cur, loc = stack.pop()
        if isinstance(cur, str):
            if "{{" in cur:
                found.append((cur, loc))
        elif isinstance(cur, Mapping):
            for k, v in reversed(list(cur.items())):
                stack.append((v, f"{loc}.{k}" if loc else str(k)))
        elif isinstance(cur, (list, tuple)):
            for i in range(len(cur) - 1, -1, -1):
                stack.append((cur[i], f"{loc}.{i}" if loc else str(i)))
    return found
