"""A small shop catalog MCP server (stdio) for the freeze tests: list items, get one, and fail.

Every call is appended to the file named by GRAPHCHAT_TEST_CALL_LOG as one JSON line
`{"tool": …, "args": {…}}`, so a test can compare the calls a chat made with those a plan made.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)
mcp = MCPServer("graphchat-test-catalog", version="1.0")


def _log(tool: str, args: dict) -> None:
    path = os.environ.get("GRAPHCHAT_TEST_CALL_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"tool": tool, "args": args}) + "\n")


@mcp.tool(annotations=READ)
def list_items(category: str, count: int = 3) -> dict:
    """The first `count` items of a category: {category, items: [{id, name}]}."""
    _log("list_items", {"category": category, "count": count})
    prefix = category[:3]
    items = [{"id": f"{prefix}-{i}", "name": f"{category} #{i}"} for i in range(count)]
    return {"category": category, "items": items}


@mcp.tool(annotations=READ)
def get_item(id: str) -> dict:
    """One item's details: {id, price, stock}."""
    _log("get_item", {"id": id})
    return {"id": id, "price": 10 * len(id) + int(id.rsplit("-", 1)[-1] or 0), "stock": 7}


@mcp.tool(annotations=READ)
def broken(reason: str = "out of order") -> str:
    """Always fails."""
    _log("broken", {"reason": reason})
    raise ToolError(reason)


if __name__ == "__main__":
    mcp.run()
