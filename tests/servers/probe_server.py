"""An MCP server (stdio) for `mcp probe`/`mcp test`/`mcp tools`: read-only tools with and
without required arguments, one that fails, and tools that are not read-only (which a probe
must never call). Every call is appended to GRAPHCHAT_TEST_CALL_LOG as one JSON line."""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

READ = ToolAnnotations(read_only_hint=True)
mcp = MCPServer("graphchat-test-probe", version="1.0")


def _log(tool: str) -> None:
    path = os.environ.get("GRAPHCHAT_TEST_CALL_LOG")
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"tool": tool}) + "\n")


@mcp.tool(annotations=READ)
def status(verbose: bool = False) -> dict:
    """The service's health: {healthy, version, uptime_s}."""
    _log("status")
    return {"healthy": True, "version": "1.2", "uptime_s": 42}


@mcp.tool(annotations=READ)
def lookup(key: str) -> dict:
    """One key's value (needs `key`)."""
    _log("lookup")
    return {"key": key, "value": 1}


@mcp.tool(annotations=READ)
def flaky() -> str:
    """Always fails."""
    _log("flaky")
    raise ToolError("backend down")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def reset() -> str:
    """Wipe everything (no arguments, destructive)."""
    _log("reset")
    return "wiped"


@mcp.tool()
def ping() -> str:
    """Says nothing about itself: destructive by default."""
    _log("ping")
    return "pong"


if __name__ == "__main__":
    mcp.run()
