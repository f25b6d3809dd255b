"""A stdio MCP server that leaves processes behind (issue 10 point 13).

At start it spawns a grandchild (a sleeping python, in the server's process group) and writes
`server <pid>` and `grandchild <pid>` lines to GRAPHCHAT_TEST_MARKER; its tool `wait` writes
`called` there, then sleeps `seconds`. When its stdin ends: with GRAPHCHAT_TEST_ON_EOF=linger
(the default) it ignores that and stays alive; with `exit` it exits at once, leaving the
grandchild running.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

marker = os.environ["GRAPHCHAT_TEST_MARKER"]


def note(line: str) -> None:
    with open(marker, "a") as handle:
        handle.write(line + "\n")


grandchild = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(600)"],
    stdin=subprocess.DEVNULL,
    stdout=subprocess.DEVNULL,
    stderr=subprocess.DEVNULL,
)
note(f"server {os.getpid()}")
note(f"grandchild {grandchild.pid}")

mcp = MCPServer("stubborn", version="1.0")


@mcp.tool(annotations=ToolAnnotations(read_only_hint=True))
async def wait(seconds: float = 600) -> str:
    """Sleep `seconds`, then say so."""
    note("called")
    await asyncio.sleep(seconds)
    return f"waited {seconds}"


mcp.run()
if os.environ.get("GRAPHCHAT_TEST_ON_EOF", "linger") == "linger":
    time.sleep(600)  # stdin ended: stay anyway
