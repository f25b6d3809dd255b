"""The warm `ask` against the cold one, through the real command (figures and ratios, no asserts).

Issue 14's table for graphchat in one run: the same scripted model server (in this process),
the same real stdio MCP server whose `slow` tool sleeps 0.5 s, the model asking for 8 such
calls in one round. Each run, interleaved so machine load affects all alike:
- `python -c "import litellm"` (LITELLM_LOCAL_MODEL_COST_MAP=True; the floor of a cold `ask`);
- cold `graphchat ask` with that round (GRAPHCHAT_WARM=0: litellm imported, the server started);
- warm `graphchat ask` with that round (handed to the helper `graphchat warm` started);
- warm `graphchat ask` with a plain answer (events as a person sees them, not JSONL): its whole
  time minus the model's own time (the server's time on the request), i.e. what graphchat adds
  to a question;
- `graphchat --help`.
The round is measured at the model server: from the arrival of the request whose reply asked
for the 8 calls to the arrival of the request carrying their results (physical limit 0.5 s).
Then one warm ask runs under `python -X importtime`: the client's heaviest imports, and whether
it imported litellm, mcp, httpx, pydantic or yaml (it must not). (importtime does not list a
module loaded by `importlib.import_module`, e.g. the `graphchat.cli.<group>` modules themselves,
but it lists everything they import.) CPU times (user + sys) of the warm client and of the
helper are given too: wall-clock figures grow with the machine's load, these much less.
Bytecode caching is on (PYTHONDONTWRITEBYTECODE dropped), as for a user.

The helper runs with a private XDG_RUNTIME_DIR and is always stopped at the end
(`graphchat warm --stop`, killed if that fails). Exits non-zero only when an ask fails.

Run: python bench/warm_bench.py [--runs N]   (median of N, default 5)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.round_bench import CALLS, SECONDS, TimedServer, _round_script  # noqa: E402
from tests.conftest import clean_env  # noqa: E402
from tests.servers.support import stdio, write_servers  # noqa: E402

HEAVY = ("litellm", "mcp", "httpx", "pydantic", "yaml")
BUDGET_COLD_RATIO = 1.15  # × (import litellm + 0.55 s)
BUDGET_WARM_ROUND = 0.8  # s, whole
BUDGET_WARM_PLAIN = 0.25  # s over the model's own time
BUDGET_ROUND = 0.55  # s


def _children_cpu() -> float:
    """CPU seconds (user + sys) of this process's finished children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_cpu(pid: int) -> float:
    """CPU seconds (user + sys, all its threads, in clock ticks) of a running process."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


class Bench:
    def __init__(self, root: Path, server: TimedServer) -> None:
        self.workspace = root / "ws"
        for sub in ("catalog", "plans", "threads"):
            (self.workspace / sub).mkdir(parents=True)
        (self.workspace / "graphchat.yaml").write_text("settings:\n  max_agent_iterations: 15\n")
        write_servers(self.workspace, {"t": stdio()})
        # a short path: a Unix socket's path holds at most 108 bytes
        self.runtime = Path(tempfile.mkdtemp(prefix="gwb", dir="/tmp"))
        os.chmod(self.runtime, 0o700)
        self.server = server
        self.env = clean_env(
            {**server.env(), "GRAPHCHAT_EVENTS": "jsonl", "XDG_RUNTIME_DIR": str(self.runtime)}, root
        )
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode caching on, as for a user
        self.cold_env = {**self.env, "GRAPHCHAT_WARM": "0"}
        self.pids: set[int] = set()
        self.helper = 0

    def command(self, *args: str, python: tuple[str, ...] = ()) -> list[str]:
        return [sys.executable, *python, "-m", "graphchat", "--home", str(self.workspace), *args]

    def run(self, command: list[str], env: dict[str, str], timeout: float = 180) -> tuple[float, Any]:
        started = time.perf_counter()
        done = subprocess.run(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=str(self.workspace),
        )
        return time.perf_counter() - started, done

    # --- the helper -------------------------------------------------------------------------------

    def start_helper(self) -> float:
        wall, done = self.run(self.command("warm"), self.env)
        if done.returncode != 0:
            raise SystemExit(f"graphchat warm failed ({done.returncode}): {done.stderr[-2000:]}")
        self.helper = int(done.stdout.strip())
        self.pids.add(self.helper)
        return wall

    def status(self) -> dict[str, Any]:
        _, done = self.run(self.command("warm", "--status", "--json"), self.env, timeout=60)
        try:
            return dict(json.loads(done.stdout))
        except ValueError:
            return {}

    def stop_helper(self) -> None:
        try:
            subprocess.run(
                self.command("warm", "--stop"), env=self.env, capture_output=True, timeout=60, check=False
            )
        except (OSError, subprocess.SubprocessError):
            pass
        for info in (self.runtime / "graphchat").glob("*.json"):
            try:
                self.pids.add(int(json.loads(info.read_text())["pid"]))
            except (OSError, ValueError, KeyError):
                pass
        for pid in self.pids:
            if _alive(pid):  # `--stop` did not end it
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.runtime, ignore_errors=True)

    # --- the measures -----------------------------------------------------------------------------

    def plain_ask(self, python: tuple[str, ...] = ()) -> tuple[dict[str, float], str]:
        self.server.take()
        self.server.push({"text": "hello"})
        cpu, helper_cpu = _children_cpu(), _process_cpu(self.helper)
        # the events as a person sees them (GRAPHCHAT_EVENTS is the client's own: the same helper)
        human = {k: v for k, v in self.env.items() if k != "GRAPHCHAT_EVENTS"}
        whole, done = self.run(self.command("ask", "hi", python=python), human)
        cpu, helper_cpu = _children_cpu() - cpu, _process_cpu(self.helper) - helper_cpu
        if done.returncode != 0 or done.stdout.strip() != "hello":
            raise SystemExit(f"warm plain ask failed ({done.returncode}): {done.stderr[-2000:]}")
        times = self.server.take()
        if len(times) != 1:
            raise SystemExit(f"warm plain ask: expected 1 model request, the server saw {len(times)}")
        ((arrived, answered),) = times
        model = answered - arrived
        row = {"whole": whole, "model": model, "over": whole - model, "cpu": cpu, "helper_cpu": helper_cpu}
        return row, done.stderr

    def help(self) -> float:
        wall, done = self.run(self.command("--help"), self.env)
        if done.returncode != 0:
            raise SystemExit(f"graphchat --help failed ({done.returncode}): {done.stderr[-2000:]}")
        return wall

    def python_pass(self) -> tuple[float, float]:
        cpu = _children_cpu()
        wall, _ = self.run([sys.executable, "-c", "pass"], self.env)
        return wall, _children_cpu() - cpu

    def import_litellm(self) -> float:
        env = {**self.env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        wall, done = self.run([sys.executable, "-c", "import litellm"], env)
        if done.returncode != 0:
            raise SystemExit(f"import litellm failed: {done.stderr[-2000:]}")
        return wall


def timed_ask(bench: Bench, env: dict[str, str], what: str) -> dict[str, float]:
    """A round ask, also timing where its start goes: from the command's start to the first
    model request, and from the last answer to the command's end."""
    bench.server.take()
    bench.server.push(*_round_script())
    started = time.perf_counter()
    _, done = bench.run(bench.command("ask", "go"), env)
    ended = time.perf_counter()
    if done.returncode != 0 or done.stdout.strip() != "done":
        raise SystemExit(f"{what} ask failed ({done.returncode}): {done.stderr[-2000:]}")
    times = bench.server.take()
    if len(times) != 2:
        raise SystemExit(f"{what} ask: expected 2 model requests, the server saw {len(times)}")
    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    tools = [e["ms"] / 1000 for e in events if e.get("event") == "tool_finished"]
    (arrived1, answered1), (arrived2, answered2) = times
    return {
        "whole": ended - started,
        "round": arrived2 - arrived1,
        "own": arrived2 - answered1 - max(tools),
        "to_first_request": arrived1 - started,
        "after_last_answer": ended - answered2,
    }


def importtimes(stderr: str) -> list[tuple[int, str, int]]:
    """(cumulative µs, module, nesting depth) of each `import time:` line."""
    found = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        try:
            _, cumulative, name = line[len("import time:") :].split("|", 2)
            depth = (len(name) - len(name.lstrip()) - 1) // 2
            found.append((int(cumulative), name.strip(), depth))
        except ValueError:
            continue
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the helper is stopped then too
    root = Path(tempfile.mkdtemp(prefix="graphchat-warm-bench-"))
    server = TimedServer()
    server.start()
    bench = Bench(root, server)
    load = os.getloadavg()[0]
    served = 0
    try:
        timed_ask(bench, bench.cold_env, "cold")  # warm-up: OS caches, the tool list cached
        warm_start = bench.start_helper()
        timed_ask(bench, bench.env, "warm")  # the helper's first turn (its own one-time set-up)
        served += 1
        imports: list[float] = []
        helps: list[float] = []
        passes: list[tuple[float, float]] = []
        cold: list[dict[str, float]] = []
        warm: list[dict[str, float]] = []
        plain: list[dict[str, float]] = []
        for _ in range(args.runs):
            imports.append(bench.import_litellm())
            cold.append(timed_ask(bench, bench.cold_env, "cold"))
            warm.append(timed_ask(bench, bench.env, "warm"))
            plain.append(bench.plain_ask()[0])
            helps.append(bench.help())
            passes.append(bench.python_pass())
            served += 2
        _, traced = bench.plain_ask(python=("-X", "importtime"))
        served += 1
        status = bench.status()
    finally:
        bench.stop_helper()
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    load = max(load, os.getloadavg()[0])

    def med(rows: list[dict[str, float]], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    imp, help_s = statistics.median(imports), statistics.median(helps)
    cold_whole, warm_whole = med(cold, "whole"), med(warm, "whole")
    plain_over = med(plain, "over")
    n = args.runs
    print(f"graphchat warm bench: {CALLS} x {SECONDS} s calls on one stdio MCP server, median of {n} runs")
    print(f"({os.cpu_count()} cores, load average up to {load:.1f} during the run)")
    print(f'python -c "import litellm"                {imp:6.3f} s')
    print(f'python -c "pass"                          {statistics.median(p[0] for p in passes):6.3f} s')
    print(f"graphchat --help                          {help_s:6.3f} s")
    print(f"graphchat warm (start the helper, once)   {warm_start:6.3f} s")
    for name, rows in (("cold", cold), ("warm", warm)):
        round_s = med(rows, "round")
        print(
            f"round at the model server, {name}          {round_s:6.3f} s   = "
            f"{round_s / SECONDS:.2f} x the {SECONDS} s limit (budget <= {BUDGET_ROUND} s)"
        )
        print(f"  graphchat's own part of the round       {med(rows, 'own') * 1000:6.1f} ms")
    ratio = cold_whole / (imp + 0.55)
    print(f"cold whole ask with that round            {cold_whole:6.3f} s")
    print(f"  ratio to import litellm                 {cold_whole / imp:6.2f}")
    print(f"  ratio to (import litellm + 0.55 s)      {ratio:6.2f}   (budget <= {BUDGET_COLD_RATIO})")
    print(f"  start to first model request            {med(cold, 'to_first_request'):6.3f} s")
    print(
        f"warm whole ask with that round            {warm_whole:6.3f} s   (budget <= {BUDGET_WARM_ROUND} s)"
    )
    print(f"  ratio to import litellm                 {warm_whole / imp:6.2f}")
    print(f"  ratio to the cold ask                   {warm_whole / cold_whole:6.2f}")
    print(f"  start to first model request            {med(warm, 'to_first_request') * 1000:6.1f} ms")
    print(f"  last answer to exit                     {med(warm, 'after_last_answer') * 1000:6.1f} ms")
    print(f"warm plain ask, whole                     {med(plain, 'whole'):6.3f} s")
    print(f"  the model's own time (server)           {med(plain, 'model') * 1000:6.1f} ms")
    print(
        f"  graphchat's time over it                {plain_over * 1000:6.1f} ms"
        f"  (budget <= {BUDGET_WARM_PLAIN * 1000:.0f} ms)"
    )
    print("CPU time (user + sys; steadier than wall clock on a busy machine):")
    print(
        f'  python -c "pass"                        {statistics.median(p[1] for p in passes) * 1000:6.1f} ms'
    )
    print(f"  warm plain ask, the client              {med(plain, 'cpu') * 1000:6.1f} ms")
    print(
        f"  warm plain ask, the helper              {med(plain, 'helper_cpu') * 1000:6.1f} ms  (10 ms ticks)"
    )
    turns = status.get("turns_served")
    print(f"turns the helper served                   {turns} (of {served} warm asks)")
    if turns != served:
        print("  WARNING: some warm asks ran locally, not in the helper: the warm figures are not warm")

    found = importtimes(traced)
    print("the warm client's imports (python -X importtime), top 10 by cumulative time:")
    for cumulative, name, _ in sorted(found, reverse=True)[:10]:
        print(f"  {cumulative / 1000:7.1f} ms  {name}")
    modules = {name for _, name, _ in found}
    heavy = sorted({top for top in HEAVY for m in modules if m == top or m.startswith(top + ".")})
    total = sum(us for us, _, depth in found if depth == 0)  # outermost imports only: no double count
    print(f"  all outermost imports                   {total / 1000:6.1f} ms ({len(found)} modules)")
    print(
        f"  {', '.join(HEAVY)} imported: "
        + (", ".join(heavy) if heavy else "none of them")
        + ("" if not heavy else "  <- the client must import none of these")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
