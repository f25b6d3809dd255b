"""Plan executor figures: `map` over 10,000 items with a native body (budget ≤ 1 s, ≤ 100 µs a
step of overhead), and `plan run` of the bundled no-model example (must not import litellm).

Run: python bench/plan_bench.py [--items N] [--runs R]. Prints figures; never asserts on time.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MAP_PLAN = {
    "identifier": "bench_map",
    "name": "Bench map",
    "description": "map over many items with a native body",
    "input_schema": {"type": "object", "required": ["xs"], "properties": {"xs": {"type": "array"}}},
    "steps": [
        {
            "id": "E0",
            "tool_name": "map",
            "input": {
                "over": "{{input.xs}}",
                "concurrency": 1,
                "do": {"tool_name": "bench__double", "input": {"n": "{{item.n}}", "at": "{{index}}"}},
            },
        }
    ],
    "output": {"count": "{{E0.count}}", "last": "{{E0.results.9999}}"},
}


def _tool_source() -> type:
    from graphchat.catalog.base import ToolSource

    return ToolSource


class BenchTools(_tool_source()):  # type: ignore[misc]
    """One native tool, as cheap as a tool can be, so the figure is the executor's overhead
    (plus, with `schema`, the catalog's argument validation of every call). A `ToolSource`,
    so the catalog's lifecycle calls (`unprepared`, `prepare`, …) find their no-op defaults."""

    def __init__(self, schema: bool) -> None:
        self.schema = schema

    def specs(self) -> list[Any]:
        from graphchat.catalog.base import ToolSpec

        schema = {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "at": {"type": "integer"}},
            "required": ["n"],
        }
        return [ToolSpec("bench__double", "double n", schema if self.schema else {}, "native", "read")]

    async def call(self, spec: Any, arguments: dict[str, Any], ctx: Any) -> Any:
        from graphchat.catalog.base import ToolResult

        return ToolResult({"n": arguments["n"] * 2})

    async def aclose(self) -> None:
        pass


def bench_map(items: int, runs: int, concurrency: int, schema: bool = True) -> None:
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.events import EventSink
    from graphchat.plans.executor import run_plan
    from graphchat.plans.loader import load_plan_data

    data = dict(MAP_PLAN)
    data["steps"] = [dict(MAP_PLAN["steps"][0])]
    data["steps"][0]["input"] = {**data["steps"][0]["input"], "concurrency": concurrency}
    data["output"] = {"count": "{{E0.count}}", "last": f"{{{{E0.results.{items - 1}}}}}"}
    plan = load_plan_data(data, "<bench>")
    xs = [{"n": i} for i in range(items)]
    times = []
    for _ in range(runs):
        catalog = Catalog([BenchTools(schema)])
        start = time.perf_counter()
        outcome = asyncio.run(
            run_plan(plan, {"xs": xs}, catalog=catalog, ctx=CallContext(events=EventSink()), llm_factory=None)
        )
        times.append(time.perf_counter() - start)
        assert outcome.kind == "ok", outcome.error
        assert outcome.output["count"] == items and outcome.steps_executed == items + 1
    best, median = min(times), statistics.median(times)
    print(
        f"map over {items:,} items, native body{'' if schema else ' (no input schema)'}, "
        f"concurrency {concurrency}: "
        f"median {median:.3f} s, best {best:.3f} s, {median / items * 1e6:.1f} µs a step (budget 1 s, 100 µs)"
    )


def bench_plan_run(runs: int) -> None:
    base = [sys.executable, "-m", "graphchat", "--home", str(REPO), "plan", "run", "world_clock"]
    times = []
    rc = 0
    for _ in range(runs):
        start = time.perf_counter()
        run = subprocess.run(base, capture_output=True, text=True, cwd=str(REPO))
        times.append(time.perf_counter() - start)
        rc = run.returncode
    # A separate run under -X importtime: which heavy modules the no-model run imported.
    traced = subprocess.run(
        [sys.executable, "-X", "importtime", *base[1:]], capture_output=True, text=True, cwd=str(REPO)
    )
    imported = [m for m in ("litellm", "openai") if f"| {m}" in traced.stderr]
    print(
        f"plan run world_clock (no model, starts the time server): median {statistics.median(times):.3f} s wall, "
        f"exit {rc}, imported litellm/openai: {', '.join(imported) or 'none'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    bench_map(args.items, args.runs, 1)
    bench_map(args.items, args.runs, 8)
    bench_map(args.items, args.runs, 1, schema=False)
    bench_plan_run(max(1, args.runs // 2))


if __name__ == "__main__":
    main()
