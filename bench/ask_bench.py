"""`ask` figures against the instant scripted model server (budgets in the README):

- overhead of a whole `graphchat ask` (no tools) beyond `python -c "import litellm"` (budget ≤ 0.3 s);
- one round of 8 parallel native `debug__sleep` calls of 0.5 s each (limit 0.5 s), measured from the
  thread's own timestamps (assistant event → last result), and the whole command's wall time.

Run: python bench/ask_bench.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.scripted_server import ScriptedModelServer  # noqa: E402


def _env(server: ScriptedModelServer, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHCHAT_", "OPENAI_", "LITELLM_"))}
    env.update(server.env())
    env.update(
        {
            "GRAPHCHAT_TEST_TOOLS": "1",
            "XDG_DATA_HOME": str(home / ".xdg"),
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        }
    )
    return env


def _wall(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - started


def _ts(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="graphchat-ask-bench-"))
    workspace = root / "ws"
    (workspace / "threads").mkdir(parents=True)
    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
    server = ScriptedModelServer().start()
    server.default = {"text": "ok"}
    env = _env(server, root)
    ask = [sys.executable, "-m", "graphchat", "--home", str(workspace), "ask"]

    import_s, ask_s = [], []
    for _ in range(args.runs):  # interleaved, so machine load affects both alike
        import_s.append(_wall([sys.executable, "-c", "import litellm"], env))
        ask_s.append(_wall([*ask, "hi"], env))
    imp, whole = statistics.median(import_s), statistics.median(ask_s)
    print(f'python -c "import litellm"        median {imp:.3f} s over {args.runs} runs')
    print(f"graphchat ask (no tools)          median {whole:.3f} s")
    print(f"ask overhead beyond import        {whole - imp:+.3f} s (budget 0.300 s)")

    rounds, walls = [], []
    for _ in range(args.runs):
        calls = [{"name": "debug__sleep", "arguments": {"seconds": 0.5, "label": str(i)}} for i in range(8)]
        server.push({"tool_calls": calls}, {"text": "done"})
        started = time.perf_counter()
        done = subprocess.run(
            [*ask, "sleep", "--json"],
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            check=True,
        )
        walls.append(time.perf_counter() - started)
        thread_id = json.loads(done.stdout)["thread_id"]
        events = [
            json.loads(line)
            for line in (workspace / "threads" / thread_id / "messages.jsonl").read_text().splitlines()
        ]
        assistant = next(e for e in events if e["kind"] == "assistant")
        last = [e for e in events if e["kind"] == "tool_result"][-1]
        rounds.append(_ts(last["ts"]) - _ts(assistant["ts"]))
    print(
        f"round of 8 parallel 0.5 s calls   median {statistics.median(rounds):.3f} s (limit 0.500 s, budget 0.600 s)"
    )
    print(f"whole ask with that round         median {statistics.median(walls):.3f} s")
    server.stop()


if __name__ == "__main__":
    main()
