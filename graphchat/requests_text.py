"""How a request is shown to a person (issue 19, build 4; issue 24, item 4): the exact command
that answers it — never a literal `…` — the values it allows, and for an approval the tool and
every one of its arguments. Pure functions over a request's public shape (`Request.public()`),
shared by `plan run`/`ask` when they park, `graphchat requests`, and `ask --thread` on a thread
that waits."""

from __future__ import annotations

import shlex
from typing import Any

from graphchat.catalog.approvals import argument_text
from graphchat.display import safe


def _graphchat(home: str | None) -> str:
    return f"graphchat --home {shlex.quote(home)}" if home else "graphchat"


def _fields(request: dict[str, Any]) -> dict[str, Any]:
    schema = request.get("schema") or {}
    props = schema.get("properties") if isinstance(schema, dict) else None
    return props if isinstance(props, dict) else {}


def _example(prop: Any) -> Any:
    """A value a field accepts (its first allowed value, else one of its type)."""
    if not isinstance(prop, dict):
        return "text"
    if isinstance(prop.get("enum"), list) and prop["enum"]:
        return prop["enum"][0]
    if "default" in prop:
        return prop["default"]
    kind = prop.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    return {"integer": 1, "number": 1, "boolean": True, "array": [], "object": {}}.get(str(kind), "text")


def answer_command(request: dict[str, Any], home: str | None = None) -> str:
    """The command that answers `request`: `graphchat permit ID` for an approval; for a question
    `graphchat answer ID VALUE`, or — a form of several fields — with an example JSON object
    (every field, each with a value it accepts)."""
    rid = request["id"]
    if request.get("kind") == "approval":
        return f"{_graphchat(home)} permit {rid}"
    fields = _fields(request)
    if request.get("mode") == "form" and len(fields) != 1:
        import json

        example = json.dumps({name: _example(prop) for name, prop in fields.items()}, ensure_ascii=False)
        return f"{_graphchat(home)} answer {rid} {shlex.quote(example)}"
    return f"{_graphchat(home)} answer {rid} VALUE"


def _field_line(name: str, prop: Any, required: bool) -> str:
    prop = prop if isinstance(prop, dict) else {}
    parts = [name + (" (required)" if required else "")]
    if isinstance(prop.get("enum"), list) and prop.get("multiple") is True:
        parts.append("one or more of " + ", ".join(_shown(v) for v in prop["enum"]) + ", comma-separated")
    elif isinstance(prop.get("enum"), list):
        parts.append("one of " + ", ".join(_shown(v) for v in prop["enum"]))
    elif prop.get("type"):
        kind = prop["type"]
        parts.append(" or ".join(kind) if isinstance(kind, list) else str(kind))
    if prop.get("description"):
        parts.append(str(prop["description"]))
    return ": ".join(parts[:2]) + ("" if len(parts) < 3 else f" — {parts[2]}")


def _shown(value: Any) -> str:
    return value if isinstance(value, str) else repr(value)


def answer_help(request: dict[str, Any], home: str | None = None) -> list[str]:
    """The lines that say what the answer may be (under the command): the allowed values, the
    fields of a form, or how to refuse an approval."""
    rid = request["id"]
    if request.get("kind") == "approval":
        return [f"or refuse it: {_graphchat(home)} deny {rid} --reason TEXT"]
    mode = request.get("mode")
    if mode == "options":
        options = [str(o) for o in request.get("options") or []]
        return [
            "VALUE: one of " + ", ".join(options) + " (or its number); any other text is passed on as typed"
        ]
    if mode == "form":
        fields = _fields(request)
        required = set((request.get("schema") or {}).get("required") or [])
        if len(fields) == 1:
            ((name, prop),) = fields.items()
            return ["VALUE: " + _field_line(name, prop, name in required)]
        return ["fields: " + "; ".join(_field_line(n, p, n in required) for n, p in fields.items())]
    return ["VALUE: any text"]


def approval_lines(request: dict[str, Any]) -> list[str]:
    """An approval's tool and every argument, in full (indented JSON, control characters
    escaped); for a server's own question during a tool call (sampling, elicitation) the server
    and the tool, and a sampling request's token cap and prompt in full; nothing for a question."""
    source = request.get("source") or {}
    if source.get("park_as"):
        lines = [f"server: {safe(str(source.get('server') or '?'), newlines=False)}"]
        if source.get("tool"):
            lines.append(f"during: {safe(str(source['tool']), newlines=False)}")
        if source.get("max_tokens") is not None:
            lines.append(f"at most: {source['max_tokens']:,} tokens")
        if source.get("prompt") is not None:
            lines.append("prompt:")
            lines += ["  " + safe(row, newlines=False) for row in str(source["prompt"]).splitlines()]
        return lines
    if request.get("kind") != "approval":
        return []

    arguments = source.get("arguments")
    lines = [f"tool: {safe(str(source.get('tool') or '?'), newlines=False)}"]
    if isinstance(arguments, dict) and arguments:
        lines.append("arguments:")
        lines += ["  " + row for row in argument_text(arguments).splitlines()]
    else:
        lines.append("arguments: none")
    return lines
