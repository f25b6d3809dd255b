"""What the MCP client sees: public tool names (`plan_<identifier>`, one underscore) and
ToolResults as CallToolResults (structured content plus the same JSON as one text block;
errors as `is_error` results carrying the message; only a tool this server does not have is
a JSON-RPC error, as in graph). A plan called by the client answers graph's result body
(`PlanOutcome.body`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import ToolResult
from graphchat.jsonschema_util import errors

if TYPE_CHECKING:
    from graphchat.catalog.base import ToolResult, ToolSpec

PREFIX = "plan_"


def public_name(identifier: str) -> str:
    return PREFIX + identifier


def publicize(result: ToolResult, spec: ToolSpec, arguments: Any) -> ToolResult:
    """An error as the client should read it: the tool's public name, and every problem with
    the arguments when they were refused (Catalog.call names only the first one)."""
    if not result.is_error or not isinstance(result.value, dict):
        return result

    ident = spec.meta["plan"]
    value = dict(result.value)
    if isinstance(value.get("error"), str):
        value["error"] = value["error"].replace(spec.name, public_name(ident))
    if "problems" not in value and isinstance(arguments, dict) and spec.input_schema:
        problems = errors(spec.input_schema, arguments)
        if problems:
            value["problems"] = problems
            value["input_schema"] = spec.input_schema
    return ToolResult(value, is_error=True, ms=result.ms)


def to_call_result(result: ToolResult) -> Any:
    """A ToolResult as an MCP CallToolResult: structured content (objects as they are, other
    values as {"result": …}) and the same JSON as one text block; errors carry their message."""
    import orjson
    from mcp.types import CallToolResult, TextContent

    value = result.value
    structured = value if isinstance(value, dict) else {"result": value}
    if result.is_error and not (isinstance(value, dict) and "error" not in value):
        text = result.error_message
        problems = value.get("problems") if isinstance(value, dict) else None
        if problems:
            text += "\nproblems:\n" + "\n".join(f"- {p}" for p in problems)
    else:
        text = orjson.dumps(value, default=str).decode()
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=structured, is_error=result.is_error
    )


def unknown_tool(name: str) -> Any:
    """A tool this server does not have: a JSON-RPC error (invalid params), as graph answers
    (mcp_server/mod.rs), not an `isError` result."""
    from mcp.types import INVALID_PARAMS, ErrorData

    return ErrorData(code=INVALID_PARAMS, message=f"unknown tool '{name}'")


def error_result(message: str) -> Any:
    from mcp.types import CallToolResult, TextContent

    return CallToolResult(
        content=[TextContent(type="text", text=message)], structured_content={"error": message}, is_error=True
    )
