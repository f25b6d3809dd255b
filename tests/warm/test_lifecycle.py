"""The warm helper's life (issue 14, item 2): `graphchat warm` starts it, `--status` shows it,
`--stop`, the idle time and a change of configuration end it; GRAPHCHAT_WARM and
`settings.warm` switch it; a helper of another identity, a dead one or one that does not answer
is never used (the question runs locally, without a word); a helper dying mid-turn is one line.

Most tests here check a helper's own life and start their own (`warm`); those that need only a
helper serving them share one per configuration (tests/warm/conftest.py, `Helpers`): `shared_warm`,
`credentials_warm`, and the stale socket of the listener tests. The module's tests share one
model server (its script and requests emptied for each)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from graphchat.warm.control import alive
from tests.scripted_server import ScriptedModelServer
from tests.servers.support import pids as server_pids
from tests.servers.support import stdio, write_servers
from tests.warm.conftest import Helpers, Warm, wait_until

T = TypeVar("T")

TIMINGS = re.compile(r"\d+(\.\d+)?s\b|\"ms\":\s*[\d.]+")


def masked(text: str) -> str:
    return TIMINGS.sub("<t>", text)


def raw_status(socket_path: Path) -> dict[str, Any] | None:
    """A helper's status asked at its socket directly (whatever identity the asker has)."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(str(socket_path))
            sock.sendall(b'{"op":"status"}\n')
            with sock.makefile("rb") as stream:
                line = stream.readline()
    except OSError:
        return None
    return dict(json.loads(line)) if line else None


def info_of(warm: Warm, pid: int) -> dict[str, Any]:
    """The info file of the helper `pid` (its socket is next to it, same name)."""
    for info in warm.socket_dir.glob("*.json"):
        data = dict(json.loads(info.read_text()))
        if data.get("pid") == pid:
            data["_info"] = str(info)
            data["_socket"] = str(info.with_suffix(".sock"))
            return data
    raise AssertionError(f"no info file for helper {pid} in {sorted(os.listdir(warm.socket_dir))}")


def tool_results(server: ScriptedModelServer) -> list[str]:
    """The tool results the model was sent in the last request."""
    return [str(m.get("content")) for m in server.requests[-1]["messages"] if m.get("role") == "tool"]


def whoami_turn(server: ScriptedModelServer) -> None:
    """The next turn: the model asks for t__whoami (the MCP server's pid), then answers."""
    server.push({"tool_calls": [{"name": "t__whoami", "arguments": {}}]}, {"text": "done"})


def whoami_pid(server: ScriptedModelServer) -> int:
    [result] = tool_results(server)
    match = re.search(r'"pid":\s*(\d+)', result)
    assert match, result
    return int(match.group(1))


def with_tools_server(warm: Warm, **extra: Any) -> Path:
    """servers.yaml with the test tools server `t`; its pids land in the returned marker file."""
    marker = warm.workspace.parent / "server-pids"
    write_servers(warm.workspace, {"t": stdio(marker=marker, **extra)})
    return marker


def gone(warm: Warm, pid: int, timeout: float = 30.0) -> bool:
    """True once helper `pid` has ended; then the fixture's teardown no longer signals that pid
    (it could be another process's by then): out of `warm.started`, its info file removed."""
    if not wait_until(lambda: not alive(pid), timeout=timeout):
        return False
    warm.started[:] = [p for p in warm.started if p != pid]
    for info in warm.socket_dir.glob("*.json"):
        try:
            if json.loads(info.read_text()).get("pid") == pid:
                info.unlink()
        except (OSError, ValueError):
            pass
    return True


def one_error_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.fixture
def shared_warm(helpers: Helpers) -> Warm:
    """The module's helper of a workspace without MCP servers (for a test that needs a helper
    serving it, not a new one)."""
    return helpers.warm("plain")


# --- graphchat warm, --status, --stop ----------------------------------------------------------


def test_warm_starts_once_shows_itself_and_stops(warm: Warm) -> None:
    with_tools_server(warm)
    done = warm.run("warm", timeout=180)
    assert done.returncode == 0, done.stderr
    assert re.fullmatch(r"\d+\n", done.stdout), done.stdout  # the pid and nothing else
    pid = int(done.stdout)
    warm.started.append(pid)
    assert alive(pid)
    info = info_of(warm, pid)
    assert Path(info["_socket"]).exists()

    again = warm.run("warm")
    assert (again.returncode, again.stdout) == (0, f"{pid}\n"), again.stderr

    text = warm.run("warm", "--status")
    assert text.returncode == 0, text.stderr
    assert f"pid {pid}\n" in text.stdout
    assert re.search(r"^uptime \d", text.stdout, re.M), text.stdout
    assert re.search(r"^idle time left \d.* \(of 15m\)$", text.stdout, re.M), text.stdout
    assert re.search(r"^servers t \(running\)$", text.stdout, re.M), text.stdout

    as_json = warm.run("warm", "--status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    status = json.loads(as_json.stdout)
    assert status["pid"] == pid and status["running"] is True
    assert status["servers"] == [{"name": "t", "state": "running"}]
    assert status["idle_s"] == 900 and 0 < status["idle_left_s"] <= 900
    assert status["uptime_s"] >= 0 and status["turns_served"] == 0

    stopped = warm.run("warm", "--stop")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout == ""
    assert f"pid {pid}" in stopped.stderr
    assert gone(warm, pid)
    assert not Path(info["_socket"]).exists()
    assert not Path(info["_info"]).exists()

    none = warm.run("warm", "--status")
    assert none.returncode == 1
    assert none.stdout.startswith("not running for "), none.stdout
    none_json = warm.run("warm", "--status", "--json")
    assert none_json.returncode == 1
    assert json.loads(none_json.stdout)["running"] is False

    again_stopped = warm.run("warm", "--stop")
    assert again_stopped.returncode == 0, again_stopped.stderr
    assert "no warm helper runs" in again_stopped.stderr


def test_two_warm_commands_at_once_start_one_helper(warm: Warm) -> None:
    procs = [
        subprocess.Popen(
            warm.command("warm"),
            env=warm.env,
            cwd=str(warm.workspace),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=180) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        if out.strip().isdigit():
            warm.started.append(int(out))
        assert proc.returncode == 0, err
    assert outputs[0][0] == outputs[1][0] and re.fullmatch(r"\d+\n", outputs[0][0]), outputs
    pid = int(outputs[0][0])
    assert warm.pids() == [pid] and warm.status()["pid"] == pid


def test_the_helper_leaves_after_its_idle_time(warm: Warm, model_server: ScriptedModelServer) -> None:
    (warm.workspace / "graphchat.yaml").write_text("settings:\n  warm_idle: 2\n")
    pid = warm.start()
    info = info_of(warm, pid)
    assert info["idle"] == 2  # (its status would race with its leaving)
    assert gone(warm, pid, timeout=60)
    assert not Path(info["_socket"]).exists() and not Path(info["_info"]).exists()
    model_server.push({"text": "still answered"})
    asked = warm.ask("hi")
    assert (asked.returncode, asked.stdout) == (0, "still answered\n"), asked.stderr


def test_the_idle_time_counts_from_when_the_helper_is_ready(warm: Warm) -> None:
    """Not from the process's start: importing the model library and starting the servers
    (seconds) is not time spent waiting for a question."""
    warm.start()
    ready = time.monotonic()
    status = warm.status()
    waited = time.monotonic() - ready
    assert status["uptime_s"] > 1.0  # the start took a while: the check below can tell
    assert status["idle_left_s"] >= status["idle_s"] - waited - 0.5, (status, waited)


@pytest.mark.parametrize("value", ["0", "-3", "soon", "1.5", "true", "[1]", "15d"])
def test_a_bad_warm_idle_is_one_line_naming_it(warm: Warm, value: str) -> None:
    (warm.workspace / "graphchat.yaml").write_text(f"settings:\n  warm_idle: {value}\n")
    for command in (("warm",), ("ask", "hi")):
        done = warm.run(*command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "settings.warm_idle" in one_error_line(done.stderr), done.stderr
        assert done.stdout == ""
    assert warm.pids() == []


@pytest.mark.parametrize("value", ["90s", "2m", "1h", "45"])
def test_warm_idle_takes_durations(warm: Warm, value: str) -> None:
    (warm.workspace / "graphchat.yaml").write_text(f"settings:\n  warm_idle: {value}\n")
    warm.start()
    seconds = {"90s": 90, "2m": 120, "1h": 3600, "45": 45}[value]
    assert warm.status()["idle_s"] == seconds


# --- GRAPHCHAT_WARM, settings.warm -----------------------------------------------------------


def test_graphchat_warm_0_neither_uses_nor_starts_a_helper(
    shared_warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm = shared_warm
    warm.start()
    model_server.push({"text": "local"})
    local = warm.ask_in_process("hi")  # GRAPHCHAT_WARM=0
    assert (local.returncode, local.stdout) == (0, "local\n"), local.stderr
    assert warm.served() == 0
    refused = warm.run("warm", env={"GRAPHCHAT_WARM": "0"})
    assert refused.returncode == 2
    lines = refused.stderr.splitlines()
    assert lines[0].startswith("error: GRAPHCHAT_WARM=0") and len(lines) <= 2, refused.stderr
    assert refused.stdout == ""
    model_server.push({"text": "warm"})
    warmed = warm.ask("hi")  # the same helper, asked without the switch: used
    assert (warmed.returncode, warmed.stdout) == (0, "warm\n"), warmed.stderr
    assert warm.served() == 1


def test_settings_warm_off_refuses_graphchat_warm(warm: Warm) -> None:
    (warm.workspace / "graphchat.yaml").write_text("settings:\n  warm: off\n")
    done = warm.run("warm")
    assert done.returncode == 2
    assert "settings.warm is off" in one_error_line(done.stderr), done.stderr
    assert done.stdout == "" and warm.pids() == []


@pytest.mark.parametrize("value", ["maybe", "true", "1", "[auto]"])
def test_a_bad_settings_warm_is_one_line_naming_it(warm: Warm, value: str) -> None:
    (warm.workspace / "graphchat.yaml").write_text(f"settings:\n  warm: {value}\n")
    for command in (("warm",), ("ask", "hi")):
        done = warm.run(*command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "settings.warm:" in one_error_line(done.stderr), done.stderr
        assert done.stdout == ""
    assert warm.pids() == []


def test_settings_warm_auto_starts_a_helper_after_the_first_ask(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    (warm.workspace / "graphchat.yaml").write_text("settings:\n  warm: auto\n")
    model_server.push({"text": "first"})
    first = warm.ask("hi")
    assert (first.returncode, first.stdout) == (0, "first\n"), first.stderr
    assert list(warm.socket_dir.glob("*.log"))  # started before the ask returned (its log opened)
    assert wait_until(lambda: warm.status().get("running") is True, timeout=120)
    warm.started.extend(warm.pids())
    assert warm.status()["turns_served"] == 0  # the first one ran locally
    model_server.push({"text": "second"})
    second = warm.ask("again")
    assert (second.returncode, second.stdout) == (0, "second\n"), second.stderr
    assert warm.status()["turns_served"] == 1
    notice = [line for line in first.stderr.splitlines() if line.startswith("note: a warm helper now runs")]
    assert len(notice) == 1 and "notice" not in second.stderr  # said once, the first time
    assert masked(second.stderr) == masked(first.stderr.replace(notice[0] + "\n", ""))


def test_warm_is_the_default_the_second_ask_is_served_and_the_notice_comes_once(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    """Issue 24 item 9: no settings.warm at all (and no GRAPHCHAT_WARM=manual, which the test
    suite sets): the first ask answers cold and starts the helper, the next one is warm."""
    default = {"GRAPHCHAT_WARM": "1"}
    model_server.push({"text": "first"})
    first = warm.ask("hi", env=default)
    assert (first.returncode, first.stdout) == (0, "first\n"), first.stderr
    assert "note: a warm helper now runs for this workspace" in first.stderr
    assert "settings.warm: manual" in first.stderr and "GRAPHCHAT_WARM=0" in first.stderr
    assert wait_until(lambda: warm.status().get("running") is True, timeout=120)
    warm.started.extend(warm.pids())
    model_server.push({"text": "second"})
    second = warm.ask("again", env=default)
    assert (second.returncode, second.stdout) == (0, "second\n"), second.stderr
    assert warm.status()["turns_served"] == 1
    assert "warm helper now runs" not in second.stderr
    warm.run("warm", "--stop")
    model_server.push({"text": "third"})
    third = warm.ask("once more", env=default)  # a new helper starts: the notice is not repeated
    assert third.returncode == 0 and "warm helper now runs" not in third.stderr


def test_settings_warm_off_starts_nothing_by_default(warm: Warm, model_server: ScriptedModelServer) -> None:
    (warm.workspace / "graphchat.yaml").write_text("settings:\n  warm: off\n")
    model_server.push({"text": "first"})
    first = warm.ask("hi", env={"GRAPHCHAT_WARM": "1"})
    assert (first.returncode, first.stdout) == (0, "first\n"), first.stderr
    assert list(warm.socket_dir.glob("*")) == [] and "warm helper" not in first.stderr


def test_settings_warm_auto_starts_nothing_under_graphchat_warm_0(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    (warm.workspace / "graphchat.yaml").write_text("settings:\n  warm: auto\n")
    model_server.push({"text": "first"})
    first = warm.ask_in_process("hi")
    assert (first.returncode, first.stdout) == (0, "first\n"), first.stderr
    assert list(warm.socket_dir.glob("*")) == []  # no log: no helper was spawned
    assert warm.run("warm", "--status").returncode == 1


# --- identity ------------------------------------------------------------------------------


@pytest.mark.parametrize("changed", ["graphchat.yaml", "catalog/servers.yaml"])
def test_a_changed_config_file_is_not_used_and_the_old_helper_leaves(
    warm: Warm, model_server: ScriptedModelServer, changed: str
) -> None:
    marker = with_tools_server(warm)
    pid = warm.start()
    [helper_server] = server_pids(marker)
    info = info_of(warm, pid)
    whoami_turn(model_server)
    warmed = warm.ask("who")
    assert (warmed.returncode, warmed.stdout) == (0, "done\n"), warmed.stderr
    assert whoami_pid(model_server) == helper_server  # the control: this set-up does use the helper

    path = warm.workspace / changed
    path.write_text(path.read_text() + "\n# changed\n")
    whoami_turn(model_server)
    after = warm.ask("who")
    assert (after.returncode, after.stdout) == (0, "done\n"), after.stderr
    assert whoami_pid(model_server) != helper_server  # asked locally: its own server
    whoami_turn(model_server)
    local = warm.ask_in_process("who")
    assert masked(after.stderr) == masked(local.stderr)  # not a word about the helper

    assert gone(warm, pid, timeout=60)  # the stale one notices and leaves
    assert not Path(info["_socket"]).exists() and not Path(info["_info"]).exists()


CREDENTIALS = ["OPENAI_API_KEY", "GRAPHCHAT_API_KEY", "ANTHROPIC_API_KEY", "SOME_SERVICE_TOKEN", "REFERENCED"]


@pytest.fixture
def credentials_warm(helpers: Helpers) -> Warm:
    """The module's helper whose tools server takes ${REFERENCED}, started (by the first test)
    with each of CREDENTIALS set: each test changes one of them."""
    return helpers.warm(
        "credentials", lambda warm: with_tools_server(warm, env={"FROM_ENV": "${REFERENCED}"})
    )


@pytest.mark.parametrize("variable", CREDENTIALS)
def test_a_changed_credential_or_referenced_variable_is_not_used(
    credentials_warm: Warm, model_server: ScriptedModelServer, variable: str
) -> None:
    warm = credentials_warm
    base = {name: warm.env.get(name, "sk-one") for name in CREDENTIALS if name != "REFERENCED"}
    base["REFERENCED"] = "one"
    pid = warm.start(env=base)

    def turns() -> int:
        return int(raw_status(Path(info_of(warm, pid)["_socket"]))["turns_served"])  # type: ignore[index]

    earlier = turns()  # the module's earlier tests'

    def served() -> int:
        return turns() - earlier

    model_server.push({"text": "a"})
    same = warm.ask("hi", env=base)
    assert (same.returncode, same.stdout) == (0, "a\n"), same.stderr
    assert served() == 1
    model_server.push({"text": "b"})
    other = warm.ask("hi", env={**base, variable: "something-else"})
    assert (other.returncode, other.stdout) == (0, "b\n"), other.stderr
    assert served() == 1  # asked locally
    assert "warm" not in other.stderr
    assert alive(pid)  # the helper is still right for its own environment


def test_the_same_workspace_from_another_folder_uses_the_helper(
    shared_warm: Warm, model_server: ScriptedModelServer
) -> None:
    warm = shared_warm
    warm.start()
    inner = warm.workspace / "plans" / "deeper"
    inner.mkdir(parents=True)
    for cwd in (warm.workspace, inner):
        model_server.push({"text": "found"})
        done = subprocess.run(
            [sys.executable, "-m", "graphchat", "ask", "hi"],  # no --home: found from the cwd
            env=warm.env,
            cwd=str(cwd),
            capture_output=True,
            text=True,
            timeout=90,
            input="",
        )
        assert (done.returncode, done.stdout) == (0, "found\n"), done.stderr
    assert warm.served() == 2


# --- dead, stale and strange helpers ---------------------------------------------------------


def test_a_killed_helper_is_passed_over_silently_and_replaced(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    pid = warm.start()
    info = info_of(warm, pid)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not alive(pid))
    assert Path(info["_socket"]).exists() and Path(info["_info"]).exists()  # left behind
    model_server.push({"text": "answered"})
    asked = warm.ask("hi")
    model_server.push({"text": "answered"})
    local = warm.ask_in_process("hi")
    assert (asked.returncode, asked.stdout) == (0, "answered\n"), asked.stderr
    assert masked(asked.stderr) == masked(local.stderr)
    assert gone(warm, pid)
    new = warm.start()
    assert new != pid and alive(new)
    assert warm.status()["pid"] == new
    model_server.push({"text": "warm again"})
    again = warm.ask("hi")
    assert (again.returncode, again.stdout) == (0, "warm again\n"), again.stderr
    assert warm.status()["turns_served"] == 1


class FakeHelper:
    """Something listening on the helper's socket path that is not a working helper."""

    def __init__(self, path: Path, behaviour: str) -> None:
        self.behaviour = behaviour
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.requests: list[bytes] = []
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            if self.behaviour == "close":
                conn.close()
                continue
            with conn.makefile("rb") as stream:
                self.requests.append(stream.readline())
            if self.behaviour == "refused":
                conn.sendall(b'{"t":"refused","why":"another configuration"}\n')
            elif self.behaviour == "garbage":
                conn.sendall(b"\xff\xfe not json at all\n")
            elif self.behaviour == "not an object":
                conn.sendall(b"[1, 2]\n")
            if self.behaviour == "silent":
                self.held.append(conn)  # never answers, never closes
            else:
                conn.close()

    def close(self) -> None:
        path = self.sock.getsockname()
        self.sock.close()
        for conn in self.held:
            conn.close()
        os.unlink(path)  # the path is free for the next listener


@pytest.fixture(scope="module")
def stale_path(helpers: Helpers) -> Path:
    """The socket path the module's "stale" workspace's helper uses, its helper killed and gone."""
    warm = helpers.warm("stale")
    pid = warm.start()
    info = info_of(warm, pid)
    os.kill(pid, signal.SIGKILL)
    assert gone(warm, pid)
    path = Path(info["_socket"])
    path.unlink()
    return path


@pytest.fixture
def stale_warm(helpers: Helpers) -> Warm:
    return helpers.warm("stale")


@pytest.fixture
def stale_socket(stale_warm: Warm, stale_path: Path) -> Path:
    """The socket path `stale_warm`'s helper would use, its helper killed and gone: nothing
    listens there (each test's listener is removed with it)."""
    assert not stale_path.exists()
    return stale_path


@pytest.mark.parametrize("behaviour", ["refused", "garbage", "not an object", "close", "silent"])
def test_a_listener_that_is_not_a_working_helper_means_a_local_ask(
    stale_warm: Warm, model_server: ScriptedModelServer, stale_socket: Path, behaviour: str
) -> None:
    warm = stale_warm
    fake = FakeHelper(stale_socket, behaviour)
    try:
        model_server.push({"text": "answered"})
        asked = warm.ask("hi", timeout=120)  # "silent": after the client's 10 s accept timeout
        model_server.push({"text": "answered"})
        local = warm.ask_in_process("hi")
    finally:
        fake.close()
    assert (asked.returncode, asked.stdout) == (0, "answered\n"), asked.stderr
    assert masked(asked.stderr) == masked(local.stderr)
    if behaviour != "close":
        [request] = fake.requests
        assert json.loads(request)["op"] == "ask"


def test_a_large_piped_question_goes_through_the_helper_too(
    shared_warm: Warm, model_server: ScriptedModelServer
) -> None:
    """The request is one line of the wire: longer than asyncio's 64 KiB default, it was refused
    (and asked locally)."""
    warm = shared_warm
    warm.start()
    piped = "".join(f"line {i} of the piped context\n" for i in range(20_000))  # ~600 KB
    assert len(piped) > 4 * 65536
    model_server.push({"text": "read it"})
    asked = warm.ask("summarise", input=piped)
    assert (asked.returncode, asked.stdout) == (0, "read it\n"), asked.stderr
    assert warm.served() == 1
    sent = str(model_server.requests[-1]["messages"][-1]["content"])
    assert sent.startswith("summarise") and "line 19999 of the piped context" in sent


# --- a crash mid-turn ----------------------------------------------------------------------------


def asked_during_the_call(warm: Warm, called: Path, action: Callable[[], T]) -> tuple[int, str, str, T]:
    """`graphchat ask "go slowly"` in the background; `action()` once its tool call has started
    (the test server writes `called`). Returns the ask's exit code, stdout, stderr and what
    `action` returned."""
    client = subprocess.Popen(
        warm.command("ask", "go slowly"),
        env=warm.env,
        cwd=str(warm.workspace),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert wait_until(lambda: called.exists() and called.read_text().strip() != "", timeout=60)
        done = action()
        out, err = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
            client.wait()
    return client.returncode, out, err, done


def test_a_helper_killed_mid_turn_is_one_line_and_the_thread_survives(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    called = warm.workspace.parent / "called"
    marker = with_tools_server(warm, env={"GRAPHCHAT_TEST_CALLED": str(called)})
    pid = warm.start()
    [server] = server_pids(marker)
    model_server.push(
        {"text": "one moment", "tool_calls": [{"name": "t__slow", "arguments": {"seconds": 5}}]}
    )
    code, out, err, _ = asked_during_the_call(warm, called, lambda: os.kill(pid, signal.SIGKILL))
    assert code == 1, (out, err)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: the warm helper (pid {pid}) stopped"), err
    assert err.rstrip("\n").splitlines()[-1] == errors[0]
    assert wait_until(lambda: not alive(server), timeout=30)  # its MCP server does not linger
    assert gone(warm, pid)

    [messages] = list((warm.workspace / "threads").glob("*/messages.jsonl"))
    shown = warm.run("threads", "show", messages.parent.name)
    assert shown.returncode == 0, shown.stderr
    assert "go slowly" in shown.stdout
    model_server.push({"text": "carried on"})
    resumed = warm.ask("-c", "and now?")
    assert (resumed.returncode, resumed.stdout) == (0, "carried on\n"), resumed.stderr
    sent = [m.get("content") for m in model_server.requests[-1]["messages"]]
    assert "go slowly" in sent and "and now?" in sent


def test_a_helper_stopped_mid_turn_says_so_in_one_line_and_the_thread_records_it(
    warm: Warm, model_server: ScriptedModelServer
) -> None:
    called = warm.workspace.parent / "called"
    with_tools_server(warm, env={"GRAPHCHAT_TEST_CALLED": str(called)})
    pid = warm.start()
    model_server.push({"tool_calls": [{"name": "t__slow", "arguments": {"seconds": 30}}]})
    code, out, err, stopped = asked_during_the_call(warm, called, lambda: warm.run("warm", "--stop"))
    assert stopped.returncode == 0, stopped.stderr
    assert (code, out) == (1, ""), err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: the warm helper (pid {pid}) was stopped during the turn "
        "(stopped by graphchat warm --stop); the thread keeps what was done"
    ], err
    assert gone(warm, pid)
    [messages] = list((warm.workspace / "threads").glob("*/messages.jsonl"))
    lines = [json.loads(line) for line in messages.read_text().splitlines()]
    [failed] = [line for line in lines if line.get("kind") == "turn_failed"]
    assert "SIGTERM" in json.dumps(failed), failed  # recorded as a SIGTERM would be, not a Ctrl-C
    assert warm.run("threads", "show", messages.parent.name).returncode == 0


# --- the working directory of each request ---------------------------------------------------------


def test_each_request_runs_in_its_own_working_directory(
    warm: Warm, model_server: ScriptedModelServer, tmp_path: Path
) -> None:
    """The per-user workspace (no --home, no graphchat.yaml above): tools run in the asking
    process's folder, and two clients in two folders share one helper."""
    data = Path(warm.env["XDG_DATA_HOME"]) / "graphchat"
    (data / "tools").mkdir(parents=True)
    (data / "tools" / "where.yaml").write_text(
        "name: where\ndescription: the working directory\nkind: exec\n"
        f"command: {sys.executable}\nargs: ['-c', 'import os; print(os.getcwd())']\n"
        "output: text\nread_only: true\ninput_schema: {type: object, properties: {}}\n"
    )
    folders = [tmp_path / "first", tmp_path / "second"]
    for folder in folders:
        folder.mkdir()

    def graphchat(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "graphchat", *args],
            env=warm.env,
            cwd=str(cwd),
            capture_output=True,
            text=True,
            timeout=180,
            input="",
        )

    started = graphchat("warm", cwd=folders[0])
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout)
    warm.started.append(pid)
    try:
        for folder in folders:
            model_server.push({"tool_calls": [{"name": "user__where", "arguments": {}}]}, {"text": "here"})
            done = graphchat("ask", "where am I?", cwd=folder)
            assert (done.returncode, done.stdout) == (0, "here\n"), done.stderr
            [result] = tool_results(model_server)
            assert str(folder.resolve()) in result, result
        status = json.loads(graphchat("warm", "--status", "--json", cwd=folders[1]).stdout)
        assert (status["pid"], status["workspace"], status["turns_served"]) == (pid, str(data.resolve()), 2)
    finally:
        graphchat("warm", "--stop", cwd=folders[0])
        gone(warm, pid)
