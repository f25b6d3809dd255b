"""A test MCP server (mcp SDK, MCPServer): slow, failing, crashing, huge, shaped, destructive,
eliciting tools. stdio by default; `--http-fd N` serves streamable HTTP on an already-listening
socket (the test binds it, so there is nothing to wait for).

Env: GRAPHCHAT_TEST_MARKER=<file> appends this process's pid on start (proves a start happened);
GRAPHCHAT_TEST_RENDEZVOUS=<file>:<n> holds the start until n servers are starting (proves they
start concurrently).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Annotated

import rendezvous  # tests/servers/ (this script's folder is on sys.path)
from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    Image,
    MCPServer,
    Resolve,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

READ = ToolAnnotations(read_only_hint=True)
mcp = MCPServer("graphchat-test-tools", version="1.0")


@mcp.tool(annotations=READ)
async def slow(seconds: float = 0.5, label: str = "") -> str:
    """Sleep `seconds`, then echo the label."""
    called = os.environ.get("GRAPHCHAT_TEST_CALLED")
    if called:  # a FIFO the test blocks on: "the call has reached the server"
        with open(called, "w") as handle:
            handle.write(f"{os.getpid()}\n")
    await asyncio.sleep(seconds)
    return f"{label}: slept {seconds}s"


@mcp.tool(annotations=READ)
def whoami() -> dict:
    """The server's pid (a plain dict: JSON text, no structured content)."""
    return {"pid": os.getpid()}


@mcp.tool(annotations=READ)
def auth_header(ctx: Context) -> dict:
    """The Authorization header this call came with (HTTP only)."""
    headers = ctx.headers or {}
    return {"authorization": headers.get("authorization")}


@mcp.tool(annotations=READ)
def fail(message: str = "it broke") -> str:
    """Always fails with a message the model should see."""
    raise ToolError(message)


@mcp.tool(annotations=READ)
async def crash(after: float = 0.0) -> str:
    """Kill the server process mid-call."""
    await asyncio.sleep(after)
    sys.stderr.write("crash: exiting now\n")
    sys.stderr.flush()
    os._exit(3)


@mcp.tool(annotations=READ)
def huge(kb: int = 1024) -> dict:
    """About `kb` KiB of records."""
    records = []
    size = 0
    i = 0
    while size < kb * 1024:
        rec = {"id": i, "name": f"item-{i}", "body": "x" * 200, "tags": ["a", "b"]}
        records.append(rec)
        size += 260
        i += 1
    return {"count": len(records), "records": records}


@mcp.tool(annotations=READ)
def shaped(variant: int = 1) -> dict:
    """Differently shaped results by variant."""
    if variant == 1:
        return {"id": 1, "name": "first", "score": 0.5}
    return {"id": "two", "tags": ["x", "y"], "score": 2}


class Stamp(BaseModel):
    total: int
    unit: str


@mcp.tool(annotations=READ)
def stamp(n: int = 1) -> Stamp:
    """A typed (structured) result with a declared output schema."""
    return Stamp(total=n * 2, unit="pcs")


@mcp.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_file(path: str) -> str:
    """Delete a file (destructive)."""
    os.unlink(path)
    return f"deleted {path}"


@mcp.tool()
def touch(path: str) -> str:
    """Create a file (no annotations: treated as destructive)."""
    with open(path, "a"):
        pass
    return f"touched {path}"


@mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
def note(path: str, text: str) -> str:
    """Append a line to a file (write, not destructive)."""
    with open(path, "a") as handle:
        handle.write(text + "\n")
    return "noted"


@mcp.tool(annotations=READ)
def picture() -> Image:
    """A tiny PNG."""
    png = bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
    return Image(data=png, format="png")


class Confirm(BaseModel):
    ok: bool


async def _ask_confirm(name: str) -> Confirm | Elicit[Confirm]:
    return Elicit(f"Really delete {name}?", Confirm)


@mcp.tool(annotations=READ)
async def confirm_delete(
    name: str, confirm: Annotated[ElicitationResult[Confirm], Resolve(_ask_confirm)]
) -> str:
    """Asks the person (resolver-style elicitation) before pretending to delete."""
    if isinstance(confirm, AcceptedElicitation):
        return f"deleted={confirm.data.ok} {name}"
    return f"not deleted ({confirm.action})"


@mcp.tool(annotations=READ)
async def confirm_push(name: str, ctx: Context) -> str:
    """Asks the person with ctx.elicit (v1-style push; legacy connections)."""
    result = await ctx.elicit(message=f"Push {name}?", schema=Confirm)
    if result.action == "accept":
        return f"pushed={result.data.ok} {name}"
    return f"not pushed ({result.action})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http-fd", type=int, default=None)
    args = parser.parse_args()
    marker = os.environ.get("GRAPHCHAT_TEST_MARKER")
    if marker:
        with open(marker, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    sys.stderr.write(f"tools_server {os.getpid()} starting\n")
    sys.stderr.flush()
    rendezvous.wait_for_peers()
    if os.environ.get("GRAPHCHAT_TEST_STRAY_STDOUT"):  # a careless server: not JSON-RPC on the wire
        sys.stdout.write("STRAY STDOUT LINE FROM THE SERVER\n")
        sys.stdout.flush()
    if args.http_fd is None:
        mcp.run()
        return
    import socket

    import anyio
    import uvicorn

    sock = socket.socket(fileno=args.http_fd)
    config = uvicorn.Config(mcp.streamable_http_app(), log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve, [sock])


if __name__ == "__main__":
    main()
