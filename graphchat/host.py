"""The host assembly: what `ask`, `chat`, `plan run`, `tools call` and `mcp serve` run on.

Every command builds the same stack in the same order — settings → events → asker → thread
store → catalog → session — and only says what differs: where events go (stderr lines, JSONL,
the chat screen), who can answer questions here (the terminal, the chat, an MCP client, nobody)
and how calls are approved.

Questions follow one rule: answers from the `--answers` file first, then whoever can answer
here; only when nobody can is a question unavailable (never a hang).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphchat.agent.session import Session
    from graphchat.asks import Asker
    from graphchat.catalog.base import Approver, CallContext, Catalog
    from graphchat.events import EventSink
    from graphchat.threads.store import Thread, ThreadStore
    from graphchat.workspace import Settings


def load_settings(home: str | None, *, model: str | None = None, needs: str | None = None) -> Settings:
    """The workspace's settings (`--model` overrides the configured models). `needs` names the
    model role the command will certainly call (chat, solver): no model configured for it exits
    2 now, before anything starts, and the model library starts importing in the background."""
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.workspace import load_settings as load

    settings = load(home, model_override=model)
    if needs is not None:
        needs_model(settings, needs)
    return settings


def needs_model(settings: Settings, role: str) -> None:
    """A model call for `role` is certain: exit 2 now when none is configured, and overlap
    the model library's import with the rest of the start."""
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.llm.keys import check_key, check_model

    config = settings.model_for(role)
    check_model(config)  # a misspelt provider or model: exit 2 before litellm loads (seconds)
    check_key(config)  # a missing key: the same, naming the variable; nothing is sent
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.llm.runtime import preload_in_background

    preload_in_background()


def answering(answers_file: str | None, here: Asker, events: EventSink | None) -> Asker:
    """The one rule for `--answers`: the file first, then `here` (the terminal, the chat)."""
    if not answers_file:
        return here
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.asks import ScriptedAsker, load_answers

    return ScriptedAsker(load_answers(answers_file), fallback=here, events=events)


@dataclass
class Host:
    """One command's stack. `aclose` stops what it started (servers, shape recordings)."""

    settings: Settings
    events: EventSink
    asker: Asker
    catalog: Catalog
    _store: ThreadStore | None = field(default=None, repr=False)
    _scratch: Path | None = field(default=None, repr=False)  # the threads of GRAPHCHAT_STORAGE=memory
    _sessions: list[Session] = field(default_factory=list, repr=False)
    # False: the catalog belongs to someone else (a warm helper's, kept running between turns)
    owns_catalog: bool = True

    @property
    def threads(self) -> ThreadStore:
        if self._store is None:
            # on `ask`'s path before it hands the turn to a warm helper: imported when used
            from graphchat.ci import memory_storage
            from graphchat.threads.redact import settings_secrets
            from graphchat.threads.store import ThreadStore

            root = self.settings.threads_dir
            if memory_storage():  # GRAPHCHAT_STORAGE=memory: the turn's thread lives in a scratch
                import tempfile  # folder removed when the command ends (graphchat.ci)

                self._scratch = root = Path(tempfile.mkdtemp(prefix="graphchat-memory-"))
            self._store = ThreadStore(root, secrets=settings_secrets(self.settings))
        return self._store

    def continued(self, flag: str | None) -> Thread | None:
        """The thread `--thread [ID]` means (None: a new one)."""
        return self.threads.continued(flag)

    def session(
        self, thread: Thread | None, *, model_override: str | None = None, assume_yes: bool = False
    ) -> Session:
        """A conversation over `thread` (ask: one turn; chat: many) on this host's stack."""
        # on `ask`'s path before it hands the turn to a warm helper: imported when used
        from graphchat.agent.session import Session

        session = Session(
            self.settings,
            thread_store=self.threads,
            thread=thread,
            catalog=self.catalog,
            asker=self.asker,
            events=self.events,
            model_override=model_override,
            assume_yes=assume_yes,
        )
        self._sessions.append(session)
        return session

    def context(self, *, surface: str, assume_yes: bool = False) -> CallContext:
        """The CallContext of a call made straight from the command (plan run, tools call)."""
        # on `ask`'s path before it hands the turn to a warm helper: imported when used
        from graphchat.catalog.base import CallContext

        return CallContext(asker=self.asker, events=self.events, assume_yes=assume_yes, surface=surface)

    async def warm_up(self) -> None:
        """Start the workspace's MCP servers while the model library imports: tool lists not
        known yet are awaited (the model must see their tools), the others warm up in the
        background. A server that fails to start is reported, not fatal."""
        self.catalog.prestart()
        for server in await self.catalog.prepare():
            self.events.warning(self.catalog.start_problem(server) or f"MCP server '{server}' cannot start")

    async def aclose(self) -> None:
        """Close the sessions, then the catalog: no server process is left behind. An
        --answers key that answered no question is a warning (a typo must not pass silently)."""
        try:
            for session in self._sessions:
                await session.aclose()
        finally:
            if self.owns_catalog:
                await self.catalog.aclose()
            if self._scratch is not None:
                import shutil

                shutil.rmtree(self._scratch, ignore_errors=True)
        unused = getattr(self.asker, "unused", None)
        if callable(unused) and unused():
            keys = ", ".join(repr(k) for k in unused())
            self.events.warning(
                f"--answers: {keys} matched no question (a key is an ask step's id or a question's exact text)"
            )


def open_host(
    settings: Settings,
    *,
    events: EventSink | None = None,
    here: Callable[[EventSink], Asker] | None = None,
    answers: str | None = None,
    approver: Callable[[Approver], Approver] | None = None,
    record_shapes: bool = True,
    include_plans: bool = True,
    catalog: Catalog | None = None,
) -> Host:
    """Assemble a command's stack. `events`: where activity goes (default: stderr lines, or
    JSONL with GRAPHCHAT_EVENTS=jsonl); `here`: who can answer questions (default: the
    terminal when there is one); `answers`: an --answers file, asked first; `approver` wraps
    the workspace's approval policy (see `build_catalog`); `include_plans`: False for a catalog
    of the MCP servers' tools only (`mcp tools`); `catalog`: one already running (a warm
    helper's), used and left running. Cheap: nothing starts here."""
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.events import sink_for_environment
    from graphchat.sources import build_catalog

    sink = events if events is not None else sink_for_environment()
    if here is None:
        # on `ask`'s path before it hands the turn to a warm helper: imported when used
        from graphchat.asks import host_asker

        here = host_asker  # the terminal when there is one
    asker = answering(answers, here(sink), sink)
    owns = catalog is None
    if catalog is None:
        catalog = build_catalog(
            settings,
            events=sink,
            approver=approver,
            record_shapes=record_shapes,
            include_plans=include_plans,
        )
    for message in catalog.warnings:  # skipped servers, name clashes: every command says so
        sink.warning(message)
    return Host(settings, sink, asker, catalog, owns_catalog=owns)
