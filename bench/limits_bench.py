"""Issue 10 point 14's figures (printed, never asserted): the real `graphchat` command on a
scratch workspace.

- `plan run` of a `map` over N native items (default 100,000): wall time and peak RSS, and the
  shape file's seen_count (budget: ≤ 5 s, ≤ 200 MB);
- a server flooding stdout and stderr with junk: `tools call` wall time and the log sizes;
- `threads show` of a thread holding a 10 MB message: wall time and output size.

Run: python bench/limits_bench.py [--items N]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
HOSTILE = REPO / "tests" / "adversarial" / "raw_hostile_server.py"

MAP_PLAN = """identifier: many
name: Many
description: A map over many native items.
input_schema:
  type: object
  properties:
    xs: {type: array}
steps:
  - id: E1
    tool_name: map
    input:
      over: "{{input.xs}}"
      do: {tool_name: debug__sleep, input: {seconds: 0, label: "item {{item}}"}}
output:
  count: "{{E1.count}}"
"""


def workspace(root: Path) -> Path:
    ws = root / "ws"
    for sub in ("catalog", "plans", "threads"):
        (ws / sub).mkdir(parents=True)
    (ws / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 5\n")
    return ws


def env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHCHAT_", "OPENAI_", "ANTHROPIC_"))}
    return {**keep, "GRAPHCHAT_TEST_TOOLS": "1"}


def run(
    ws: Path, *args: str, extra: dict[str, str] | None = None
) -> tuple[float, int, subprocess.CompletedProcess[str]]:
    """Wall seconds, peak RSS (bytes) of the child, the finished process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "graphchat", "--home", str(ws), *args],
        env={**env(), **(extra or {})}, cwd=str(ws), capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(after, before) * 1024, done


def bench_map(items: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp))
        (ws / "plans" / "many.yaml").write_text(MAP_PLAN)
        doc = ws / "input.json"
        doc.write_text(json.dumps({"xs": list(range(items))}))
        wall, rss, done = run(ws, "plan", "run", "many", f"@{doc}")
        shape = ws / "catalog" / "shapes" / "debug__sleep.json"
        seen = json.loads(shape.read_text())["seen_count"] if shape.exists() else None
        print(
            f"plan run: map over {items:,} native items: {wall:.1f} s wall, peak RSS {rss / 1e6:.0f} MB, "
            f"exit {done.returncode}, shape seen_count {seen} (budget ≤ 5 s, ≤ 200 MB)"
        )


def bench_flood(lines: int = 200_000) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp))
        servers = {"mcpServers": {"h": {"command": sys.executable, "args": [str(HOSTILE)], "timeout_s": 300}}}
        (ws / "catalog" / "servers.yaml").write_text(json.dumps(servers))
        run(ws, "tools", "list")  # the tool list cached: the figure is the call
        wall, _, done = run(ws, "tools", "call", "h__flood", json.dumps({"lines": lines}))
        logs = ws / "catalog" / "logs"
        sizes = ", ".join(f"{p.name} {p.stat().st_size / 1e6:.2f} MB" for p in sorted(logs.iterdir()))
        junk = lines * 113 / 1e6
        print(
            f"tools call of a server flooding {junk:.0f} MB of junk each way: {wall:.1f} s, exit {done.returncode}; logs: {sizes}"
        )


def bench_threads_show() -> None:
    from graphchat.threads import lines as ev
    from graphchat.threads.store import ThreadStore

    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp))
        thread = ThreadStore(ws / "threads").create()
        thread.append(dict(ev.user("word " * 2_000_000)))
        thread.append(dict(ev.assistant("**answer** " * 1_000_000)))
        wall, rss, done = run(ws, "threads", "show", thread.id)
        print(
            f"threads show of a 10 MB user message and an 11 MB answer: {wall:.1f} s, "
            f"{len(done.stdout) / 1e3:.0f} KB shown, peak RSS {rss / 1e6:.0f} MB"
        )


def bench_big_result(mb: int = 50) -> None:
    from tests.scripted_server import ScriptedModelServer

    with tempfile.TemporaryDirectory() as tmp:
        ws = workspace(Path(tmp))
        servers = {"mcpServers": {"h": {"command": sys.executable, "args": [str(HOSTILE)], "timeout_s": 300}}}
        (ws / "catalog" / "servers.yaml").write_text(json.dumps(servers))
        model = ScriptedModelServer().start()
        try:
            model.push({"tool_calls": [{"name": "h__huge", "arguments": {"mb": mb}}]}, {"text": "big"})
            wall, rss, done = run(ws, "ask", "go", extra=model.env())
        finally:
            model.stop()
        thread = next((ws / "threads").iterdir()) / "messages.jsonl"
        print(
            f"ask with one {mb} MB tool result: {wall:.1f} s, peak RSS {rss / 1e6:.0f} MB (max of the "
            f"bench's children so far), thread {thread.stat().st_size / 1e6:.1f} MB, exit {done.returncode}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    args = parser.parse_args()
    bench_map(args.items)
    bench_flood()
    bench_threads_show()
    bench_big_result()


if __name__ == "__main__":
    main()
