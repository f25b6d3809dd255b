"""A test MCP server whose tool asks the person twice during one call (push elicitations, on
legacy connections); each start of the tool is logged (one JSON line, `GRAPHCHAT_TEST_CALL_LOG`)."""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel

mcp = MCPServer("graphchat-test-asking", version="1.0")


class Confirm(BaseModel):
    ok: bool


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def push_and_tag(name: str, ctx: Context) -> str:
    """Asks whether to push `name`, then whether to tag it."""
    path = os.environ.get("GRAPHCHAT_TEST_CALL_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"tool": "push_and_tag", "args": {"id": name}}) + "\n")
    pushed = await ctx.elicit(message=f"Push {name}?", schema=Confirm)
    if pushed.action != "accept":
        return f"not pushed ({pushed.action})"
    tagged = await ctx.elicit(message=f"Tag {name}?", schema=Confirm)
    if tagged.action != "accept":
        return f"pushed={pushed.data.ok}, not tagged ({tagged.action})"
    return f"pushed={pushed.data.ok} tagged={tagged.data.ok} {name}"


if __name__ == "__main__":
    mcp.run()
