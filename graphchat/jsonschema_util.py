"""JSON Schema checks: compiled fast validators for the hot path, jsonschema for messages.

A plan `map` validates one tool's arguments thousands of times, so the yes/no check uses
fastjsonschema (schemas compiled to Python code, ~1 µs a call); jsonschema, the reference
implementation, produces the error messages on the slow path and covers any schema
fastjsonschema cannot compile (2020-12 keywords it does not know).

Schemas come from models and MCP servers, so they are hostile input: a `$ref` that leaves the
document (`http:`, `https:`, `file:`, a relative file name) is refused before either library
sees the schema, and neither library is given a way to fetch anything (fastjsonschema gets
handlers that refuse every scheme, jsonschema a registry of the bundled meta-schemas only).
Schema work therefore never touches the network or the disk and cannot block the event loop.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import orjson

MAX_SCHEMA_DEPTH = 128  # deeper is refused: libraries recurse, orjson stops at 255
_REF_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")
_DATA_KEYS = frozenset({"enum", "const", "default", "examples", "example"})  # values, not schemas


class _Entry:
    """A schema's yes/no check, its reference validator and why it is refused (if it is).

    The reference (jsonschema) validator is built on first use: a run whose arguments all
    pass the compiled check never imports jsonschema."""

    __slots__ = ("_reference", "_schema", "check", "refusal")

    def __init__(self, schema: Any, refusal: str | None = None) -> None:
        self._schema = schema
        self._reference: Any = _UNBUILT
        self.refusal = refusal
        self.check: Callable[[Any], bool] = lambda value: False

    @property
    def reference(self) -> Any:
        if self.refusal is not None:
            return None
        if self._reference is _UNBUILT:
            self._reference = _reference_validator(self._schema)
        return self._reference


_UNBUILT: Any = object()


_cache: dict[bytes, _Entry] = {}
# Look the schema object up by identity first; the entry keeps the schema alive so its id
# cannot be reused by another object.
_by_id: dict[int, tuple[Any, _Entry]] = {}


def _defrag(uri: str) -> str:
    return uri.split("#", 1)[0]


@functools.cache
def _bundled_uris() -> frozenset[str]:
    from jsonschema_specifications import REGISTRY

    return frozenset(_defrag(k).rstrip("/") for k in REGISTRY)


def _bundled(uri: str) -> bool:
    """True for the JSON Schema meta-schemas jsonschema ships (resolved offline)."""
    return _defrag(uri).rstrip("/") in _bundled_uris()


def refusal(schema: Any) -> str | None:
    """Why `schema` is refused (a reference outside the document, or too deep), else None.

    Walks without recursion, so any nesting is safe to inspect. References to a `$id` the
    schema itself declares, and to the bundled meta-schemas, stay inside: they are allowed.
    """
    ids: set[str] = set()
    refs: list[tuple[str, str]] = []
    stack: list[tuple[Any, tuple[str, ...]]] = [(schema, ())]
    while stack:
        node, path = stack.pop()
        if len(path) > MAX_SCHEMA_DEPTH:
            return f"nests deeper than {MAX_SCHEMA_DEPTH} levels (at {'/'.join(path[:8])}/…)"
        if isinstance(node, dict):
            for key, value in node.items():
                if key in _REF_KEYS and isinstance(value, str):
                    refs.append((value, "/".join((*path, str(key)))))
                elif key in ("$id", "id") and isinstance(value, str):
                    ids.add(_defrag(value))
                elif key not in _DATA_KEYS and isinstance(value, dict | list):
                    stack.append((value, (*path, str(key))))
        elif isinstance(node, list):
            stack.extend(
                (item, (*path, str(i))) for i, item in enumerate(node) if isinstance(item, dict | list)
            )
    for ref, where in sorted(refs, key=lambda r: r[1]):
        target = _defrag(ref)
        if not target or target in ids or _bundled(target):
            continue
        kind = "remote" if target.lower().startswith(("http:", "https:")) else "external"
        return (
            f"refers to {ref!r} ({where}): {kind} schema references are refused "
            "(only references inside the schema, like '#/$defs/x', are followed)"
        )
    return None


def _refuse_fetch(uri: str) -> Any:
    from jsonschema_specifications import REGISTRY

    try:
        return REGISTRY.contents(_defrag(uri))
    except Exception:
        raise ValueError(f"schema reference {uri!r} refused: graphchat fetches no schemas") from None


class _RefuseEveryScheme(dict[str, Callable[[str], Any]]):
    """fastjsonschema `handlers`: it fetches with urllib for a scheme it has no handler for,
    so this mapping has one, refusing, for every scheme."""

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: str) -> Callable[[str], Any]:
        return _refuse_fetch


def _registry() -> Any:
    from jsonschema_specifications import REGISTRY

    return REGISTRY  # the bundled meta-schemas; no `retrieve`, so nothing else resolves


_preload: Any = None


def preload_in_background() -> None:
    """Import jsonschema and fastjsonschema in a daemon thread (once): the first tool call
    validates its arguments, and paying their import (~50 ms) there, on the event loop, would
    hold up every call of the round. A call that comes first waits on the import lock."""
    global _preload
    if _preload is not None:
        return

    def run() -> None:
        try:
            import fastjsonschema  # noqa: F401
            import jsonschema  # noqa: F401
        except Exception:  # the call that needs them will raise it, with context
            pass

    import threading

    _preload = threading.Thread(target=run, name="graphchat-import-jsonschema", daemon=True)
    _preload.start()


def _reference_validator(schema: dict[str, Any]) -> Any:
    import jsonschema

    try:
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        cls.check_schema(schema)
    except (jsonschema.SchemaError, TypeError):
        # a broken third-party schema must not break calls
        return jsonschema.Draft202012Validator({}, registry=_registry())
    return cls(schema, registry=_registry())


def _reference_is_valid(reference: Any, value: Any) -> bool:
    try:
        return bool(reference.is_valid(value))
    except Exception:  # a `$ref` that does not resolve inside the schema: errors() says which
        return False


def _compiled_check(schema: dict[str, Any], entry: _Entry) -> Callable[[Any], bool]:
    try:
        import fastjsonschema

        # no defaults written into the caller's value; formats unchecked, as jsonschema does;
        # a copy, because fastjsonschema rewrites `$ref`s in the schema it is given
        compiled = fastjsonschema.compile(
            orjson.loads(orjson.dumps(schema)),
            handlers=_RefuseEveryScheme(),
            use_default=False,
            use_formats=False,
        )
    except Exception:  # unsupported keyword or draft: the reference validator decides
        return lambda value: _reference_is_valid(entry.reference, value)

    def check(value: Any) -> bool:
        try:
            compiled(value)
        except fastjsonschema.JsonSchemaValueException:
            return False
        except Exception:
            return _reference_is_valid(entry.reference, value)
        return True

    return check


def _entry(schema: dict[str, Any]) -> _Entry:
    hit = _by_id.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    why = refusal(schema)
    if why is not None:
        entry = _Entry(schema, why)
    else:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS, default=str)
        cached = _cache.get(key)
        if cached is None:
            cached = _Entry(schema)
            cached.check = _compiled_check(schema, cached)
            _cache[key] = cached
        entry = cached
    if len(_by_id) < 4096:
        _by_id[id(schema)] = (schema, entry)
    return entry


def schema_refusal(schema: Any) -> str | None:
    """Why graphchat will not use `schema` (see `refusal`), from the cache; None when usable."""
    if not isinstance(schema, dict):
        return None
    return _entry(schema).refusal


def validator_for(schema: dict[str, Any]) -> Any:
    """The reference (jsonschema) validator of a schema, cached; None when it is refused."""
    return _entry(schema).reference


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def _path_key(error: Any) -> list[tuple[int, int, str]]:
    return [(0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.absolute_path]


def errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Every problem of `value` against `schema`, as short lines (empty when valid)."""
    entry = _entry(schema)
    if entry.refusal is not None:
        return [f"the schema {entry.refusal}"]
    try:
        found = sorted(entry.reference.iter_errors(value), key=_path_key)
    except Exception as exc:  # referencing.Unresolvable: a broken `$ref` inside the schema
        return [f"the schema cannot be used: {exc}"]
    return [_describe(e) for e in found]


def fits(schema: dict[str, Any], value: Any) -> bool:
    """The compiled yes/no check alone (no jsonschema import when it says yes)."""
    return _entry(schema).check(value)


def first_error(schema: dict[str, Any], value: Any) -> str | None:
    """None when valid, else up to three problems on one line."""
    if _entry(schema).check(value):
        return None
    found = errors(schema, value)
    if not found:  # the fast path was stricter than the reference: the reference wins
        return None
    return "; ".join(found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")


def argument_problem(schema: dict[str, Any], value: Any) -> tuple[bool, str] | None:
    """One cache look-up for a tool call's arguments: None when `value` fits `schema`, else
    (True, why the schema is refused) or (False, its first problems as `first_error` says)."""
    entry = _entry(schema)
    if entry.refusal is not None:
        return True, entry.refusal
    if entry.check(value):
        return None
    found = first_error(schema, value)
    return None if found is None else (False, found)
