"""Slash commands of the chat: /help /tools /thread /new /model [NAME] /freeze [NAME] /usage /quit."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphchat.chat.app import ChatApp

HELP = """\
Type a message and press Enter to send it.
  Alt-Enter or Esc Enter   new line (a trailing \\ at the end of a line continues it too)
  Up / Down                input history (kept in the workspace's .graphchat_history)
  Ctrl-C                   cancel the running turn; at the prompt, clear the line
  Ctrl-D                   leave (so does /quit)
Questions from tools (ask_user, approvals, plan asks) appear inline: type the answer at
`answer>`; a blank answer declines.
Commands:
  /help            this help
  /tools           the tools the model can call
  /thread          the current thread (id, title, messages)
  /new             start a new thread
  /model [NAME]    show the model, or switch to NAME for the next turns
  /freeze [NAME]   save this thread's successful tool calls as plans/NAME.yaml, then
                   offer to run it once (add --force to overwrite an existing file)
  /usage           tokens (and cost, when known) used in this session
  /quit            leave (prints how to resume the thread)
A message that starts with // is sent as text starting with /."""

COMMANDS = ("help", "tools", "thread", "new", "model", "freeze", "usage", "quit")

Handler = Callable[["ChatApp", str], Awaitable[bool]]


def is_command(line: str) -> bool:
    return line.startswith("/") and not line.startswith("//")


async def _help(app: ChatApp, arg: str) -> bool:
    app.ui.print(HELP, markup=False)
    return True


async def _tools(app: ChatApp, arg: str) -> bool:
    from rich.text import Text

    await app.tools_ready()
    specs = sorted((s for s in app.catalog.list() if s.source != "control"), key=lambda s: s.name)
    if not specs:
        app.ui.print("no tools (configure MCP servers in catalog/servers.yaml, plans in plans/)")
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
    from graphchat.chat.app import current_thread_id

    thread_id = current_thread_id(app.session)
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


async def _model(app: ChatApp, arg: str) -> bool:
    from graphchat.errors import GraphchatError

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
    from graphchat.chat.app import current_thread_id
    from graphchat.cli.plan_freeze import PlanExistsError, freeze_to_workspace
    from graphchat.errors import GraphchatError

    ui = app.ui
    thread_id = current_thread_id(app.session)
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
        saved = freeze_to_workspace(app.settings, thread_id, name=names[0] if names else None, force=force)
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
    if await _yes(app, "Run it once now to check it?"):
        await _run_once(app, plan)
    else:
        ui.print(f"run it later with: graphchat plan run {frozen.identifier}", style="dim", markup=False)
    return True


async def _yes(app: ChatApp, prompt: str) -> bool:
    from graphchat.asks import Question

    asker = app.session.asker
    if asker is None:
        return False
    answer = await asker.ask(Question(prompt, options=["yes", "no"]))
    return bool(answer.answered and answer.value == "yes")


async def _run_once(app: ChatApp, plan: Any) -> None:
    """Run the new plan as the model would call it: `plan__<id>` through the catalog."""
    from graphchat.catalog.base import CallContext

    for source in app.catalog.sources:
        reload = getattr(source, "reload", None)
        if callable(reload):
            reload()
    app.catalog.invalidate()
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

        from graphchat.display import safe

        app.ui.print(Markdown(safe(value["answer"])))
    else:
        import orjson

        text = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=str).decode()
        lines = text.splitlines()
        if len(lines) > 40:
            lines = [*lines[:40], f"… ({len(lines) - 40} more lines)"]
        app.ui.print("\n".join(lines), markup=False)


async def _usage(app: ChatApp, arg: str) -> bool:
    from graphchat.events import usage_text

    app.ui.print(usage_text(app.session.usage_total), markup=False)
    return True


async def _quit(app: ChatApp, arg: str) -> bool:
    return False


HANDLERS: dict[str, Handler] = {
    "help": _help,
    "tools": _tools,
    "thread": _thread,
    "new": _new,
    "model": _model,
    "freeze": _freeze,
    "usage": _usage,
    "quit": _quit,
}


async def run_command(app: ChatApp, line: str) -> bool:
    """Run one slash command; False means leave the chat."""
    name, _, arg = line[1:].strip().partition(" ")
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
