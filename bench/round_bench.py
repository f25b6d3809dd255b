"""The tool round and the cold `ask`, through the real command (figures and ratios, no asserts).

Each run, interleaved so machine load affects all alike:
- `python -c "import litellm"` (the floor of any cold `ask`);
- `graphchat ask` (subprocess, real catalog with shape recording, events on stderr as JSONL) whose
  scripted model asks for 8 calls of `t__slow` (0.5 s each) in one round on one real stdio MCP
  server, then answers.

Measured at the model server (tests/scripted_server.py, in this process):
- the round: from the arrival of the request whose reply asked for the 8 calls to the arrival of
  the request carrying their results (physical limit 0.5 s);
- graphchat's own part of it: the round minus the server's reply time and minus the slowest call
  (the longest `tool_finished` ms, which includes the MCP round trip);
- a model call's overhead: its `llm_call` ms minus the server's time on that request; the first
  call's extra over the second is litellm's one-time lazy set-up (and graphchat's first-call work);
- the CPU time (user + sys) of the import and of the whole ask (with its MCP server), which a
  busy machine disturbs far less than wall-clock time; and, with the same ask run once inside
  this process, the CPU time of graphchat's main thread (its event loop) during the round.

Run: python bench/round_bench.py [--runs N]   (median of N, default 5)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.conftest import clean_env  # noqa: E402
from tests.scripted_server import ScriptedModelServer  # noqa: E402
from tests.servers.support import stdio, write_servers  # noqa: E402

CALLS = 8
SECONDS = 0.5


class TimedServer(ScriptedModelServer):
    """The scripted server, also recording when each model request arrived and was answered."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[float, float]] = []  # (arrived, answered), perf_counter
        self.cpu_clock: int | None = None  # a thread's CPU clock to read at each arrival
        self.cpus: list[float] = []
        self._times_lock = threading.Lock()
        base: Any = self.http.RequestHandlerClass
        owner = self

        class Timed(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                arrived = time.perf_counter()
                if owner.cpu_clock is not None and self.path.endswith("/chat/completions"):
                    owner.cpus.append(time.clock_gettime(owner.cpu_clock))
                super().do_POST()
                if self.path.endswith("/chat/completions"):
                    with owner._times_lock:
                        owner.times.append((arrived, time.perf_counter()))

        self.http.RequestHandlerClass = Timed

    def take(self) -> list[tuple[float, float]]:
        with self._times_lock:
            times, self.times = self.times, []
        return sorted(times)


def _cpu() -> float:
    """CPU seconds (user + sys) of the finished child processes so far (with their children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wall(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    cpu, started = _cpu(), time.perf_counter()
    subprocess.run(command, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=True)
    return time.perf_counter() - started, _cpu() - cpu


def _round_script() -> list[dict[str, Any]]:
    calls = [{"name": "t__slow", "arguments": {"seconds": SECONDS, "label": str(i)}} for i in range(CALLS)]
    return [{"tool_calls": calls}, {"text": "done"}]


def one_ask(ask: list[str], env: dict[str, str], server: TimedServer) -> dict[str, float]:
    server.take()
    server.push(*_round_script())
    cpu, started = _cpu(), time.perf_counter()
    done = subprocess.run(ask, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    whole = time.perf_counter() - started
    cpu = _cpu() - cpu
    if done.returncode != 0 or done.stdout.strip() != "done":
        raise SystemExit(f"graphchat ask failed ({done.returncode}): {done.stderr[-2000:]}")
    times = server.take()
    if len(times) != 2:
        raise SystemExit(f"expected 2 model requests, the server saw {len(times)}")
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    llm = [e["ms"] / 1000 for e in events if e.get("event") == "llm_call"]
    tools = [e["ms"] / 1000 for e in events if e.get("event") == "tool_finished"]
    (arrived1, answered1), (arrived2, answered2) = times
    round_s = arrived2 - arrived1
    return {
        "whole": whole,
        "cpu": cpu,
        "round": round_s,
        "slowest_call": max(tools),
        "own": arrived2 - answered1 - max(tools),
        "first_overhead": llm[0] - (answered1 - arrived1),
        "second_overhead": llm[1] - (answered2 - arrived2),
    }


def in_process_round_cpu(workspace: Path, env: dict[str, str], server: TimedServer) -> float:
    """The CPU time graphchat's main thread (its event loop) spends between the two requests,
    with the same `ask` run once in this process (cold: litellm is imported by it)."""
    import contextlib
    import io

    os.environ.clear()
    os.environ.update(env)
    server.cpu_clock = time.pthread_getcpuclockid(threading.main_thread().ident)  # type: ignore[arg-type]
    server.cpus.clear()
    server.take()
    server.push(*_round_script())
    from graphchat.cli.main import main as graphchat_main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = graphchat_main(["--home", str(workspace), "ask", "go"])
    if code != 0 or len(server.cpus) != 2:
        raise SystemExit(f"in-process ask failed ({code}): {err.getvalue()[-2000:]}")
    return server.cpus[1] - server.cpus[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="graphchat-round-bench-"))
    workspace = root / "ws"
    for sub in ("catalog", "plans", "threads"):
        (workspace / sub).mkdir(parents=True)
    (workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
    write_servers(workspace, {"t": stdio()})
    server = TimedServer().start()
    env = clean_env({**server.env(), "GRAPHCHAT_EVENTS": "jsonl"}, root)
    import_env = {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    ask = [sys.executable, "-m", "graphchat", "--home", str(workspace), "ask", "go"]

    one_ask(ask, env, server)  # warm-up: OS caches, the server's tool list cached as any first use would
    imports, import_cpus, runs = [], [], []
    for _ in range(args.runs):
        wall, cpu = _wall([sys.executable, "-c", "import litellm"], import_env)
        imports.append(wall)
        import_cpus.append(cpu)
        runs.append(one_ask(ask, env, server))
    round_cpu = in_process_round_cpu(workspace, env, server)
    server.stop()

    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    imp, whole, round_s = statistics.median(imports), med("whole"), med("round")
    first, second = med("first_overhead"), med("second_overhead")
    n = args.runs
    print(f"graphchat round bench: {CALLS} x {SECONDS} s calls on one stdio MCP server, median of {n} runs")
    print(f'python -c "import litellm"            {imp:6.3f} s')
    print(
        f"round at the model server             {round_s:6.3f} s   = {round_s / SECONDS:.2f} x the {SECONDS} s limit"
    )
    print(f"  slowest call (tool_finished)        {med('slowest_call'):6.3f} s")
    print(
        f"  graphchat's own part of the round   {med('own') * 1000:6.1f} ms  (round - server reply - slowest call)"
    )
    print(f"first model call overhead             {first * 1000:6.1f} ms  (llm_call ms - server time)")
    print(f"second model call overhead            {second * 1000:6.1f} ms")
    print(f"  one-time set-up on the first call   {(first - second) * 1000:6.1f} ms  (first - second)")
    print(f"cold whole ask with that round        {whole:6.3f} s")
    print(f"  ratio to import litellm             {whole / imp:6.2f}")
    print(f"  ratio to (import litellm + 0.55 s)  {whole / (imp + 0.55):6.2f}")
    print(f"  overhead beyond import + round      {(whole - imp - round_s) * 1000:6.0f} ms")
    imp_cpu, ask_cpu = statistics.median(import_cpus), med("cpu")
    print("CPU time (user + sys; steadier than wall clock on a busy machine):")
    print(
        f"  graphchat's main thread in the round{round_cpu * 1000:6.1f} ms  (the same ask run once in-process)"
    )
    print(f'  python -c "import litellm"          {imp_cpu:6.3f} s')
    print(f"  whole ask (with its MCP server)     {ask_cpu:6.3f} s   = {ask_cpu / imp_cpu:.2f} x the import")


if __name__ == "__main__":
    main()
