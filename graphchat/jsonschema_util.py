"""JSON Schema checks: compiled fast validators for the hot path, jsonschema for messages.

A plan `map` validates one tool's arguments thousands of times, so the yes/no check uses
fastjsonschema (schemas compiled to Python code, ~1 µs a call); jsonschema, the reference
implementation, produces the error messages on the slow path and covers any schema
fastjsonschema cannot compile (2020-12 keywords it does not know).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

_cache: dict[bytes, tuple[Callable[[Any], bool], Any]] = {}
# Look the schema object up by identity first; the entry keeps the schema alive so its id
# cannot be reused by another object.
_by_id: dict[int, tuple[dict[str, Any], tuple[Callable[[Any], bool], Any]]] = {}
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

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError:
        return jsonschema.Draft202012Validator({})  # a broken third-party schema must not break calls
    return cls(schema)


def _compiled_check(schema: dict[str, Any], reference: Any) -> Callable[[Any], bool]:
    try:
        import fastjsonschema

        # no defaults written into the caller's value; formats unchecked, as jsonschema does
        compiled = fastjsonschema.compile(schema, use_default=False, use_formats=False)
    except Exception:  # unsupported keyword or draft: the reference validator decides
        return reference.is_valid

    def check(value: Any) -> bool:
        try:
            compiled(value)
        except fastjsonschema.JsonSchemaValueException:
            return False
        except Exception:
            return reference.is_valid(value)
        return True

    return check


def _entry(schema: dict[str, Any]) -> tuple[Callable[[Any], bool], Any]:
    hit = _by_id.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS, default=str)
    entry = _cache.get(key)
    if entry is None:
        reference = _reference_validator(schema)
        entry = (_compiled_check(schema, reference), reference)
        _cache[key] = entry
    if len(_by_id) < 4096:
        _by_id[id(schema)] = (schema, entry)
    return entry


def validator_for(schema: dict[str, Any]) -> Any:
    """The reference (jsonschema) validator of a schema, cached."""
    return _entry(schema)[1]


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Every problem of `value` against `schema`, as short lines (empty when valid)."""
    validator = validator_for(schema)
    return [_describe(e) for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))]


def first_error(schema: dict[str, Any], value: Any) -> str | None:
    """None when valid, else up to three problems on one line."""
    check, _ = _entry(schema)
    if check(value):
        return None
    found = errors(schema, value)
    if not found:  # the fast path was stricter than the reference: the reference wins
        return None
    return "; ".join(found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")
