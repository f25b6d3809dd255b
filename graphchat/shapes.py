"""The shape cache: a learned, merged JSON schema and a small example of each tool's output.

Our own inference rather than genson: genson visits every element, turns id-keyed dicts into
one property per key (megabyte schemas) and hits RecursionError past ~350 levels. Here large
arrays and maps are sampled, id-keyed maps collapse to `additionalProperties`, depth is bounded
(so recursion is bounded too) and a 1 MB result is recorded in a few milliseconds.

Schemas produced here use a small JSON-schema subset: `type` (string or list of scalar types),
`properties`, `required`, `additionalProperties`, `items`, and `anyOf` for mixes that involve an
object or array. `{}` means "anything" (unknown, or deeper than the depth bound).
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import re
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from graphchat.fsutil import describe_failure, is_failed_write, read_object, write_atomic
from graphchat.jsontype import json_type
from graphchat.naming import sanitize

log = logging.getLogger(__name__)

Schema = dict[str, Any]

MAX_DEPTH = 12  # value nesting levels described; deeper values get `{}`
SAMPLE_HEAD = 50  # large arrays/maps: the first 50 elements ...
SAMPLE_TOTAL = 100  # ... plus evenly spaced ones up to this many
MAP_MIN_UNIFORM = 16  # this many keys with uniform value shapes make a map
MAP_ALWAYS = 256  # objects with more keys than this are maps whatever their keys look like
EXAMPLE_BUDGET = 2048  # bytes of serialized example we aim for in a stored shape

# Keys that look like identifiers: numbers, uuids, or compact tokens with at least two digits
# ("user_123", "2024-05-01", "cus_9f8e7d").
_ID_KEY = re.compile(
    r"-?\d+(?:\.\d+)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?=(?:[^0-9]*[0-9]){2})[A-Za-z0-9_.:/-]{5,128}"
)

_TYPE_ORDER = {"null": 0, "boolean": 1, "integer": 2, "number": 3, "string": 4}


# --------------------------------------------------------------------------- inference


def _sample_indexes(n: int) -> Iterable[int]:
    """All indexes when small; else the first SAMPLE_HEAD plus evenly spaced ones after them."""
    if n <= SAMPLE_TOTAL:
        return range(n)
    rest = SAMPLE_TOTAL - SAMPLE_HEAD
    step = (n - SAMPLE_HEAD) / rest
    tail = {SAMPLE_HEAD + int(i * step) for i in range(rest)}
    tail.add(n - 1)  # the last element is often the odd one out
    return [*range(SAMPLE_HEAD), *sorted(tail)]


def _kind(value: Any) -> str:
    return json_type(value) or "unknown"


def _looks_like_map(obj: dict[Any, Any]) -> bool:
    """True for dicts used as maps (keyed by ids, or many keys with same-shaped values)."""
    n = len(obj)
    if n < 2:
        return False
    if n > MAP_ALWAYS:
        return True
    keys = list(obj)
    if all(isinstance(k, str) and _ID_KEY.fullmatch(k) for k in keys):
        return True
    if n < MAP_MIN_UNIFORM:
        return False
    values = list(obj.values())
    kinds = {_kind(values[i]) for i in _sample_indexes(n)} - {"null"}
    if kinds == {"integer", "number"}:
        return True
    if len(kinds) != 1:
        return False
    if kinds != {"object"}:
        return True
    # Dict values: uniform when they share at least half of all the keys they use.
    common: set[Any] | None = None
    union: set[Any] = set()
    for i in _sample_indexes(n):
        v = values[i]
        if isinstance(v, dict):
            ks = set(v)
            common = ks if common is None else common & ks
            union |= ks
    return common is not None and len(common) * 2 >= len(union)


def _infer(value: Any, depth: int) -> Schema:
    if depth >= MAX_DEPTH:
        return {}
    kind = _kind(value)
    if kind == "object":
        if _looks_like_map(value):
            values = list(value.values())
            merged: Schema | None = None
            for i in _sample_indexes(len(values)):
                s = _infer(values[i], depth + 1)
                merged = s if merged is None else merge_schemas(merged, s)
            return {"type": "object", "additionalProperties": merged if merged is not None else {}}
        if not value:
            return {"type": "object"}
        props = {str(k): _infer(v, depth + 1) for k, v in value.items()}
        return {"type": "object", "properties": props, "required": list(props)}
    if kind == "array":
        items: Schema | None = None
        for i in _sample_indexes(len(value)):
            s = _infer(value[i], depth + 1)
            items = s if items is None else merge_schemas(items, s)
        return {"type": "array"} if items is None else {"type": "array", "items": items}
    if kind == "unknown":
        return {}
    return {"type": kind}


def infer_schema(value: Any) -> Schema:
    """JSON-schema-like shape of one JSON value (sampled, map-collapsed, depth-bounded)."""
    return _infer(value, 0)


# --------------------------------------------------------------------------- merging


class _Parts:
    """A schema split by JSON kind: one object branch, one array branch, a set of scalar types."""

    __slots__ = ("obj", "arr", "scalars")

    def __init__(self) -> None:
        self.obj: Schema | None = None
        self.arr: Schema | None = None
        self.scalars: set[str] = set()


def _split(schema: Any, parts: _Parts) -> bool:
    """Add `schema`'s branches to `parts`; False when it means "anything" (or is not understood)."""
    if not isinstance(schema, dict) or not schema:
        return False
    if "anyOf" in schema:
        branches = schema["anyOf"]
        if not isinstance(branches, list) or len(schema) != 1:
            return False
        return all(_split(b, parts) for b in branches)
    t = schema.get("type")
    if t is None:
        if "properties" in schema or "additionalProperties" in schema:
            t = "object"
        else:
            return False
    types = [t] if isinstance(t, str) else t
    if not isinstance(types, list):
        return False
    for one in types:
        if one == "object":
            branch = _object_body(schema)
            parts.obj = branch if parts.obj is None else _merge_object(parts.obj, branch)
        elif one == "array":
            items = schema.get("items")
            branch = (
                {"items": items} if isinstance(items, dict) else ({"items": {}} if "items" in schema else {})
            )
            parts.arr = branch if parts.arr is None else _merge_array(parts.arr, branch)
        elif isinstance(one, str):
            parts.scalars.add(one)
        else:
            return False
    return True


def _object_body(schema: Schema) -> Schema:
    """The object keywords we understand, ignoring malformed ones (declared schemas vary)."""
    body: Schema = {}
    if isinstance(schema.get("properties"), dict):
        body["properties"] = schema["properties"]
    if isinstance(schema.get("required"), list):
        body["required"] = [k for k in schema["required"] if isinstance(k, str)]
    if isinstance(schema.get("additionalProperties"), dict):
        body["additionalProperties"] = schema["additionalProperties"]
    return body


def _fold(schemas: Iterable[Schema]) -> Schema | None:
    out: Schema | None = None
    for s in schemas:
        out = s if out is None else merge_schemas(out, s)
    return out


def _merge_object(a: Schema, b: Schema) -> Schema:
    a_map = isinstance(a.get("additionalProperties"), dict)
    b_map = isinstance(b.get("additionalProperties"), dict)
    if a_map or b_map:
        # Once a map, always a map: record-shaped sightings fold into the value schema.
        va = a["additionalProperties"] if a_map else _fold(a.get("properties", {}).values())
        vb = b["additionalProperties"] if b_map else _fold(b.get("properties", {}).values())
        value = vb if va is None else va if vb is None else merge_schemas(va, vb)
        return {"additionalProperties": value if value is not None else {}}
    pa: dict[str, Schema] = a.get("properties", {})
    pb: dict[str, Schema] = b.get("properties", {})
    props = dict(pa)
    for k, s in pb.items():
        props[k] = merge_schemas(props[k], s) if k in props else s
    rb = set(b.get("required", ()))
    required = [k for k in a.get("required", ()) if k in rb]
    out: Schema = {}
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    return out


def _merge_array(a: Schema, b: Schema) -> Schema:
    if "items" not in a:  # an empty array says nothing about items
        return b
    if "items" not in b:
        return a
    return {"items": merge_schemas(a["items"], b["items"])}


def _join(parts: _Parts) -> Schema:
    scalars = parts.scalars
    if "number" in scalars:
        scalars.discard("integer")
    ordered = sorted(scalars, key=lambda t: (_TYPE_ORDER.get(t, 9), t))
    containers = [("object", parts.obj), ("array", parts.arr)]
    present = [(k, body) for k, body in containers if body is not None]
    if not present:
        return {"type": ordered[0] if len(ordered) == 1 else ordered} if ordered else {}
    if len(present) == 1 and scalars <= {"null"}:
        kind, body = present[0]
        return {"type": [kind, "null"] if scalars else kind, **body}
    branches: list[Schema] = [{"type": k, **body} for k, body in present]
    if ordered:
        branches.append({"type": ordered[0] if len(ordered) == 1 else ordered})
    return {"anyOf": branches}


def merge_schemas(a: Schema, b: Schema) -> Schema:
    """The narrowest schema (in our subset) that accepts everything `a` or `b` accepts.

    integer+number widen to number, other scalar mixes become a type list, mixes with objects or
    arrays become `anyOf`; object `required` is the intersection, properties the union.
    """
    if a is b or a == b:
        return a
    parts = _Parts()
    if not _split(a, parts) or not _split(b, parts):
        return {}
    return _join(parts)


# --------------------------------------------------------------------------- examples


def bounded_example(value: Any, *, max_str: int = 200, max_items: int = 3, max_depth: int = 6) -> Any:
    """A small example of `value`: long strings cut with a `…` marker, arrays and maps to a few
    entries, containers deeper than `max_depth` emptied.

    Records (dicts that are not maps) keep all their keys so the example still validates against
    `infer_schema(value)` within `max_depth`.
    """

    def cut(v: Any, depth: int) -> Any:
        kind = _kind(v)
        if kind == "string":
            return v if len(v) <= max_str else f"{v[:max_str]}… [+{len(v) - max_str} chars]"
        if kind == "object":
            if depth >= max_depth:
                return {}
            items = list(v.items())
            if _looks_like_map(v):
                items = items[:max_items]
            return {str(k): cut(x, depth + 1) for k, x in items}
        if kind == "array":
            return [] if depth >= max_depth else [cut(x, depth + 1) for x in v[:max_items]]
        if kind == "unknown":
            return cut(repr(v), depth)
        return v

    return cut(value, 0)


def _small_example(value: Any) -> Any:
    """The richest bounded example whose JSON fits EXAMPLE_BUDGET (the tightest one otherwise)."""
    example: Any = None
    for max_str, max_items, max_depth in ((200, 3, 6), (80, 2, 5), (40, 1, 4)):
        example = bounded_example(value, max_str=max_str, max_items=max_items, max_depth=max_depth)
        if len(_dumps(example)) <= EXAMPLE_BUDGET:
            break
    return example


def _dumps(doc: Any, option: int = 0) -> bytes:
    try:
        return orjson.dumps(doc, option=option)
    except TypeError:  # ints beyond 64 bits; rare enough for the slow path
        return json.dumps(doc, ensure_ascii=False, indent=2 if option else None, default=str).encode()


# --------------------------------------------------------------------------- store


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _distinct_shapes(values: Iterable[Any]) -> Iterable[Schema]:
    """The inferred schema of each value, each distinct one once (a batch of like items folds
    in one merge per new shape, not one per item)."""
    seen: set[bytes] = set()
    for value in values:
        schema = infer_schema(value)
        key = _dumps(schema)
        if key not in seen:
            seen.add(key)
            yield schema


class _file_lock:  # noqa: N801 - used as a context manager
    """An exclusive lock between processes on `<shapes directory>.lock`, next to the directory
    (best effort: none when the lock file cannot be made)."""

    def __init__(self, path: Path) -> None:
        self.path = path.parent.with_name(path.parent.name + ".lock")
        self.fd: int | None = None

    def __enter__(self) -> None:
        import fcntl
        import os

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None

    def __exit__(self, *exc: object) -> None:
        import os

        if self.fd is not None:
            os.close(self.fd)  # closing releases the lock
            self.fd = None


class ShapeStore:
    """One JSON file per tool under `directory` (the workspace's `catalog/shapes`).

    File: `{tool, schema, example, seen_count, updated_at, source, observed_schema?}`. `source`
    is "declared" when the tool has an output_schema (then `schema` is that, and the learned one
    is `observed_schema`), else "observed".
    """

    def __init__(self, directory: Path, redactor: Any = None) -> None:
        self.directory = Path(directory)
        self._redactor = redactor  # graphchat.threads.redact.Redactor: examples hold tool output
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._pending: set[asyncio.Task[None]] = set()

    def path(self, tool: str) -> Path:
        return self.directory / f"{sanitize(tool)}.json"

    def _lock(self, tool: str) -> threading.Lock:
        key = sanitize(tool)
        with self._locks_guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    def get(self, tool: str) -> dict[str, Any] | None:
        """The stored shape of `tool`, or None when unknown (or the file is unreadable)."""
        return read_object(self.path(tool))

    def list(self) -> builtins.list[dict[str, Any]]:
        """Summary of every stored shape: tool, seen_count, updated_at, source; sorted by tool."""
        out = []
        try:
            paths = sorted(self.directory.glob("*.json"))
        except OSError:
            return []
        for p in paths:
            doc = read_object(p)
            if doc is None:
                continue
            out.append(
                {
                    "tool": doc.get("tool", p.stem),
                    "seen_count": doc.get("seen_count", 0),
                    "updated_at": doc.get("updated_at"),
                    "source": doc.get("source", "observed"),
                }
            )
        return sorted(out, key=lambda d: str(d["tool"]))

    def record(self, tool: str, value: Any, declared_schema: Schema | None = None) -> None:
        """Merge the shape of one successful result into the stored one (blocking; see record_async)."""
        self.record_many(tool, [value], declared_schema)

    def record_many(
        self, tool: str, values: builtins.list[Any], declared_schema: Schema | None = None
    ) -> None:
        """Merge the shapes of a batch of successful results of one tool into the stored one:
        one read and one write for the batch (a `map` over 100,000 items writes once, not
        100,000 times). Processes recording at once merge under a file lock: no update is lost."""
        if not values:
            return
        learned = _fold(_distinct_shapes(values))  # outside the lock: no ordering needed
        assert learned is not None
        example = _small_example(values[-1])
        path = self.path(tool)
        with self._lock(tool), _file_lock(path):
            old = read_object(path)
            seen = 0
            if old is not None:
                prev = old.get("observed_schema", old.get("schema"))
                if isinstance(prev, dict):
                    learned = merge_schemas(prev, learned)
                seen = int(old.get("seen_count", 0) or 0)
            doc: dict[str, Any] = {"tool": tool}
            if declared_schema:
                doc.update(schema=declared_schema, observed_schema=learned)
            else:
                doc["schema"] = learned
            doc.update(
                example=example,
                seen_count=seen + len(values),
                updated_at=_now(),
                source="declared" if declared_schema else "observed",
            )
            self._write(path, _dumps(doc, orjson.OPT_INDENT_2))

    def _write(self, path: Path, data: bytes) -> None:
        # A cache: readers see the old or the new file, never a half-written one (no fsync; a
        # torn file reads as absent).

        if self._redactor:  # the same scrubber as threads: no known secret reaches the cache
            data = self._redactor.line(data)
        write_atomic(path, data)

    def record_async(
        self, tool: str, value: Any, declared_schema: Schema | None = None
    ) -> asyncio.Task[None]:
        """Record in a worker thread so the round never waits; failures are logged, not raised.

        Must be called from a running event loop; `await store.drain()` before exit.
        """
        task = asyncio.get_running_loop().create_task(self._record_quietly(tool, value, declared_schema))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)
        return task

    async def _record_quietly(self, tool: str, value: Any, declared_schema: Schema | None) -> None:
        try:
            await asyncio.to_thread(self.record, tool, value, declared_schema)
        except Exception as exc:  # a cache must never break a call
            said = describe_failure(exc) if is_failed_write(exc) else exc
            log.warning("could not record the shape of %s: %s", tool, said)

    async def drain(self) -> None:
        """Wait for every recording started from this event loop."""
        loop = asyncio.get_running_loop()
        while True:
            mine = [t for t in self._pending if t.get_loop() is loop and not t.done()]
            if not mine:
                return
            await asyncio.gather(*mine, return_exceptions=True)


def record_async(
    store: ShapeStore, tool: str, value: Any, declared: Schema | None = None
) -> asyncio.Task[None]:
    """Fire-and-forget recording; same as `store.record_async`."""
    return store.record_async(tool, value, declared)
