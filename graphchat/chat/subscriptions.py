"""Resource subscriptions in chat: `/subscribe SERVER:URI` asks the server to tell graphchat when
that resource changes (`resources/subscribe`); each change is one line in the chat (once until
the next message), and the next message carries the resource's new contents, re-read, as an
`@SERVER:URI` mention would. `/unsubscribe SERVER:URI` stops it; `/subscribe` alone lists them.

A subscription lives as long as the server's connection: a server that restarts has forgotten
it (subscribe again)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.catalog.mcp.connection import describe
from graphchat.errors import GraphchatError, did_you_mean

if TYPE_CHECKING:
    from graphchat.chat.app import ChatApp


class Subscriptions:
    """The (server, uri) this chat subscribed to, and those that changed since the last message."""

    def __init__(self) -> None:
        self.active: list[tuple[str, str]] = []
        self.changed: list[tuple[str, str]] = []

    def updated(self, ui: Any, server: str, uri: str) -> None:
        """The server says `uri` changed: one line, the first time since the last message."""
        ref = (server, uri)
        if ref in self.active and ref not in self.changed:
            self.changed.append(ref)
            ui.activity(f"↻ {server}:{uri} changed (your next message brings its new contents)", "dim")

    def take_changed(self) -> list[tuple[str, str]]:
        """The changed resources to re-read with the next message (forgotten once taken)."""
        taken, self.changed = self.changed, []
        return [ref for ref in taken if ref in self.active]


def _ref(app: ChatApp, command: str, arg: str) -> tuple[str, str] | None:
    server, sep, uri = arg.strip().partition(":")
    servers = app.catalog.groups() if app.catalog is not None else []
    if not sep or not server or not uri or " " in uri:
        app.ui.print(
            f"/{command}: expected SERVER:URI (e.g. docs:file:///notes.md)", style="yellow", markup=False
        )
        return None
    if server not in servers:
        hint = did_you_mean(server, servers)
        app.ui.print(
            f"/{command}: no MCP server '{server}' is configured" + (f" ({hint})" if hint else ""),
            style="yellow",
            markup=False,
        )
        return None
    return server, uri


async def _request(app: ChatApp, command: str, server: str, method: str, uri: str) -> bool:
    """`method` (subscribe_resource / unsubscribe_resource) on `server`; False (said) when it failed."""
    try:
        source = app.catalog.mcp_source()
        source.on_resource_update = lambda s, u: app.subscriptions.updated(app.ui, s, u)
        await source.request(server, method, uri)
    except GraphchatError as exc:
        app.ui.print(f"/{command} {server}:{uri}: {exc.message}", style="yellow", markup=False)
        return False
    except Exception as exc:  # the server cannot start, or refuses (no subscription support)
        app.ui.print(
            f"/{command} {server}:{uri}: MCP server '{server}': {describe(exc)}", style="yellow", markup=False
        )
        return False
    return True


async def subscribe(app: ChatApp, arg: str) -> bool:
    subs = app.subscriptions
    if not arg.strip():
        listed = ", ".join(f"{s}:{u}" for s, u in subs.active) or "none (/subscribe SERVER:URI)"
        app.ui.print(f"subscribed: {listed}", markup=False)
        return True
    ref = _ref(app, "subscribe", arg)
    if ref is None or ref in subs.active:
        return True
    if await _request(app, "subscribe", ref[0], "subscribe_resource", ref[1]):
        subs.active.append(ref)
        app.ui.print(f"subscribed to {ref[0]}:{ref[1]}: a change is shown here", style="dim", markup=False)
    return True


async def unsubscribe(app: ChatApp, arg: str) -> bool:
    ref = _ref(app, "unsubscribe", arg)
    if ref is None:
        return True
    subs = app.subscriptions
    if ref not in subs.active:
        app.ui.print(f"/unsubscribe: not subscribed to {ref[0]}:{ref[1]}", style="yellow", markup=False)
        return True
    subs.active.remove(ref)
    if await _request(app, "unsubscribe", ref[0], "unsubscribe_resource", ref[1]):
        app.ui.print(f"unsubscribed from {ref[0]}:{ref[1]}", style="dim", markup=False)
    return True
