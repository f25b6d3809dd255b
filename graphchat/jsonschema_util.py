"""jsonschema helpers: cached validators and one-line error messages."""

from __future__ import annotations

from typing import Any

import orjson

_cache: dict[bytes, Any] = {}


def validator_for(schema: dict[str, Any]) -> Any:
    key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS, default=str)
    validator = _cache.get(key)
    if validator is None:
        import jsonschema

        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
        except jsonschema.SchemaError:
            cls = jsonschema.Draft202012Validator
            schema = {}  # a broken schema from a third-party server must not break calls
        validator = cls(schema)
        _cache[key] = validator
    return validator


def _describe(error: Any) -> str:
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


def errors(schema: dict[str, Any], value: Any) -> list[str]:
    """Every problem of `value` against `schema`, as short lines (empty when valid)."""
    validator = validator_for(schema)
    return [_describe(e) for e in sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))]


def first_error(schema: dict[str, Any], value: Any) -> str | None:
    found = errors(schema, value)
    if not found:
        return None
    return "; ".join(found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else "")
