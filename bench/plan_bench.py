"""Plan executor figures: `map` over 10,000 items with a native body (budget ≤ 1 s, ≤ 100 µs a
step of overhead), and `plan run` of the bundled no-model example (must not import litellm).

Also the map over 100,000 native items through the real `graphchat plan run`, journaled and
with --no-park (issue 19: within 5 s).

Run: python bench/plan_bench.py [--items N] [--runs R] [--run-items N] [--only-run-map].
Prints figures; never asserts on time.
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


def bench_tools(schema: bool) -> Any:
    """One native tool, as cheap as a tool can be, so the figure is the executor's overhead
    (plus, with `schema`, the catalog's argument validation of every call)."""
    from graphchat.catalog.base import ToolResult, ToolSource, ToolSpec

    class BenchTools(ToolSource):
        def specs(self) -> list[ToolSpec]:
            props = {"n": {"type": "integer"}, "at": {"type": "integer"}}
            input_schema = {"type": "object", "properties": props, "required": ["n"]}
            return [ToolSpec("bench__double", "double n", input_schema if schema else {}, "native", "read")]

        async def call(self, spec: Any, arguments: dict[str, Any], ctx: Any) -> ToolResult:
            return ToolResult({"n": arguments["n"] * 2})

    return BenchTools()


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
        catalog = Catalog([bench_tools(schema)])
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


RUN_MAP_PLAN = """identifier: bench_run_map
name: Bench run map
description: map over many items with a native body, through `graphchat plan run`
input_schema:
  type: object
  required: [xs]
  properties: {xs: {type: array}}
steps:
  - id: E0
    tool_name: map
    input:
      over: "{{input.xs}}"
      concurrency: 1
      do: {tool_name: builtin__reshape, input: {shape: {n: "{{item}}"}}}
output:
  count: "{{E0.count}}"
"""


def bench_plan_run_map(items: int, runs: int) -> None:
    """The map through the real `graphchat plan run` command, journaled (issue 19: appends
    batched, budget 5 s for 100,000 items) and with --no-park (not journaled).

    Bytecode caching is on, as for a user (PYTHONDONTWRITEBYTECODE dropped; one untimed run
    first writes the cache). Beside the wall time, the command's CPU time (user + sys) and the
    load average: on the shared machine the wall time follows the load, the CPU time much less."""
    import json
    import os
    import resource
    import tempfile

    def cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_CHILDREN)
        return used.ru_utime + used.ru_stime

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "bench_run_map.yaml").write_text(RUN_MAP_PLAN)
        (home / "input.json").write_text(json.dumps({"xs": list(range(items))}))
        (home / "one.json").write_text(json.dumps({"xs": [0]}))
        env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
        env.pop("GRAPHCHAT_HOME", None)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        base = [sys.executable, "-m", "graphchat", "plan", "run", "./bench_run_map.yaml"]
        subprocess.run([*base, "@one.json"], capture_output=True, cwd=tmp, env=env, check=True)
        for label, extra in (("journaled", []), ("--no-park", ["--no-park"])):
            times, cpus = [], []
            load = os.getloadavg()[0]
            for _ in range(runs):
                start, used = time.perf_counter(), cpu()
                run = subprocess.run(
                    [*base, "@input.json", *extra], capture_output=True, text=True, cwd=tmp, env=env
                )
                times.append(time.perf_counter() - start)
                cpus.append(cpu() - used)
                assert run.returncode == 0, run.stderr
                assert json.loads(run.stdout) == {"count": items}, run.stdout
            load = max(load, os.getloadavg()[0])
            print(
                f"plan run: map over {items:,} native items, {label}: median {statistics.median(times):.2f} s, "
                f"best {min(times):.2f} s wall (budget 5 s for 100,000); CPU median "
                f"{statistics.median(cpus):.2f} s; load average up to {load:.1f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--run-items", type=int, default=100_000, help="items of the map through `plan run`")
    parser.add_argument("--only-run-map", action="store_true", help="only the map through `plan run`")
    args = parser.parse_args()
    bench_plan_run_map(args.run_items, max(1, args.runs // 2))
    if args.only_run_map:
        return
    bench_map(args.items, args.runs, 1)
    bench_map(args.items, args.runs, 8)
    bench_map(args.items, args.runs, 1, schema=False)
    bench_plan_run(max(1, args.runs // 2))


if __name__ == "__main__":
    main()
