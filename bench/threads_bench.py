"""Thread store figures: `graphchat threads list` over 1,000 threads, loading a 10,000-message thread,
and one append. Prints figures (budgets in the README: list ≤ 0.25 s, load + repair ≤ 0.2 s).

Run: python bench/threads_bench.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from graphchat.threads import ThreadStore, to_model_messages
from graphchat.threads import lines as ev

THREADS = 1000
MESSAGES_PER_THREAD = 12
LONG_THREAD_MESSAGES = 10_000
RUNS = 5


def fill_turn(thread, n: int, result_chars: int = 400) -> int:
    """One turn: user, assistant with 2 calls, 2 results, answer, turn_end (5 messages)."""
    thread.append(ev.user(f"question {n}: what about item {n}?"))
    calls = [
        {"id": f"call_{k}", "name": "srv__lookup", "arguments": f'{{"item": {n}, "k": {k}}}'}
        for k in range(2)
    ]
    thread.append(ev.assistant(None, calls))
    for k in range(2):
        thread.append(ev.tool_result(f"call_{k}", "srv__lookup", "r" * result_chars, ms=12.5))
    thread.append(ev.assistant(f"Item {n} is fine. " * 5))
    thread.append(ev.turn_end({"calls": 2, "input_tokens": 900, "output_tokens": 40}, "openai/bench"))
    return 5


def median_time(fn, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="graphchat-threads-bench-"))
    try:
        store = ThreadStore(root / "threads")
        start = time.perf_counter()
        for i in range(THREADS):
            thread = store.create()
            written = 0
            while written < MESSAGES_PER_THREAD:
                written += fill_turn(thread, i)
            thread.close()
        print(
            f"setup: {THREADS} threads × ~{MESSAGES_PER_THREAD} messages in {time.perf_counter() - start:.2f} s"
        )

        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHAT_")}
        exe = shutil.which("graphchat", path=str(Path(sys.executable).parent)) or ""
        base = [exe] if exe else [sys.executable, "-m", "graphchat"]
        for extra in ([], ["--json"]):
            command = [*base, "--home", str(root), "threads", "list", *extra]

            def run(command: list[str] = command) -> None:
                subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)

            run()  # warm the page cache and bytecode
            label = " ".join(["threads list", *extra])
            print(
                f"`graphchat {label}` ({THREADS} threads, whole process): {median_time(run) * 1000:.0f} ms median of {RUNS}  (budget 250 ms)"
            )
        python_only = median_time(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True))
        print(f"  for comparison, a bare `python -c pass`: {python_only * 1000:.0f} ms")
        in_process = median_time(lambda: store.list())
        print(f"ThreadStore.list() in process: {in_process * 1000:.1f} ms")

        long_thread = store.create()
        written = 0
        turn = 0
        while written < LONG_THREAD_MESSAGES:
            written += fill_turn(long_thread, turn)
            turn += 1
        # leave an interrupted turn at the end, as a killed process would
        long_thread.append(ev.user("interrupted question"))
        long_thread.append(ev.assistant(None, [{"id": "call_0", "name": "srv__lookup", "arguments": "{}"}]))
        size_mb = long_thread.messages_path.stat().st_size / 1e6

        def load_and_repair() -> None:
            events, _ = long_thread.load()
            to_model_messages(events)

        events, _ = long_thread.load()
        load_only = median_time(lambda: long_thread.load())
        replay_only = median_time(lambda: to_model_messages(events))
        total = median_time(load_and_repair)
        print(
            f"load + repair a {written + 2:,}-message thread ({size_mb:.1f} MB): {total * 1000:.1f} ms median "
            f"(load {load_only * 1000:.1f} ms, replay {replay_only * 1000:.1f} ms)  (budget 200 ms)"
        )

        tail_event = ev.tool_result("call_0", "srv__lookup", "r" * 400, ms=3.0)
        append_plain = median_time(lambda: long_thread.append(tail_event), runs=201)
        end_event = ev.turn_end({"calls": 1}, "openai/bench")
        append_meta = median_time(lambda: long_thread.append(end_event), runs=201)
        print(
            f"one append on that thread: {append_plain * 1e6:.0f} µs (tool_result), "
            f"{append_meta * 1e6:.0f} µs (turn_end, rewrites meta.json)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
