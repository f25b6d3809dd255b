"""Slash commands of the chat: /help /tools /thread /new /clear /retry /edit /model [NAME]
/freeze [NAME] /workbench /usage /requests /subscribe /unsubscribe /quit (/exit), and /SERVER:PROMPT."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from graphchat.asks import Question
from graphchat.catalog.base import CallContext
from graphchat.catalog.mcp.features import prompt_message
from graphchat.chat.subscriptions import subscribe, unsubscribe
from graphchat.display import safe
from graphchat.errors import GraphchatError
from graphchat.events import usage_text
from graphchat.runs.freeze import PlanExistsError, freeze_to_workspace
from graphchat.runs.requests import RequestStore
from graphchat.workbench import launch
from graphchat.workbench.pane_asker import PaneAsker

if TYPE_CHECKING:
    from graphchat.chat.app import ChatApp

HELP = """\
Type a message and press Enter to send it.
  Alt-Enter or Esc Enter   new line (a trailing \\ at the end of a line continues it too)
  Up / Down                input history (kept in the workspace's .graphchat_history)
  Ctrl-C                   cancel the running turn; at the prompt, clear the line
  Ctrl-D                   leave (so does /quit or /exit)
  Tab                      complete a /command, a tool name after /tools, a plan__ name,
                           an MCP server's /SERVER:PROMPT and its arguments
Questions from tools (ask_user, approvals, plan asks) appear inline: type the answer at
`answer>`; a blank answer declines.
Commands:
  /help            this help
  /tools [NAME]    the tools the model can call (those starting with NAME, or a glob)
  /thread          the current thread (id, title, messages)
  /new             start a new thread
  /clear           start a new thread and clear the screen
  /retry           send your last message again (the model's last answer is taken back)
  /edit            put your last message in the input box: edit it, Enter sends it in
                   place of the last one (clear the line to keep things as they are)
  /model [NAME]    show the model, or switch to NAME for the next turns
  /freeze [NAME]   save this thread's successful tool calls as plans/NAME.yaml, then
                   offer to run it once (add --force to overwrite an existing file)
  /workbench       open this thread, frozen as a plan draft, in the full-screen plan
                   workbench; quitting it comes back here
  /usage           tokens (and cost, when known) used in this session
  /requests [ID [VALUE]]  the questions parked runs of this workspace wait on; answer one
                   (an approval: permit or deny) and see what its run printed
  /quit, /exit     leave (prints how to resume the thread)
  /SERVER:PROMPT [k=v …]  send an MCP server's prompt (`graphchat mcp prompts` lists them;
                   Tab completes its name, its arguments and, when the server offers them, values)
  /subscribe [SERVER:URI], /unsubscribe SERVER:URI  a resource's changes are shown, and the
                   next message carries its new contents
@SERVER:URI in a message attaches that resource of an MCP server (to the next space).
A message that starts with // is sent as text starting with /."""

COMMANDS = (
    "help",
    "tools",
    "thread",
    "new",
    "clear",
    "retry",
    "edit",
    "model",
    "freeze",
    "workbench",
    "usage",
    "requests",
    "subscribe",
    "unsubscribe",
    "quit",
    "exit",
)

Handler = Callable[["ChatApp", str], Awaitable[bool]]


def is_command(line: str) -> bool:
    return line.startswith("/") and not line.startswith("//")


async def _help(app: ChatApp, arg: str) -> bool:
    app.ui.print(HELP, markup=False)
    return True


async def _tools(app: ChatApp, arg: str) -> bool:
    from fnmatch import fnmatchcase

    from rich.text import Text

    await app.tools_ready()
    specs = sorted(app.catalog.list(), key=lambda s: s.name)
    if not specs:
        app.ui.print("no tools (configure MCP servers in catalog/servers.yaml, plans in plans/)")
        return True
    if arg:  # `/tools NAME` or a glob (`/tools time__*`): only those
        pattern = arg if any(c in arg for c in "*?[") else f"{arg}*"
        specs = [s for s in specs if fnmatchcase(s.name, pattern)]
        if not specs:
            app.ui.print(f"no tool matches {arg!r}", style="yellow", markup=False)
            return True
    width = min(max(len(s.name) for s in specs), 64)
    for spec in specs:
        lines = (spec.description or "").strip().splitlines()
        line = Text(f"{spec.name:<{width}}  ", style="bold", no_wrap=True, overflow="ellipsis")
        line.append(f"{spec.family:<11}  ", style="dim")
        line.append(lines[0] if lines else "")
        app.ui.print(line, no_wrap=True, overflow="ellipsis", crop=True)
    app.ui.print(f"{len(specs)} tools", style="dim")
    return True


async def _thread(app: ChatApp, arg: str) -> bool:
    thread_id = app.session.thread_id
    if thread_id is None:
        app.ui.print("no thread yet: the first message starts one")
        return True
    thread = app.session.thread
    try:
        info = thread.info()
        app.ui.print(
            f"thread {info.id} · {info.title or '(untitled)'} · {info.message_count} messages", markup=False
        )
    except Exception:
        app.ui.print(f"thread {thread_id}", markup=False)
    return True


async def _new(app: ChatApp, arg: str) -> bool:
    app.session.new_thread()
    app.ui.print("new thread: the next message starts it")
    return True


async def _clear(app: ChatApp, arg: str) -> bool:
    app.session.new_thread()
    app.ui.clear_screen()
    app.ui.print("new thread: the next message starts it", style="dim", markup=False)
    return True


def _last_or_say(app: ChatApp, command: str) -> str | None:
    message = app.session.last_message()
    if message is None and app.session.thread_id is None:
        # the last turn failed before anything was kept (its thread was dropped): send it again
        message = getattr(app, "last_sent", None)
    if message is None:
        app.ui.print(f"nothing to {command} yet: send a message first", style="yellow", markup=False)
    return message


async def _retry(app: ChatApp, arg: str) -> bool:
    """The last turn again: taken back from the thread (kept on disk, no longer sent), and its
    message sent anew."""
    message = _last_or_say(app, "retry")
    if message is not None:
        app.ui.print(f"↻ retrying: {_one_line(message)}", style="dim", markup=False)
        await app.run_turn(message, replace_last=app.session.thread_id is not None)
    return True


async def _edit(app: ChatApp, arg: str) -> bool:
    """The last message in the input box; what is sent replaces the last turn. A cleared line
    (or Ctrl-D) changes nothing."""
    message = _last_or_say(app, "edit")
    if message is None:
        return True
    edited = await app.ui.edit_message(message)
    if edited is None or not edited.strip():
        app.ui.print("edit cancelled: the thread is as it was", style="dim", markup=False)
        return True
    await app.run_turn(edited, replace_last=True)
    return True


def _one_line(text: str, width: int = 70) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


async def _model(app: ChatApp, arg: str) -> bool:
    if arg:
        try:
            app.session.set_model(arg)
        except GraphchatError as exc:
            app.ui.print(f"error: {exc.message}", style="red", markup=False)
            return True
        app.ui.print(f"model: {arg}", markup=False)
    else:
        app.ui.print(f"model: {app.model_name()}", markup=False)
    return True


async def _freeze(app: ChatApp, arg: str) -> bool:
    """Freeze the current thread into a plan, show it, and offer to run it once."""
    ui = app.ui
    thread_id = app.session.thread_id
    if thread_id is None:
        ui.print("no thread yet: chat first, then /freeze what worked", markup=False)
        return True
    words = arg.split()
    force = "--force" in words
    names = [w for w in words if w != "--force"]
    if len(names) > 1:
        ui.print("usage: /freeze [NAME] [--force]", style="yellow", markup=False)
        return True
    try:
        saved = freeze_to_workspace(
            app.settings,
            thread_id,
            name=names[0] if names else None,
            force=force,
            warn=lambda message: ui.print(f"warning: {message}", style="yellow", markup=False),
        )
    except PlanExistsError as exc:
        ui.print(f"error: {exc.message}", style="red", markup=False)
        ui.print("  /freeze NAME picks another name; /freeze NAME --force overwrites it", markup=False)
        return True
    except GraphchatError as exc:
        ui.print(f"error: {exc.message}", style="red", markup=False)
        return True
    frozen, plan = saved.frozen, saved.plan
    ui.print(f"✓ plan '{frozen.identifier}' saved to {saved.path} ({frozen.finish} finish)", markup=False)
    ui.print("steps:", markup=False)
    for line in frozen.step_lines():
        ui.print(f"  {line}", markup=False, no_wrap=True, overflow="ellipsis", crop=True)
    ui.print("inputs:" if frozen.inputs else "inputs: none", markup=False)
    for line in frozen.input_lines():
        ui.print(f"  {line}", markup=False)
    for item in frozen.dropped:
        ui.print(f"left out: {item}", style="dim", markup=False)
    for item in frozen.notes:
        ui.print(f"note: {item}", style="yellow", markup=False)
    if await _yes(app, "Run it once now to check it?"):
        await _run_once(app, plan)
    else:
        ui.print(f"run it later with: graphchat plan run {frozen.identifier}", style="dim", markup=False)
    return True


async def _workbench(app: ChatApp, arg: str) -> bool:
    """The current thread frozen (as /freeze, nothing written) and opened in the workbench, on
    the chat's loop and catalog; the chat goes on when it closes."""
    ui = app.ui
    thread_id = app.session.thread_id
    if thread_id is None or app.catalog is None or app.settings is None:
        ui.print("no thread yet: chat first, then /workbench edits what worked as a plan", markup=False)
        return True
    try:
        bench = launch.prepare(
            app.settings, app.catalog, thread=thread_id, from_thread=True, asker=PaneAsker()
        )
        await launch.show(bench)
    except GraphchatError as exc:
        ui.print(f"error: {exc.message}", style="red", markup=False)
        return True
    ui.print(f"back in the chat (thread {thread_id})", markup=False)
    return True


async def _yes(app: ChatApp, prompt: str) -> bool:
    asker = app.session.asker
    if asker is None:
        return False
    answer = await asker.ask(Question(prompt, options=["yes", "no"]))
    return bool(answer.answered and answer.value == "yes")


async def _run_once(app: ChatApp, plan: Any) -> None:
    """Run the new plan as the model would call it: `plan__<id>` through the catalog."""
    app.catalog.reload()
    session = app.session
    ctx = CallContext(
        asker=session.asker, events=session.events, assume_yes=session.assume_yes, surface="agent"
    )

    async def run() -> Any:
        await app.tools_ready()
        return await app.catalog.call(plan.tool_name, {}, ctx)

    result = await app.run_live(run, cancelled="plan run cancelled")
    if result is None:
        return
    if result.is_error:
        app.ui.print(f"✗ plan '{plan.identifier}' failed: {result.error_message}", style="red", markup=False)
        return
    app.ui.print(f"✓ plan '{plan.identifier}' ran", style="green", markup=False)
    value = result.value
    if isinstance(value, dict) and set(value) == {"answer"} and isinstance(value["answer"], str):
        from rich.markdown import Markdown

        app.ui.print(Markdown(safe(value["answer"])))
    else:
        import orjson

        text = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
        lines = text.splitlines()
        if len(lines) > 40:
            lines = [*lines[:40], f"… ({len(lines) - 40} more lines)"]
        app.ui.print("\n".join(lines), markup=False)


async def _usage(app: ChatApp, arg: str) -> bool:
    app.ui.print(usage_text(app.session.usage_total), markup=False)
    return True


def waiting_requests(app: ChatApp) -> list[Any]:
    """The open requests of this workspace (parked runs waiting for a person, issue 9)."""
    if app.settings is None:
        return []

    try:
        return RequestStore(app.settings.workspace).all()
    except OSError:
        return []


async def _requests(app: ChatApp, arg: str) -> bool:
    """`/requests` lists what waits; `/requests ID VALUE` answers one (`permit`/`deny` for an
    approval) with `graphchat answer`, whose run resumes in its own process; what it printed
    is shown here as a block."""
    import asyncio
    import sys

    from rich.panel import Panel
    from rich.text import Text

    ui = app.ui
    found = waiting_requests(app)
    request_id, _, value = arg.partition(" ")
    if not request_id:
        if not found:
            ui.print("no requests wait")
            return True
        for request in found:
            ui.print(f"{request.id}  {request.mode}: {request.question}", markup=False)
            for i, option in enumerate(request.options or [], 1):
                ui.print(f"    {i}. {option}", markup=False)
        ui.print("answer one: /requests ID VALUE (an approval: /requests ID permit|deny)", style="dim")
        return True
    request = next((r for r in found if r.id == request_id), None)
    if request is None or app.settings is None:
        ui.print(f"no open request {request_id}: /requests lists them", style="yellow", markup=False)
        return True
    value = value.strip()
    if request.kind == "approval":
        if value not in ("permit", "deny"):
            ui.print(
                f"request {request_id} is an approval: /requests {request_id} permit|deny", style="yellow"
            )
            return True
        argv = [value, request_id]
    else:
        if not value:
            ui.print(f"give the answer: /requests {request_id} VALUE", style="yellow", markup=False)
            return True
        argv = ["answer", request_id, value]
    home = str(app.settings.workspace)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "graphchat",
        "--home",
        home,
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    text = out.decode("utf-8", "replace").rstrip("\n")
    if text:
        ui.print(Panel(Text(text), title=f"request {request_id}", title_align="left"))
    lines = [line for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
    problem = [line for line in lines if line.startswith("error:")]
    if proc.returncode == 0:
        ui.print(f"✓ request {request_id} answered", style="green", markup=False)
    else:
        ui.print(
            f"{(problem or lines or ['failed'])[-1]} (exit {proc.returncode})", style="yellow", markup=False
        )
    return True


async def _quit(app: ChatApp, arg: str) -> bool:
    return False


HANDLERS: dict[str, Handler] = {
    "help": _help,
    "tools": _tools,
    "thread": _thread,
    "new": _new,
    "clear": _clear,
    "retry": _retry,
    "edit": _edit,
    "model": _model,
    "freeze": _freeze,
    "workbench": _workbench,
    "usage": _usage,
    "requests": _requests,
    "subscribe": subscribe,
    "unsubscribe": unsubscribe,
    "quit": _quit,
    "exit": _quit,
}


async def _server_prompt(app: ChatApp, server: str, name: str, arg: str) -> bool:
    """`/SERVER:NAME k=v …`: the server's prompt, with those arguments, sent as the next message."""
    import shlex

    try:
        tokens = shlex.split(arg)
    except ValueError as exc:
        app.ui.print(f"/{server}:{name}: {exc}", style="yellow", markup=False)
        return True
    arguments: dict[str, str] = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or not key:
            app.ui.print(
                f"/{server}:{name}: arguments are key=value (got {token!r}); "
                f"`graphchat mcp prompts {server}` lists them",
                style="yellow",
                markup=False,
            )
            return True
        arguments[key] = value

    async def turn() -> object:
        await app.tools_ready()
        message = await prompt_message(app.catalog, server, name, arguments)
        app.ui.activity(f"/ {server}:{name}: the prompt's messages are sent", "dim")
        return await app.session.turn(message, on_text=app.ui.on_text)

    await app.run_live(turn)
    return True


async def run_command(app: ChatApp, line: str) -> bool:
    """Run one slash command; False means leave the chat."""
    name, _, arg = line[1:].strip().partition(" ")
    server, colon, prompt = name.partition(":")
    if colon and app.catalog is not None and server in app.catalog.groups():
        return await _server_prompt(app, server, prompt, arg.strip())
    name = name.lower()
    handler = HANDLERS.get(name)
    if handler is None:
        matches = [c for c in COMMANDS if name and c.startswith(name)]
        if len(matches) == 1:
            handler = HANDLERS[matches[0]]
        else:
            app.ui.print(f"unknown command /{name}: /help lists them", style="yellow", markup=False)
            return True
    return await handler(app, arg.strip())
