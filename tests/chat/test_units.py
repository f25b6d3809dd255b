"""The chat's parts on their own: markdown streaming, key bindings, the inline asker, the
activity sink, slash commands and turn cancellation (prompt_toolkit fed through a pipe)."""

from __future__ import annotations

import asyncio
import io
from collections.abc import Iterator
from typing import Any

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console
from rich.markdown import Markdown

from graphchat.asks import Question
from graphchat.catalog.base import Catalog, ToolSource, ToolSpec
from graphchat.chat.app import ChatApp, resume_hint
from graphchat.chat.asker import ChatAsker
from graphchat.chat.commands import run_command
from graphchat.chat.render import TailView, split_stable
from graphchat.chat.sink import ChatSink
from graphchat.chat.ui import ChatUI
from graphchat.events import format_cost, usage_text

DOC = """\
Here is **some** text.

A second paragraph.

```python
print('x')

print('y')
```

- item one
- item two

# Heading

1. one
2. two

> quoted
> still quoted

Last line."""


def console(width: int = 60) -> Console:
    return Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)


def text_of(c: Console) -> str:
    return c.file.getvalue()  # type: ignore[attr-defined]


@pytest.fixture
def pipe() -> Iterator[Any]:
    with create_pipe_input() as pipe_input:
        yield pipe_input


@pytest.fixture
def ui(pipe: Any) -> ChatUI:
    return ChatUI(console=console(), pt_input=pipe, pt_output=DummyOutput())


# --- streaming markdown -------------------------------------------------------------------------


def test_split_stable_cuts_after_blank_lines_outside_fences() -> None:
    assert split_stable("one\n\ntw") == ("one\n\n", "tw")
    assert split_stable("one\ntwo") == ("", "one\ntwo")
    assert split_stable("```\na\n\nb") == ("", "```\na\n\nb")  # blank line inside an open fence
    assert split_stable("```\na\n\nb\n```\nmore") == ("```\na\n\nb\n```\n", "more")
    assert split_stable("text\n\n   \n") == ("text\n\n   \n", "")
    assert split_stable("") == ("", "")


async def test_streamed_answer_prints_exactly_what_rendering_it_whole_prints(ui: ChatUI) -> None:
    whole = console()
    whole.print(Markdown(DOC, code_theme="monokai"))
    ui.begin_turn()
    for i in range(0, len(DOC), 3):  # three characters at a time, as a model streams
        ui.on_text(DOC[i : i + 3])
    ui.end_turn()
    assert text_of(ui.console) == text_of(whole) + "\n"  # plus the blank line that ends a turn


async def test_blocks_are_printed_as_soon_as_they_are_finished(ui: ChatUI) -> None:
    ui.begin_turn()
    ui.on_text("First **block**.\n")
    assert text_of(ui.console) == ""  # might still grow
    ui.on_text("\nSecond")
    assert text_of(ui.console).strip() == "First block."
    ui.end_turn()
    assert text_of(ui.console).split() == ["First", "block.", "Second"]


async def test_text_before_tool_calls_is_printed_before_their_lines(ui: ChatUI) -> None:
    sink = ChatSink(ui)
    ui.begin_turn()
    ui.on_text("Let me check")
    sink.tool_started("time__now", {"zone": "UTC"})
    sink.tool_started("time__now", {"zone": "CET"})
    sink.tool_finished("time__now", 812.0, False)
    sink.tool_finished("time__now", 20.0, True, "boom")
    ui.on_text("Done.")
    ui.end_turn()
    lines = [line.rstrip() for line in text_of(ui.console).splitlines() if line.strip()]
    assert lines == [
        "Let me check",
        '→ time__now {"zone":"UTC"}',
        '→ time__now {"zone":"CET"}',
        "✓ time__now 0.8s",
        "✗ time__now 0.0s boom",
        "Done.",
    ]


def test_tail_view_keeps_the_last_lines_and_the_status() -> None:
    c = console(40)
    c.print(TailView("\n".join(f"line {i}  " for i in range(30)), ["⋯ tool 1.0s"], max_lines=5))
    lines = [line.rstrip() for line in text_of(c).splitlines()]
    assert lines == ["line 26", "line 27", "line 28", "line 29", "⋯ tool 1.0s"]


async def test_live_region_shows_running_tools_side_by_side(pipe: Any) -> None:
    out = io.StringIO()
    live_console = Console(file=out, width=80, height=20, force_terminal=True, force_interactive=True)
    ui = ChatUI(console=live_console, pt_input=pipe, pt_output=DummyOutput())
    assert ui.live_enabled
    ui.begin_turn()
    ui.tool_started("a__slow")
    ui.tool_started("b__fast")
    assert "a__slow 0.0s  b__fast 0.0s" in out.getvalue()
    ui.tool_finished("a__slow")
    ui.tool_finished("b__fast")
    ui.end_turn()


def test_typeahead_keeps_printable_text_only(ui: ChatUI) -> None:
    ui._typeahead = b"hel\x1b[Alo\x7f\r"
    assert ui.take_typeahead() == "hello\n"  # the Enter stays: read_message sends that line
    assert ui.take_typeahead() == ""


# --- input --------------------------------------------------------------------------------------


async def test_enter_sends_and_backslash_or_alt_enter_continue(ui: ChatUI, pipe: Any) -> None:
    pipe.send_text("first\\\rsecond\r")
    assert await ui.read_message() == "first\nsecond"
    pipe.send_text("one\x1b\rtwo\r")
    assert await ui.read_message() == "one\ntwo"


async def test_ctrl_c_clears_the_line_and_ctrl_d_leaves(ui: ChatUI, pipe: Any) -> None:
    pipe.send_text("half a thought\x03hello\r")
    assert await ui.read_message() == "hello"
    pipe.send_text("\x04")
    assert await ui.read_message() is None


# --- the inline asker ---------------------------------------------------------------------------


async def test_a_question_is_answered_inline(ui: ChatUI, pipe: Any) -> None:
    asker = ChatAsker(ui)
    pipe.send_text("2\r")
    answer = await asker.ask(Question("Allow files__rm?", options=["once", "always", "refuse"]))
    assert answer.answered and answer.value == "always"
    shown = text_of(ui.console)
    assert "? Allow files__rm?" in shown and "2. always" in shown


async def test_a_form_question_re_asks_a_bad_value(ui: ChatUI, pipe: Any) -> None:
    asker = ChatAsker(ui)
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    pipe.send_text("many\r7\r")
    answer = await asker.ask(Question("How many?", schema=schema))
    assert answer.answered and answer.value == {"n": 7}
    assert "expected a whole number" in text_of(ui.console)


async def test_a_blank_answer_declines(ui: ChatUI, pipe: Any) -> None:
    pipe.send_text("\r")
    answer = await ChatAsker(ui).ask(Question("Name?"))
    assert not answer.answered and answer.reason == "declined"


async def test_questions_during_a_turn_pause_the_live_region(pipe: Any) -> None:
    live_console = Console(
        file=io.StringIO(), width=80, height=20, force_terminal=True, force_interactive=True
    )
    ui = ChatUI(console=live_console, pt_input=pipe, pt_output=DummyOutput())
    ui.begin_turn()
    assert ui._live is not None
    seen: list[Any] = []
    original = ui.answer_session.prompt_async

    async def spy(prompt: str) -> Any:
        seen.append((prompt, ui._live))
        return await original(prompt)

    ui.answer_session.prompt_async = spy
    pipe.send_text("yes\r")
    answer = await ChatAsker(ui).ask(Question("Go on?"))
    assert answer.value == "yes"
    assert seen == [("answer> ", None)]  # no live region while the prompt is up
    assert ui._live is not None  # and it is back for the rest of the turn
    ui.end_turn()


# --- turns and commands -------------------------------------------------------------------------


class FakeSession:
    def __init__(self) -> None:
        self.thread_id: str | None = None
        self.model = "openai/first"
        self.usage_total = {"calls": 2, "input_tokens": 1234, "output_tokens": 56}
        self.started = asyncio.Event()
        self.block = True
        self.messages: list[str] = []

    async def turn(self, message: str, *, on_text: Any = None, replace_last: bool = False) -> str:
        self.messages.append(message)
        self.thread_id = "abc123def456"
        if self.block:
            self.started.set()
            await asyncio.Event().wait()
        on_text(f"echo: {message}")
        return message

    def new_thread(self) -> None:
        self.thread_id = None

    def set_model(self, name: str) -> None:
        self.model = name


async def test_cancelling_a_turn_keeps_the_session_going(ui: ChatUI) -> None:
    session = FakeSession()
    app = ChatApp(ui, session, catalog=None)
    running = asyncio.ensure_future(app.run_turn("slow"))
    await session.started.wait()
    ui.cancel_turn()
    assert await running is None
    assert "turn cancelled" in text_of(ui.console)
    session.block = False
    assert await app.run_turn("again") == "again"
    assert "echo: again" in text_of(ui.console)
    assert resume_hint(session) == "resume with: graphchat chat --thread abc123def456"


async def test_slash_commands(ui: ChatUI) -> None:
    session = FakeSession()
    app = ChatApp(ui, session, catalog=None)
    assert await run_command(app, "/help")
    assert "Alt-Enter" in text_of(ui.console) and "/usage" in text_of(ui.console)
    assert await run_command(app, "/model openai/second")
    assert session.model == "openai/second"
    assert await run_command(app, "/model")
    assert "model: openai/second" in text_of(ui.console)
    assert await run_command(app, "/us")  # a unique prefix works
    assert "calls 2 · input 1,234 tokens · output 56 tokens" in text_of(ui.console)
    assert await run_command(app, "/thread")
    assert "no thread yet" in text_of(ui.console)
    session.thread_id = "t1"
    assert await run_command(app, "/new")
    assert session.thread_id is None
    assert await run_command(app, "/bogus")
    assert "unknown command /bogus" in text_of(ui.console)
    assert not await run_command(app, "/quit")


class Tools(ToolSource):
    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec("time__get_current_time", "Current time in a zone.\nMore.", {}, "mcp:time", "read"),
            ToolSpec("files__delete_file", "Delete a file.", {}, "mcp:files", "destructive"),
        ]


async def test_tools_command_lists_name_family_description(ui: ChatUI) -> None:
    app = ChatApp(ui, FakeSession(), catalog=Catalog([Tools()]))
    assert await run_command(app, "/tools")
    lines = [line.split() for line in text_of(ui.console).splitlines()]
    assert lines == [
        ["files__delete_file", "destructive", "Delete", "a", "file."],
        ["time__get_current_time", "read", "Current", "time", "in", "a", "zone."],
        ["2", "tools"],
    ]


def test_usage_text_shows_cost_when_known() -> None:
    assert usage_text({"calls": 1, "input_tokens": 5, "output_tokens": 2, "cost_usd": 0.00123}) == (
        "calls 1 · input 5 tokens · output 2 tokens · $0.00123"
    )


def test_cost_keeps_enough_digits() -> None:
    """A small call's cost is not rounded away (issue 11 point 14)."""
    assert format_cost(0.0000135) == "$0.0000135"
    assert format_cost(0.00123) == "$0.00123"
    assert format_cost(0.05) == "$0.05"
    assert format_cost(1.254) == "$1.25"
    assert format_cost(0) == "$0"


def test_chat_without_a_terminal_is_a_usage_error(cli: Any) -> None:
    result = cli("chat")
    assert result.returncode == 2
    assert result.stdout == ""
    assert "error: chat needs a terminal" in result.stderr


def test_every_slash_command_has_a_handler_a_help_line_and_completes() -> None:
    """Issue 24 point 7: /help and Tab know every command (the pty test runs the new ones)."""
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from graphchat.chat.commands import COMMANDS, HANDLERS, HELP
    from graphchat.chat.complete import ChatCompleter

    assert set(COMMANDS) == set(HANDLERS)
    assert {"retry", "edit", "clear", "exit", "quit"} <= set(COMMANDS)
    for name in COMMANDS:
        assert f"/{name}" in HELP, name
    completer = ChatCompleter(COMMANDS, lambda: [])
    offered = [
        c.text for c in completer.get_completions(Document("/"), CompleteEvent(completion_requested=True))
    ]
    assert offered == [f"/{name}" for name in COMMANDS]
