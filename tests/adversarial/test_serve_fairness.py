"""Issue 18 point 5: under `graphchat mcp serve`, one long call never holds up a concurrent
short one in the same session. Before, a plan whose steps never wait (a `map` over control
steps) kept the event loop until it ended: a 0.01 s plan answered only after the big one.

A real MCP client session (the mcp SDK's stdio client) against the `graphchat mcp serve`
subprocess sends a long and a short call at once; the short one comes back first."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tests.mcp_server.test_serve import make_workspace, serve, text_of

pytestmark = pytest.mark.process  # `graphchat mcp serve` is a process an MCP client talks to over its stdio

LONG = """identifier: long_map
name: Long map
description: A map over many items whose body never waits (a control step).
input_schema:
  type: object
  required: [xs]
  properties:
    xs: {type: array}
steps:
  - id: E0
    tool_name: map
    input:
      over: "{{input.xs}}"
      do: {tool_name: filter, input: {over: [1, 2, 3], where: {value: "{{item}}", op: gt, to: 1}}}
  - id: E1
    tool_name: filter
    input: {over: "{{input.xs}}", where: {value: "{{item}}", op: gt, to: 5}}
output:
  count: "{{E0.count}}"
  kept: "{{E1.count}}"
"""


async def test_a_short_call_returns_before_a_concurrent_long_one(workspace: Path) -> None:
    make_workspace(workspace)
    (workspace / "plans" / "long_map.yaml").write_text(LONG)
    items = list(range(40_000))
    async with serve(workspace) as client:
        warm = await client.call_tool("plan_numbers", {"limit": 2, "label": "warm"})  # imports done
        assert not warm.is_error, text_of(warm)

        finished: list[str] = []
        started = time.perf_counter()

        async def call(name: str, arguments: dict) -> tuple[float, str]:
            result = await client.call_tool(name, arguments)
            finished.append(name)
            assert not result.is_error, text_of(result)
            return time.perf_counter() - started, text_of(result)

        long = asyncio.create_task(call("plan_long_map", {"xs": items}))
        await asyncio.sleep(0.3)  # the long plan is running
        short_sent = time.perf_counter()
        short_at, short_text = await call("plan_numbers", {"limit": 2, "label": "short"})
        short_took = time.perf_counter() - short_sent
        assert not long.done(), "the long call ended before the short one was answered"
        long_at, long_text = await long

    assert finished == ["plan_numbers", "plan_long_map"]
    assert '"big":[3,4]' in short_text.replace(" ", "")
    assert '"count":40000' in long_text.replace(" ", "")
    # The short call waited for its own work and a few slices of the loop, not for the long one.
    assert short_took < 1.0, f"short call took {short_took:.2f} s beside the long one"
    assert long_at > short_at


NAP = """identifier: nap
name: Nap
description: Sleep a while (a test tool).
input_schema:
  type: object
  properties:
    label: {type: string}
steps:
  - id: E0
    tool_name: debug__sleep
    input: {seconds: 1.5, label: "{{input.label}}"}
output:
  label: "{{E0.label}}"
"""


async def test_calls_run_at_once_up_to_the_limit_and_the_next_waits_for_a_place(workspace: Path) -> None:
    from graphchat.mcp_server.server import MAX_RUNNING_CALLS

    make_workspace(workspace)
    (workspace / "plans" / "nap.yaml").write_text(NAP)
    async with serve(workspace, env={"GRAPHCHAT_TEST_TOOLS": "1"}) as client:
        warm = await client.call_tool("plan_numbers", {"limit": 2, "label": "warm"})
        assert not warm.is_error, text_of(warm)
        started = time.perf_counter()

        async def nap(i: int) -> float:
            result = await client.call_tool("plan_nap", {"label": str(i)})
            assert not result.is_error, text_of(result)
            return time.perf_counter() - started

        ends = sorted(await asyncio.gather(*(nap(i) for i in range(MAX_RUNNING_CALLS + 1))))
    # The first MAX_RUNNING_CALLS ran together (one nap, not eight); the last one waited for a place.
    assert ends[MAX_RUNNING_CALLS - 1] < 1.5 * 2, ends
    assert ends[-1] >= 1.5 * 2 - 0.1, ends
