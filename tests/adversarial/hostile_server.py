"""A hostile MCP server on raw low-level `Server`: its tools, schemas and results come verbatim
from the JSON in $HOSTILE_SPEC, so a test can serve any name, schema or result it likes.

HOSTILE_SPEC = {"tools": [{"name": "t", "input_schema": {...}, "output_schema": {...},
                           "read": true, "result": <any JSON>}]}

A tool may instead answer `"text": <the raw text>`, add `"structured": <any JSON>` as
structuredContent, and set `"is_error": true`. GRAPHCHAT_TEST_MARKER=<file> appends this
process's pid on start (so a test can check that no server is left running).
"""

from __future__ import annotations

import json
import os
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

SPEC: dict[str, Any] = json.loads(os.environ.get("HOSTILE_SPEC", '{"tools": []}'))
TOOLS = {tool["name"]: tool for tool in SPEC["tools"]}


async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(
        tools=[
            Tool(
                name=tool["name"],
                description=tool.get("description", "hostile tool"),
                input_schema=tool.get("input_schema", {"type": "object"}),
                output_schema=tool.get("output_schema"),
                annotations=ToolAnnotations(read_only_hint=bool(tool.get("read", True))),
            )
            for tool in SPEC["tools"]
        ]
    )


async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
    marker = os.environ.get("HOSTILE_CALLS")
    if marker:
        with open(marker, "a") as handle:
            handle.write(json.dumps({"name": params.name, "arguments": params.arguments}) + "\n")
    tool = TOOLS.get(params.name)
    if tool is None:
        return CallToolResult(
            content=[TextContent(type="text", text=f"unknown tool {params.name}")], is_error=True
        )
    text = tool["text"] if "text" in tool else json.dumps(tool.get("result", {"ok": True}))
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=tool.get("structured"),
        is_error=bool(tool.get("is_error", False)),
    )


server = Server("graphchat-test-hostile", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    marker = os.environ.get("GRAPHCHAT_TEST_MARKER")
    if marker:
        with open(marker, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
