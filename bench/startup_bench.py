"""Start-up figures: median wall time of `graphchat --help` (budget ≤ 0.15 s, see the README) and,
for comparison, of `python -c "import litellm"` (what a model call costs before it starts).

Run: python bench/startup_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time


def median_wall(command: list[str], runs: int, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    help_s = median_wall([sys.executable, "-m", "graphchat", "--help"], args.runs, env)
    litellm_s = median_wall([sys.executable, "-c", "import litellm"], max(3, args.runs // 2), env)
    print(f"graphchat --help           median {help_s:.3f} s over {args.runs} runs (budget 0.150 s)")
    print(f'python -c "import litellm" median {litellm_s:.3f} s (for comparison)')


if __name__ == "__main__":
    main()
