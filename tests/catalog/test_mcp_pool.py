"""The MCP server pool over real stdio servers written with the mcp SDK (tests/servers/)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from graphchat.asks import Answer, Asker, Question
from graphchat.catalog.base import CallContext, Catalog
from graphchat.catalog.mcp.pool import McpSource
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.servers.support import LOWLEVEL_SERVER, alive, pids, reached, stdio, write_servers

YES = CallContext(assume_yes=True)


def catalog_for(workspace: Path, servers: dict[str, Any]) -> Catalog:
    write_servers(workspace, servers)
    return build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)


async def test_eight_slow_calls_on_one_server_take_about_one_calls_time(workspace: Path) -> None:
    marker = workspace / "starts"
    catalog = catalog_for(workspace, {"t": stdio(marker=marker)})
    try:
        await catalog.prepare()
        started = time.perf_counter()
        results = await asyncio.gather(
            *(catalog.call("t__slow", {"seconds": 0.5, "label": str(i)}, YES) for i in range(8))
        )
        elapsed = time.perf_counter() - started
    finally:
        await catalog.aclose()
    assert [r.is_error for r in results] == [False] * 8
    assert [r.value["result"] for r in results] == [f"{i}: slept 0.5s" for i in range(8)]
    assert elapsed < 1.5, f"8 x 0.5 s took {elapsed:.2f} s: calls are not concurrent"  # sequential: 4 s
    assert len(pids(marker)) == 1  # one server, one session


async def test_a_crash_mid_call_names_the_server_and_the_next_call_restarts_it(workspace: Path) -> None:
    marker = workspace / "starts"
    catalog = catalog_for(workspace, {"t": stdio(marker=marker)})
    try:
        await catalog.prepare()
        first = await catalog.call("t__whoami", {}, YES)
        slow, crash = await asyncio.gather(
            catalog.call("t__slow", {"seconds": 5}, YES), catalog.call("t__crash", {"after": 0.2}, YES)
        )
        assert crash.is_error and "MCP server 't'" in crash.error_message
        assert "crashed" in crash.error_message
        assert slow.is_error and "MCP server 't'" in slow.error_message  # the in-flight call too
        assert slow.ms < 4000  # not left waiting for its 5 s
        again = await catalog.call("t__whoami", {}, YES)
        source = next(s for s in catalog.sources if isinstance(s, McpSource))
        await source.connection("t").wound_down()  # the crashed generation has finished ending
        still = await catalog.call("t__whoami", {}, YES)
    finally:
        await catalog.aclose()
    assert not again.is_error
    assert again.value["pid"] != first.value["pid"]
    assert still.value == again.value  # the old generation's end did not touch the new one
    assert pids(marker) == [first.value["pid"], again.value["pid"]]
    assert "crash: exiting now" in (workspace / "catalog" / "logs" / "t.log").read_text()


async def test_a_server_that_never_starts_is_an_error_result_retried_once(workspace: Path) -> None:
    catalog = catalog_for(workspace, {"ghost": {"command": str(workspace / "no-such-server")}})
    source = next(s for s in catalog.sources if isinstance(s, McpSource))
    try:
        errors = await catalog.prepare()
        assert "command not found" in errors["ghost"]
        conn = source.connection("ghost")
        result = await conn.call("anything", {}, YES)  # the restart the next call gets
        assert result.is_error
        assert "MCP server 'ghost'" in result.error_message and "command not found" in result.error_message
        assert conn.starts == 2
        third = await conn.call("anything", {}, YES)
        assert third.is_error and "not retried" in third.error_message
        assert conn.starts == 2  # given up: no third start
    finally:
        await catalog.aclose()


async def test_server_stderr_goes_to_its_log_and_a_failed_start_quotes_it(
    workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    script = "import sys; sys.stderr.write('fatal: missing API key for upstream\\n'); sys.exit(1)"
    catalog = catalog_for(workspace, {"broken": {"command": sys.executable, "args": ["-c", script]}})
    try:
        errors = await catalog.prepare()
    finally:
        await catalog.aclose()
    assert "missing API key for upstream" in errors["broken"]
    assert "missing API key" in (workspace / "catalog" / "logs" / "broken.log").read_text()
    assert "missing API key" not in capfd.readouterr().err  # never on the user's terminal
    status = McpSource(load_settings(workspace)).files.status("broken")
    assert "missing API key" in status["last_error"]


async def test_per_call_timeout_is_an_error_and_the_session_stays_usable(workspace: Path) -> None:
    catalog = catalog_for(workspace, {"t": stdio(timeout_s=0.5)})
    try:
        await catalog.prepare()
        before = await catalog.call("t__whoami", {}, YES)
        slow = await catalog.call("t__slow", {"seconds": 5}, YES)
        after = await catalog.call("t__whoami", {}, YES)
    finally:
        await catalog.aclose()
    assert slow.is_error and "MCP server 't'" in slow.error_message
    assert "did not answer within 0.5 s" in slow.error_message
    assert slow.ms < 3000
    assert after.value == before.value  # same process, same session


async def test_results_map_to_json_values_with_typed_entries(workspace: Path) -> None:
    catalog = catalog_for(workspace, {"t": stdio(), "low": stdio(LOWLEVEL_SERVER, env={"TOOL_COUNT": "2"})})
    try:
        await catalog.prepare()
        call = {name: await catalog.call(name, {}, YES) for name in (
            "t__stamp", "t__whoami", "t__picture", "t__fail",
            "low__resources", "low__two_blocks", "low__error_structured", "low__bad_output", "low__chart",
        )}  # fmt: skip
    finally:
        await catalog.aclose()
    assert call["t__stamp"].value == {"total": 2, "unit": "pcs"}  # structured_content
    assert isinstance(call["t__whoami"].value["pid"], int)  # JSON text parsed
    image = call["t__picture"].value["content"][0]
    assert image["type"] == "image" and image["mime_type"] == "image/png" and image["data"]
    assert call["t__fail"].is_error and "it broke" in call["t__fail"].error_message
    resources = call["low__resources"].value
    assert resources["text"] == "see attached"
    assert [e["type"] for e in resources["content"]] == ["resource_link", "resource"]
    assert resources["content"][1]["text"] == "embedded text"
    assert call["low__two_blocks"].value == [{"a": 1}, {"b": 2}]
    failed = call["low__error_structured"]
    assert failed.is_error and failed.error_message == "quota exceeded"
    assert failed.value["structured_content"] == {"code": 429, "retry_after": 3}  # kept on errors
    chart = call["low__chart"]  # structured content stays the value; the image is kept beside it
    assert chart.value == {"points": 3} and [m["type"] for m in chart.media] == ["image"]
    bad = call["low__bad_output"]
    assert bad.is_error and "breaks its own declared output schema" in bad.error_message


async def test_tool_lists_come_from_the_cache_without_starting_anything(workspace: Path) -> None:
    marker = workspace / "starts"
    meet = {
        "GRAPHCHAT_TEST_RENDEZVOUS": f"{workspace / 'meet'}:2"
    }  # both starting at once, or neither starts
    servers = {
        "t": stdio(
            marker=marker,
            env=meet,
            exclude_tools=["crash", "confirm_*"],
            tool_overrides={"note": {"description": "Write a note.", "family": "destructive"}},
        ),
        "low": stdio(
            LOWLEVEL_SERVER, marker=marker, env={"TOOL_COUNT": "3", **meet}, include_tools=["tool_00*"]
        ),
    }
    write_servers(workspace, servers)
    settings = load_settings(workspace)
    cold = McpSource(settings)
    assert cold.specs() == [] and cold.unprepared() == ["t", "low"]
    errors = await cold.prepare()
    await cold.aclose()
    assert errors == {}  # started concurrently: one after the other, neither would have met the other
    assert len(pids(marker)) == 2

    warm = McpSource(settings)  # a new command: reads the cache only
    specs = {s.name: s for s in warm.specs()}
    assert len(pids(marker)) == 2  # nothing started
    assert warm.unprepared() == []
    assert "t__crash" not in specs and "t__confirm_delete" not in specs
    assert sorted(n for n in specs if n.startswith("low__")) == [
        "low__tool_000",
        "low__tool_001",
        "low__tool_002",
    ]
    assert specs["t__slow"].family == "read"
    assert specs["t__delete_file"].family == "destructive"
    assert specs["t__touch"].family == "destructive"  # no annotations
    assert specs["t__note"].family == "destructive" and specs["t__note"].description == "Write a note."
    assert specs["t__stamp"].output_schema["properties"]["total"]["type"] == "integer"
    assert specs["t__slow"].meta == {**specs["t__slow"].meta, "server": "t", "tool": "slow"}

    servers["t"]["args"] = [*servers["t"]["args"], "--extra"]  # a changed config is a new cache key
    write_servers(workspace, servers)
    assert McpSource(load_settings(workspace)).unprepared() == ["t"]


async def test_ask_user_stays_in_the_model_tool_list_with_300_tools(workspace: Path) -> None:
    catalog = catalog_for(workspace, {"big": stdio(LOWLEVEL_SERVER, env={"TOOL_COUNT": "300"})})
    try:
        await catalog.prepare()
    finally:
        await catalog.aclose()
    tools = [t["function"]["name"] for t in catalog.model_tools()]
    assert sum(name.startswith("big__") for name in tools) == 305
    assert tools[0] == "ask_user"
    assert tools[0] in [t["function"]["name"] for t in catalog.model_tools(["big__tool_1*"])]


class RecordingAsker(Asker):
    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value
        self.questions: list[Question] = []

    async def _ask(self, question: Question) -> Answer:
        self.questions.append(question)
        return Answer(True, self.value)


async def test_elicitation_from_a_server_goes_to_the_callers_asker(workspace: Path) -> None:
    catalog = catalog_for(workspace, {"t": stdio()})
    asker = RecordingAsker({"ok": True})
    try:
        await catalog.prepare()
        resolved = await catalog.call("t__confirm_delete", {"name": "a.txt"}, CallContext(asker=asker))
        pushed = await catalog.call("t__confirm_push", {"name": "main"}, CallContext(asker=asker))
        nobody = await catalog.call("t__confirm_delete", {"name": "b.txt"}, CallContext())
    finally:
        await catalog.aclose()
    assert resolved.value == {"result": "deleted=True a.txt"}
    assert pushed.value == {"result": "pushed=True main"}
    assert [q.prompt for q in asker.questions] == [
        "[t · confirm_delete] Really delete a.txt?",
        "[t · confirm_push] Push main?",
    ]
    assert asker.questions[0].schema["properties"]["ok"]["type"] == "boolean"
    assert nobody.value == {"result": "not deleted (cancel)"}  # no asker: never a hang


async def test_aclose_leaves_no_server_process_even_with_calls_in_flight(workspace: Path) -> None:
    marker = workspace / "starts"
    called = workspace / "called"
    os.mkfifo(called)
    catalog = catalog_for(
        workspace,
        {"a": stdio(marker=marker, env={"GRAPHCHAT_TEST_CALLED": str(called)}), "b": stdio(marker=marker)},
    )
    await catalog.prepare()
    assert len(pids(marker)) == 2 and all(alive(p) for p in pids(marker))
    pending = asyncio.ensure_future(catalog.call("a__slow", {"seconds": 30}, YES))
    await reached(called)  # the call has reached the server
    pending.cancel()  # Ctrl-C
    with pytest.raises(asyncio.CancelledError):
        await pending
    started = time.perf_counter()
    await catalog.aclose()
    assert time.perf_counter() - started < 5
    assert [p for p in pids(marker) if alive(p)] == []
