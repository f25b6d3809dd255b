"""The chat loop: read a message, run a turn with its live display, repeat until Ctrl-D or /quit.

Ctrl-C during a turn cancels that turn only: the terminal is in cooked mode while a turn runs,
so Ctrl-C arrives as SIGINT, and our handler cancels the turn's task (the session's thread keeps
what completed). At a prompt (message or question) prompt_toolkit reads Ctrl-C as a key.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from graphchat import interrupts
from graphchat.catalog.mcp.features import mentions, with_attachments
from graphchat.chat.commands import is_command, run_command, waiting_requests
from graphchat.chat.subscriptions import Subscriptions
from graphchat.chat.ui import ChatUI
from graphchat.errors import GraphchatError
from graphchat.fsutil import describe_failure


class ChatApp:
    """One interactive session: a UI, an agent Session, the catalog it calls."""

    def __init__(self, ui: ChatUI, session: Any, catalog: Any, settings: Any = None) -> None:
        self.ui = ui
        self.session = session
        self.catalog = catalog
        self.settings = settings
        self.last_sent: str | None = (
            None  # the latest message sent (what /retry resends when no thread kept it)
        )
        self._tools_task: asyncio.Task[Any] | None = None
        self.subscriptions = Subscriptions()  # /subscribe: resources whose changes are shown
        # Run once before the first prompt (a continued thread's waiting question, issue 19)
        self.on_start: Callable[[], Awaitable[None]] | None = None

    def prepare_tools(self) -> None:
        """Fill the tool-list cache of MCP servers not seen yet, in the background, while the
        person types (the model must see their tools; a warm cache starts nothing)."""
        self._tools_task = asyncio.ensure_future(self.catalog.prepare())

    async def tools_ready(self) -> None:
        task, self._tools_task = self._tools_task, None
        if task is None:
            return
        try:
            errors = await task
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            errors = {"(all)": f"{type(exc).__name__}: {exc}"}
        for server, error in (errors or {}).items():
            self.ui.activity(f"warning: MCP server {server}: {error}", "yellow")

    def model_name(self) -> str:
        for attr in ("model_name", "model"):
            value = getattr(self.session, attr, None)
            if isinstance(value, str):
                return value
            if value is not None and isinstance(getattr(value, "model", None), str):
                return value.model
        if self.settings is not None:
            try:
                return self.settings.model_for("chat").model
            except Exception:
                pass
        return "(none)"

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        main = asyncio.current_task()

        def interrupted() -> None:
            turn = self.ui.turn_task
            if turn is not None and not turn.done():
                self.ui.cancel_turn()  # Ctrl-C, SIGTERM, SIGHUP: the turn ends, recorded
            elif interrupts.received() and main is not None:
                main.cancel()  # SIGTERM/SIGHUP at the prompt: nothing to record, the chat ends

        def on_sigint(signum: int, frame: Any) -> None:
            # Python runs this between bytecodes of the loop thread: hand it to the loop.
            loop.call_soon_threadsafe(interrupted)

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            if self.catalog is not None:
                self.prepare_tools()
            if self.on_start is not None:
                await self.on_start()
            self.show_waiting_requests()
            while True:
                line = await self.ui.read_message()
                if line is None:
                    break
                if not line.strip():
                    continue
                if is_command(line.strip()):
                    if not await run_command(self, line.strip()):
                        break
                    continue
                message = line[1:] if line.startswith("//") else line
                await self.run_turn(message)
                if interrupts.received():  # SIGTERM/SIGHUP ended the turn: the chat ends too
                    break
        finally:
            signal.signal(signal.SIGINT, previous)
            self.ui.close()
            if self._tools_task is not None:
                self._tools_task.cancel()

    def show_waiting_requests(self) -> None:
        """Requests parked by other runs of this workspace wait for a person: say so at start."""
        count = len(waiting_requests(self))
        if count:
            self.ui.print(f"{count} request{'s wait' if count != 1 else ' waits'}: /requests", style="yellow")

    async def run_turn(self, message: str, *, replace_last: bool = False) -> Any:
        """One turn with its live display; never raises for a turn that failed or was cancelled.
        `replace_last`: the thread's latest turn is taken back first (/retry, /edit)."""

        async def turn() -> Any:
            await self.tools_ready()
            return await self.session.turn(
                await self.with_mentions(message), on_text=self.ui.on_text, replace_last=replace_last
            )

        self.last_sent = message  # /retry after a turn whose thread was not kept (a rejected key)
        return await self.run_live(turn)

    async def with_mentions(self, message: str) -> str:
        """`message` with the resources it mentions (`@SERVER:URI`, a configured server) attached,
        and the subscribed resources that changed since the last message, re-read."""
        changed = self.subscriptions.take_changed()
        if self.catalog is None or ("@" not in message and not changed):
            return message

        refs = mentions(message, self.catalog.groups()) if "@" in message else []
        for server, uri in refs:
            self.ui.activity(f"@ attaching {server}:{uri}", "dim")
        for server, uri in changed:
            if (server, uri) not in refs:
                refs.append((server, uri))
                self.ui.activity(f"↻ re-reading {server}:{uri}", "dim")
        if not refs:
            return message
        limit = self.settings.max_tool_result_chars if self.settings is not None else 20000
        return await with_attachments(self.catalog, message, refs, limit)

    async def run_live(
        self,
        work: Callable[[], Awaitable[Any]],
        cancelled: str = "turn cancelled (the thread keeps what completed)",
    ) -> Any:
        """Run `work()` with a turn's live display (tool lines, Ctrl-C cancels it); its result, or
        None when it failed or was cancelled (said on screen, never raised)."""
        ui = self.ui
        ui.begin_turn()
        task = asyncio.ensure_future(work())
        ui.turn_task = task
        try:
            await asyncio.wait({task})
        finally:
            ui.end_turn()
        if task.cancelled():
            ui.print(f"⏹ {cancelled}", style="yellow", markup=False)
            return None
        exc = task.exception()
        if exc is None:
            return task.result()
        if isinstance(exc, GraphchatError):
            ui.print(f"error: {exc.message}", style="red", markup=False)
            if exc.hint:
                ui.print(f"  {exc.hint}", markup=False)
        elif isinstance(exc, KeyboardInterrupt):
            ui.print("⏹ turn cancelled", style="yellow", markup=False)
        else:
            ui.print(f"error: {describe_failure(exc)}", style="red", markup=False)
        return None


def resume_hint(session: Any) -> str | None:
    thread_id = session.thread_id
    return f"resume with: graphchat chat --thread {thread_id}" if thread_id else None


async def close_quietly(*closables: Any) -> None:
    for item in closables:
        if item is None:
            continue
        try:
            await item.aclose()
        except Exception:
            pass


def print_resume_hint(session: Any) -> None:
    hint = resume_hint(session)
    if hint:
        sys.stderr.write(hint + "\n")
        sys.stderr.flush()
