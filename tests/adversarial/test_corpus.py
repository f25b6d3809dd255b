"""The growing adversarial corpus (issue 10, "Must show"): every hostile file in `corpus/` runs
through `tools call`, `ask`, `plan run` and `threads show` on a pseudo-terminal, and each command
must end with the expected exit code, at most one `error:` line and no traceback, no control
character of the attacker's on the terminal, no server process left running, and the thread
still readable with the turn in it.

Adding a case is adding a file:

- `corpus/tools/<case>.json`: one hostile tool served by hostile_server.py (its name,
  description, schemas and result, see that file), with `about`, optional `exit` (the exit code
  of "tools call" / "plan run" when not 0) and `shows` (texts `tools call` must print whole).
- `corpus/yaml/<case>.yaml`: a hostile YAML file. `plan_*.yaml` is dropped in `plans/` (commands
  that do not run it work; running it is one error naming it); any other is the workspace's
  `graphchat.yaml` (every command that needs it is a config error naming it, exit 2, and the
  thread made before it arrived is still readable).
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect
import pytest

from graphchat.naming import tool_name
from tests.adversarial.support import CORPUS, HOSTILE_SERVER
from tests.conftest import GraphchatRunner, clean_env
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import alive, pids, write_servers

# every case runs `graphchat` on a pseudo-terminal (pexpect): the process tier
pytestmark = pytest.mark.process

TOOL_CASES = sorted((CORPUS / "tools").glob("*.json"))
YAML_CASES = sorted((CORPUS / "yaml").glob("*.yaml"))
SERVER = "h"
ANSWER = "All done."
# What graphchat itself writes on a terminal (the spinner erasing its line, cursor hiding,
# colours); the corpus never uses these, so anything else is the attacker's getting through.
OWN_SEQUENCES = re.compile(r"\x1b\[(?:2K|\?25[lh]|[0-9;]*m|[0-9]*A)|\r")  # [nA: the live answer redrawn


@dataclass
class Shown:
    exit: int
    text: str  # everything the terminal received


def attacker_controls(raw: str) -> list[str]:
    """Control characters (C0 but newline and tab, DEL, C1) left once graphchat's own are gone."""
    text = OWN_SEQUENCES.sub("", raw)
    return [c for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) <= 0x9F]


def on_terminal(workspace: Path, env: dict[str, str], *args: str) -> Shown:
    child = pexpect.spawn(
        sys.executable,
        ["-m", "graphchat", "--home", str(workspace), *args],
        env=clean_env({**env, "TERM": "xterm-256color", "NO_COLOR": "1"}, workspace.parent),
        cwd=str(workspace), dimensions=(30, 120), encoding="utf-8", codec_errors="replace", timeout=60,
    )  # fmt: skip
    text = child.read()
    child.close()
    assert child.exitstatus is not None, f"graphchat {' '.join(args)} died of signal {child.signalstatus}"
    return Shown(child.exitstatus, text)


class Bench:
    """One workspace with the case's server, a model server, and the checks every command gets."""

    def __init__(self, workspace: Path, model: ScriptedModelServer, tool: dict[str, Any]) -> None:
        self.workspace, self.model = workspace, model
        self.marker = workspace.parent / "server-pids"
        self.name = tool_name(SERVER, tool["name"])
        env = {"HOSTILE_SPEC": json.dumps({"tools": [tool]}), "GRAPHCHAT_TEST_MARKER": str(self.marker)}
        write_servers(workspace, {SERVER: {"command": sys.executable, "args": [HOSTILE_SERVER], "env": env}})
        (workspace / "plans" / "corpus_case.yaml").write_text(
            "identifier: corpus_case\nname: Corpus case\ndescription: one step calling the case's tool\n"
            f"steps:\n  - id: E0\n    tool_name: {json.dumps(self.name)}\n    input: {{}}\n"
            "output: {result: '{{E0}}'}\n"
        )

    def run(self, expected: int, *args: str) -> Shown:
        shown = on_terminal(self.workspace, self.model.env(), *args)
        where = f"graphchat {' '.join(args)}:\n{shown.text}"
        assert shown.exit == expected, where
        assert "Traceback" not in shown.text, where
        assert len([line for line in shown.text.splitlines() if line.startswith("error:")]) <= 1, where
        assert attacker_controls(shown.text) == [], where
        assert [pid for pid in pids(self.marker) if alive(pid)] == [], f"a server outlived {where}"
        return shown

    def ask(self, expected: int = 0) -> Shown:
        self.push_turn()
        return self.run(expected, "ask", "run the case's tool")

    def push_turn(self) -> None:
        self.model.push({"tool_calls": [{"name": self.name, "arguments": {}}]}, {"text": ANSWER})

    def thread(self) -> str:
        threads = [path.name for path in (self.workspace / "threads").iterdir() if path.is_dir()]
        assert len(threads) == 1, threads
        return threads[0]

    def thread_readable(self, thread: str) -> None:
        shown = self.run(0, "threads", "show", thread)
        assert "run the case's tool" in shown.text and ANSWER in shown.text, shown.text


@pytest.mark.parametrize("case", TOOL_CASES, ids=[path.stem for path in TOOL_CASES])
def test_a_hostile_tool(workspace: Path, model_server: ScriptedModelServer, case: Path) -> None:
    spec = json.loads(case.read_text())
    exits = {"tools call": 0, "plan run": 0, **spec.get("exit", {})}
    bench = Bench(workspace, model_server, spec["tool"])

    called = bench.run(exits["tools call"], "tools", "call", bench.name, "{}")
    for text in spec.get("shows", []):
        assert text in called.text, called.text
    bench.ask()
    thread = bench.thread()
    bench.run(exits["plan run"], "plan", "run", "corpus_case")
    bench.thread_readable(thread)
    assert pids(bench.marker), "the case's server never started"


@pytest.mark.parametrize("case", YAML_CASES, ids=[path.stem for path in YAML_CASES])
def test_a_hostile_yaml_file(
    workspace: Path, model_server: ScriptedModelServer, case: Path, cli: GraphchatRunner
) -> None:
    bench = Bench(workspace, model_server, {"name": "ok", "result": {"ok": True}})
    if case.name.startswith("plan_"):
        shutil.copy(case, workspace / "plans" / case.name)
        bench.run(0, "tools", "call", bench.name, "{}")
        bench.ask()
        failed = bench.run(1, "plan", "run", str(workspace / "plans" / case.name))
        assert case.name in failed.text, failed.text
        bench.thread_readable(bench.thread())
        return

    # a thread from before the hostile file arrived: made in process (no hostile input yet, so
    # nothing for the terminal to show); what follows is on the terminal
    bench.push_turn()
    made = cli("ask", "run the case's tool", env=model_server.env())
    assert made.returncode == 0 and made.stdout == f"{ANSWER}\n", made.stderr
    thread = bench.thread()
    shutil.copy(case, workspace / "graphchat.yaml")
    for command in (("tools", "call", bench.name, "{}"), ("ask", "again"), ("plan", "run", "corpus_case")):
        refused = bench.run(2, *command)
        assert "graphchat.yaml" in refused.text, refused.text
    bench.thread_readable(thread)  # reading a thread needs no configuration: nothing lost
    assert len(model_server.requests) == 2  # the refused ask never reached the model
