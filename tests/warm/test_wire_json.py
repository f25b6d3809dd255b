"""The wire's two JSON codecs write and read the same messages: the client's (the standard
library, a cheaper start) and the helper's (orjson); and a warm client imports none of the
heavy libraries (issue 14: litellm, the MCP SDK and what they bring)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graphchat.warm import wire
from tests.scripted_server import ScriptedModelServer
from tests.warm.conftest import Warm

MESSAGES = [
    {"t": "text", "s": 'héllo ✓ 日本 \n\t"quoted" \\ back'},
    {"t": "text", "s": "a lone surrogate \ud800 in a tool's output"},
    {"t": "event", "e": "llm_call", "f": {"ms": 12.5, "n": 3, "none": None, "ok": True, "path": Path("/x")}},
    {"t": "answer", "content": "", "payload": {"tool_calls_made": [], "usage": {"calls": 1}}},
]


@pytest.fixture
def helper_codec() -> Iterator[None]:
    saved = wire._orjson
    wire.use_orjson()
    try:
        yield
    finally:
        wire._orjson = saved


def _expected(message: dict) -> dict:  # type: ignore[type-arg]
    out = dict(message)
    if out.get("t") == "event":
        out["f"] = {**out["f"], "path": "/x"}  # anything else is sent as its str()
    return out


@pytest.mark.parametrize("message", MESSAGES)
def test_what_the_helper_writes_the_client_reads_and_back(message: dict, helper_codec: None) -> None:  # type: ignore[type-arg]
    from_helper = wire.encode(message)
    assert from_helper.endswith(b"\n") and from_helper.count(b"\n") == 1
    saved, wire._orjson = wire._orjson, None  # the client's side
    try:
        assert wire.decode(from_helper) == _expected(message)
        from_client = wire.encode(message)
        assert from_client.endswith(b"\n") and from_client.count(b"\n") == 1
    finally:
        wire._orjson = saved
    assert wire.decode(from_client) == _expected(message)


def test_a_line_that_is_not_an_object_is_refused() -> None:
    for line in (b"[1, 2]\n", b"null\n", b'"text"\n'):
        with pytest.raises(ValueError):
            wire.decode(line)


def test_a_warm_client_imports_no_heavy_library(warm: Warm, model_server: ScriptedModelServer) -> None:
    warm.start()
    model_server.push({"text": "hello"})
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *warm.command("ask", "hi")[1:]],
        env=warm.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=str(warm.workspace),
    )
    assert (done.returncode, done.stdout) == (0, "hello\n"), done.stderr[-2000:]
    assert warm.status()["turns_served"] == 1  # the helper answered, not a local ask
    modules = {
        line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")
    }
    assert "graphchat.warm.client" in modules
    heavy = {
        m for m in modules if m.split(".")[0] in ("litellm", "mcp", "httpx", "pydantic", "yaml", "openai")
    }
    assert not heavy
    assert "orjson" not in modules  # a plain answer: the client's wire keeps to the standard library
