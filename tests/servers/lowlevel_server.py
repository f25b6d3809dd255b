"""A test MCP server on the low-level `Server`: many tools (TOOL_COUNT, default 300), a tool
whose output breaks its declared schema, resources, error results with structured content and
an image beside structured content."""

from __future__ import annotations

import os

import anyio
import rendezvous  # tests/servers/ (this script's folder is on sys.path)
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

COUNT = int(os.environ.get("TOOL_COUNT", "300"))
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgAAAAAgABVKJPXQAAAABJRU5ErkJggg=="
OBJ = {"type": "object", "properties": {}}


def _tools() -> list[Tool]:
    read = ToolAnnotations(read_only_hint=True)
    tools = [
        Tool(
            name="bad_output",
            description="Declares an integer count and returns a string.",
            input_schema=OBJ,
            output_schema={
                "type": "object",
                "properties": {"count": {"type": "integer"}},
                "required": ["count"],
            },
            annotations=read,
        ),
        Tool(
            name="resources",
            description="Returns a text block, a link and an embedded resource.",
            input_schema=OBJ,
            annotations=read,
        ),
        Tool(
            name="error_structured",
            description="Fails with structured details.",
            input_schema=OBJ,
            annotations=read,
        ),
        Tool(name="two_blocks", description="Two JSON text blocks.", input_schema=OBJ, annotations=read),
        Tool(
            name="chart", description="Structured content and an image.", input_schema=OBJ, annotations=read
        ),
    ]
    for i in range(COUNT):
        tools.append(
            Tool(
                name=f"tool_{i:03d}",
                description=f"Generated tool number {i}.",
                input_schema=OBJ,
                annotations=read,
            )
        )
    return tools


async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(tools=_tools())


async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
    name = params.name
    if name == "bad_output":
        return CallToolResult(
            content=[TextContent(type="text", text='{"count": "many"}')], structured_content={"count": "many"}
        )
    if name == "resources":
        return CallToolResult(
            content=[
                TextContent(type="text", text="see attached"),
                ResourceLink(
                    type="resource_link", uri="file:///tmp/report.txt", name="report", mime_type="text/plain"
                ),
                EmbeddedResource(
                    type="resource",
                    resource=TextResourceContents(
                        uri="mem://note", mime_type="text/plain", text="embedded text"
                    ),
                ),
            ]
        )
    if name == "error_structured":
        return CallToolResult(
            content=[TextContent(type="text", text="quota exceeded")],
            structured_content={"code": 429, "retry_after": 3},
            is_error=True,
        )
    if name == "two_blocks":
        return CallToolResult(
            content=[TextContent(type="text", text='{"a": 1}'), TextContent(type="text", text='{"b": 2}')]
        )
    if name == "chart":
        return CallToolResult(
            content=[
                TextContent(type="text", text='{"points": 3}'),
                ImageContent(type="image", data=PNG, mime_type="image/png"),
            ],
            structured_content={"points": 3},
        )
    if name.startswith("tool_"):
        return CallToolResult(content=[TextContent(type="text", text=f"{name} ran")])
    return CallToolResult(content=[TextContent(type="text", text=f"unknown tool {name}")], is_error=True)


server = Server("graphchat-test-lowlevel", version="1.0", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    marker = os.environ.get("GRAPHCHAT_TEST_MARKER")
    if marker:
        with open(marker, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    rendezvous.wait_for_peers()
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
