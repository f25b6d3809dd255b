"""MCP over streamable HTTP: headers with ${VAR}, crashes, and no request with an unset token."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graphchat.catalog.base import CallContext
from graphchat.catalog.mcp.pool import McpSource
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.servers.support import RecordingListener, reached, start_http_server, write_servers

YES = CallContext(assume_yes=True)


@pytest.fixture
def http_server() -> Iterator[tuple[Any, str]]:
    proc, url = start_http_server()
    yield proc, url
    proc.kill()
    proc.wait()


async def test_http_server_gets_expanded_headers_and_runs_calls_concurrently(
    workspace: Path, http_server: tuple[Any, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = http_server
    monkeypatch.setenv("GC_TEST_TOKEN", "s3cret")
    write_servers(
        workspace,
        {"web": {"type": "http", "url": url, "headers": {"Authorization": "Bearer ${GC_TEST_TOKEN}"}}},
    )
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        assert await catalog.prepare() == {}
        header = await catalog.call("web__auth_header", {}, YES)
        started = time.perf_counter()
        results = await asyncio.gather(*(catalog.call("web__slow", {"seconds": 0.5}, YES) for _ in range(4)))
        elapsed = time.perf_counter() - started
    finally:
        await catalog.aclose()
    assert header.value == {"authorization": "Bearer s3cret"}
    assert not any(r.is_error for r in results)
    assert elapsed < 1.5  # sequential: 2 s


async def test_http_server_dying_mid_call_is_an_error_naming_the_server(workspace: Path) -> None:
    called = workspace / "called"  # the server writes to it when the call reaches it
    os.mkfifo(called)
    proc, url = start_http_server(called=called)
    write_servers(workspace, {"web": {"type": "http", "url": url}})
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        await catalog.prepare()
        in_flight = asyncio.ensure_future(catalog.call("web__slow", {"seconds": 10}, YES))
        await reached(called)  # the call is on the server
        proc.kill()
        result = await asyncio.wait_for(in_flight, 8)
        again = await catalog.call("web__whoami", {}, YES)  # restart attempt: nobody listens
    finally:
        await catalog.aclose()
        proc.kill()
        proc.wait()
    assert result.is_error and "MCP server 'web'" in result.error_message
    assert again.is_error and "MCP server 'web'" in again.error_message


async def test_unset_token_in_headers_names_server_field_and_variable_and_sends_nothing(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener = RecordingListener()
    monkeypatch.delenv("GC_TEST_TOKEN", raising=False)
    write_servers(
        workspace,
        {
            "search": {
                "type": "http",
                "url": listener.url,
                "headers": {"Authorization": "Bearer ${GC_TEST_TOKEN}"},
            }
        },
    )
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    source = next(s for s in catalog.sources if isinstance(s, McpSource))
    try:
        errors = await catalog.prepare()
        result = await source.connection("search").call("query", {}, YES)
    finally:
        await catalog.aclose()
        listener.close()
    assert list(errors) == ["search"]  # {server: why}; a command prints "MCP server 'search': <why>"
    assert "MCP server 'search'" in result.error_message
    for message in (errors["search"], result.error_message):
        assert "headers.Authorization" in message and "${GC_TEST_TOKEN}" in message
        assert "environment variable GC_TEST_TOKEN is not set" in message
    assert listener.connections == []  # no request was sent anywhere


async def test_the_recording_listener_does_see_a_request_when_the_token_is_set(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control for the test above: with the variable set, a request does go out."""
    listener = RecordingListener()
    monkeypatch.setenv("GC_TEST_TOKEN", "t0k")
    write_servers(
        workspace,
        {
            "search": {
                "type": "http",
                "url": listener.url,
                "headers": {"Authorization": "Bearer ${GC_TEST_TOKEN}"},
            }
        },
    )
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    try:
        errors = await catalog.prepare()
    finally:
        await catalog.aclose()
        listener.close()
    assert "search" in errors  # the listener answers nothing useful
    assert any(b"Bearer t0k" in data for data in listener.connections)
