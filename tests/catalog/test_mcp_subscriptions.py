"""Resource subscriptions outlive a server's restart (issue 25): a server that crashed and was
started again by the next call is subscribed again to what it was, so its changes still reach
the chat. Against a small server of our own (tests/servers/subscribe_server.py), in process."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from graphchat.catalog.base import CallContext
from graphchat.sources import build_catalog
from graphchat.workspace import load_settings
from tests.servers.support import stdio, write_servers

SUBSCRIBE_SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "subscribe_server.py")


def logged(workspace: Path) -> list[dict[str, object]]:
    log = workspace / "subs.jsonl"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def test_a_restarted_server_is_subscribed_again_and_its_changes_still_arrive(workspace: Path) -> None:
    write_servers(
        workspace,
        {"s": stdio(SUBSCRIBE_SERVER, env={"GRAPHCHAT_TEST_CALL_LOG": str(workspace / "subs.jsonl")})},
    )
    catalog = build_catalog(load_settings(workspace), include_plans=False, record_shapes=False)
    changed: list[tuple[str, str]] = []
    try:
        assert await catalog.prepare() == {}
        source = catalog.mcp_source()
        source.on_resource_update = lambda server, uri: changed.append((server, uri))
        await source.request("s", "subscribe_resource", "mem://a")
        await source.request("s", "subscribe_resource", "mem://gone")
        await source.request("s", "unsubscribe_resource", "mem://gone")

        crashed = await catalog.call("s__crash", {}, CallContext())
        assert crashed.is_error  # the server died under the call
        touched = await catalog.call("s__touch", {}, CallContext())  # started again by this call
        assert not touched.is_error, touched.value
        assert "touched 1" in json.dumps(touched.value)
        for _ in range(50):
            if changed:
                break
            await asyncio.sleep(0.1)
        assert changed == [("s", "mem://a")]
    finally:
        await catalog.aclose()
    subscribes = [(e["kind"], e["uri"]) for e in logged(workspace)]
    pids = {e["pid"] for e in logged(workspace)}
    assert subscribes == [
        ("subscribe", "mem://a"),
        ("subscribe", "mem://gone"),
        ("unsubscribe", "mem://gone"),
        ("subscribe", "mem://a"),  # renewed on the new process; the unsubscribed one is not
    ]
    assert len(pids) == 2
