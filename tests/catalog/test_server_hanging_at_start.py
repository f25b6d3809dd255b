"""A server that hangs at start: closing (Ctrl-C included) stops it for good, and promptly."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.conftest import GraphchatRunner, clean_env
from tests.servers.support import SERVERS, alive, stdio, write_servers

HANG_SERVER = str(SERVERS / "hang_server.py")


def hanging(workspace: Path) -> Path:
    fifo = workspace / "started"
    os.mkfifo(fifo)
    write_servers(workspace, {"h": stdio(HANG_SERVER, env={"GRAPHCHAT_TEST_CALLED": str(fifo)})})
    return fifo


async def test_closing_while_a_server_hangs_at_start_leaves_no_process(workspace: Path) -> None:
    fifo = hanging(workspace)
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    starting = asyncio.ensure_future(catalog.prepare())
    pid = int(await asyncio.to_thread(fifo.read_text))  # the server process runs
    starting.cancel()  # Ctrl-C
    with pytest.raises(asyncio.CancelledError):
        await starting
    await catalog.aclose()
    assert not alive(pid)  # stopped by aclose itself, not by whoever cancels the tasks later
    assert [t for t in asyncio.all_tasks() if t.get_name().startswith("mcp-server-")] == []


def test_ctrl_c_while_tools_list_waits_for_a_hanging_server(
    workspace: Path, graphchat: GraphchatRunner
) -> None:
    fifo = hanging(workspace)
    proc = subprocess.Popen(
        [sys.executable, "-m", "graphchat", "--home", str(workspace), "tools", "list"],
        env=clean_env(None, workspace.parent),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pid: list[int] = []
    reader = threading.Thread(target=lambda: pid.append(int(fifo.read_text())), daemon=True)
    reader.start()
    reader.join(30)
    assert pid and alive(pid[0])
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=20)  # the start timeout alone is 30 s
    finally:
        proc.kill()
        left = alive(pid[0])
        if left:
            os.kill(pid[0], signal.SIGKILL)  # do not leak it into the rest of the suite
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert not left
