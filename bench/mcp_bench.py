"""MCP benchmarks (figures only, no asserts): run `python bench/mcp_bench.py`.

- one round of 8 parallel calls sleeping 0.5 s, all on ONE stdio server (budget ≤ 0.6 s)
- `graphchat tools list` from the cache with 5 configured servers (budget ≤ 0.25 s, no start)
- a whole `graphchat ask` whose model asks for that round, against the scripted model
  (budget ≤ 3.0 s)
- recording the shape of a 1 MB result (budget ≤ 50 ms)
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from graphchat.catalog.base import CallContext  # noqa: E402
from graphchat.sources import build_catalog  # noqa: E402
from graphchat.workspace import load_settings  # noqa: E402
from tests.conftest import clean_env  # noqa: E402
from tests.scripted_server import ScriptedModelServer  # noqa: E402
from tests.servers.support import pids, seed_cache, stdio, write_servers  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "5"))


def new_workspace(root: Path, name: str) -> Path:
    ws = root / name
    (ws / "catalog").mkdir(parents=True)
    (ws / "graphchat.yaml").write_text("")
    return ws


def graphchat(ws: Path, *args: str, env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "graphchat", "--home", str(ws), *args],
        env=clean_env(env, ws.parent),
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"graphchat {' '.join(args)} failed: {done.stderr}")
    return elapsed


async def parallel_round(ws: Path) -> list[float]:
    write_servers(ws, {"t": stdio()})
    catalog = build_catalog(load_settings(ws), include_plans=False, record_shapes=False)
    ctx = CallContext(assume_yes=True)
    times = []
    try:
        await catalog.prepare()  # started once; the round is what is measured
        for _ in range(RUNS):
            started = time.perf_counter()
            results = await asyncio.gather(
                *(catalog.call("t__slow", {"seconds": 0.5, "label": str(i)}, ctx) for i in range(8))
            )
            times.append(time.perf_counter() - started)
            assert not any(r.is_error for r in results)
    finally:
        await catalog.aclose()
    return times


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        times = asyncio.run(parallel_round(new_workspace(root, "round")))
        print(f"8 parallel 0.5 s calls on one stdio server: median {statistics.median(times):.3f} s "
              f"(min {min(times):.3f}, budget 0.6)")  # fmt: skip

        ws = new_workspace(root, "five")
        marker = ws / "starts"
        write_servers(ws, {f"s{i}": stdio(marker=marker) for i in range(5)})
        seed_cache(ws)
        graphchat(ws, "tools", "list")  # warm the OS caches
        times = [graphchat(ws, "tools", "list") for _ in range(RUNS)]
        print(f"tools list from cache, 5 servers: median {statistics.median(times):.3f} s "
              f"(min {min(times):.3f}, budget 0.25); servers started: {len(pids(marker))}")  # fmt: skip

        ws = new_workspace(root, "ask")
        write_servers(ws, {"t": stdio()})
        seed_cache(ws)
        model = ScriptedModelServer().start()
        try:
            times = []
            for _ in range(max(3, RUNS // 2)):
                model.push(
                    {"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 0.5, "label": str(i)}}
                                    for i in range(8)]},
                    {"text": "done"},
                )  # fmt: skip
                times.append(graphchat(ws, "ask", "go", env=model.env()))
        finally:
            model.stop()
        print(f"whole ask, one round of 8 x 0.5 s on one stdio server: median {statistics.median(times):.3f} s "
              f"(min {min(times):.3f}, budget 3.0)")  # fmt: skip

        from graphchat.shapes import ShapeStore

        value = {
            "records": [{"id": i, "name": f"item-{i}", "body": "x" * 200, "tags": ["a"]} for i in range(4000)]
        }
        store = ShapeStore(root / "shapes")
        times = []
        for _ in range(RUNS):
            started = time.perf_counter()
            store.record("t__huge", value)
            times.append(time.perf_counter() - started)
        print(f"record the shape of a 1 MB result: median {statistics.median(times) * 1000:.1f} ms "
              f"(budget 50 ms)")  # fmt: skip


if __name__ == "__main__":
    main()
