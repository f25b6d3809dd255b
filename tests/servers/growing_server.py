"""A test MCP server whose tool list changes while it runs: `grow` adds a tool `grown` and sends
`notifications/tools/list_changed` (MCPServer over stdio)."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)
mcp = MCPServer("graphchat-test-growing", version="1.0")


@mcp.tool(annotations=READ)
async def grow(ctx: Context) -> str:
    """Add a tool `grown` to this server and tell the client its tool list changed."""

    def grown() -> str:
        """A tool that did not exist when the server started."""
        return "grown here"

    mcp.add_tool(grown, annotations=READ)
    await ctx.session.send_tool_list_changed()
    return "grew a tool"


if __name__ == "__main__":
    mcp.run("stdio")
