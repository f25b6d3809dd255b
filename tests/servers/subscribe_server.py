"""A test MCP server (low-level `Server`) with resource subscriptions: each `resources/subscribe`
is logged (one JSON line, `GRAPHCHAT_TEST_CALL_LOG`); the tool `touch` tells the client that
every resource subscribed on this process changed (`notifications/resources/updated`); `crash`
exits the process (the client's next call starts a new one, which knows no subscription)."""

from __future__ import annotations

import json
import os

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    EmptyResult,
    ListToolsResult,
    PaginatedRequestParams,
    SubscribeRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
    UnsubscribeRequestParams,
)

SUBSCRIBED: set[str] = set()
OBJ = {"type": "object", "properties": {}}
READ = ToolAnnotations(read_only_hint=True)


def _log(kind: str, uri: str) -> None:
    path = os.environ.get("GRAPHCHAT_TEST_CALL_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"kind": kind, "uri": uri, "pid": os.getpid()}) + "\n")


async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
    return ListToolsResult(
        tools=[
            Tool(
                name="touch",
                description="Say every subscribed resource changed.",
                input_schema=OBJ,
                annotations=READ,
            ),
            Tool(name="crash", description="Exit the server process.", input_schema=OBJ, annotations=READ),
        ]
    )


async def call_tool(ctx: ServerRequestContext, params: CallToolRequestParams) -> CallToolResult:
    if params.name == "crash":
        os._exit(3)
    for uri in sorted(SUBSCRIBED):
        await ctx.session.send_resource_updated(uri)
    return CallToolResult(content=[TextContent(type="text", text=f"touched {len(SUBSCRIBED)}")])


async def subscribe(ctx: ServerRequestContext, params: SubscribeRequestParams) -> EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    _log("subscribe", str(params.uri))
    return EmptyResult()


async def unsubscribe(ctx: ServerRequestContext, params: UnsubscribeRequestParams) -> EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    _log("unsubscribe", str(params.uri))
    return EmptyResult()


server = Server(
    "graphchat-test-subscribe",
    version="1.0",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_subscribe_resource=subscribe,
    on_unsubscribe_resource=unsubscribe,
)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
