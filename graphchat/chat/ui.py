"""The chat terminal: prompt_toolkit input, rich output, one live region while a turn runs.

Everything printed during a turn goes through this object, so the live region (the growing
answer block and the running tools), permanent lines (tool activity, finished answer blocks)
and inline questions never draw over each other:
- finished markdown blocks and activity lines are printed once, above the live region;
- a question stops the live region, prompts with prompt_toolkit, and restarts it;
- lines printed while a question prompt is up go through `run_in_terminal`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

from graphchat.chat.render import CODE_THEME, TailView, split_stable
from graphchat.display import has_control, safe
from graphchat.threads.redact import Redactor, environment_secrets

MESSAGE_PROMPT = "you> "
ANSWER_PROMPT = "answer> "
REFRESH_S = 0.08  # live region redraws at most ~12 times a second: no flicker, still fluid
TICK_S = 0.25  # running-tool timers


class Lines:
    """Already rendered lines, printed as they are."""

    def __init__(self, lines: list[Any]) -> None:
        self.lines = lines

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.segment import Segment

        for line in self.lines:
            yield from line
            yield Segment.line()


def make_key_bindings() -> Any:
    """Enter sends; Alt-Enter / Esc-Enter inserts a newline; a trailing backslash continues;
    Ctrl-C clears the line (it never leaves the session)."""
    from prompt_toolkit.key_binding import KeyBindings

    kb = KeyBindings()

    @kb.add("c-c")
    def _clear(event: Any) -> None:
        event.current_buffer.reset()

    @kb.add("escape", "enter")
    def _newline(event: Any) -> None:
        event.current_buffer.insert_text("\n")

    @kb.add("enter")
    def _enter(event: Any) -> None:
        buffer = event.current_buffer
        if buffer.document.is_cursor_at_the_end and buffer.text.endswith("\\"):
            buffer.delete_before_cursor(1)
            buffer.insert_text("\n")
        else:
            buffer.validate_and_handle()

    return kb


def _private_history(file_history: Any, path: Path) -> Any:
    """prompt_toolkit's FileHistory, private (mode 0600: people paste keys) and scrubbed of the
    known secrets before anything is written (the workspace's, as threads are)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)  # an older history file may be world-readable
    redactor = Redactor(environment_secrets(path.parent))

    class PrivateHistory(file_history):  # type: ignore[misc,valid-type]
        def store_string(self, string: str) -> None:
            super().store_string(redactor.text(string))

    return PrivateHistory(str(path))


class ChatUI:
    """Terminal input and output of one chat session (single event loop, single thread)."""

    def __init__(
        self,
        *,
        history_path: Path | None = None,
        completer: Any = None,
        console: Any = None,
        pt_input: Any = None,
        pt_output: Any = None,
    ) -> None:
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory
        from rich.console import Console

        self.console = console or Console(highlight=False, soft_wrap=False)
        history: History = InMemoryHistory()
        if history_path is not None:
            with suppress(OSError):
                history_path.parent.mkdir(parents=True, exist_ok=True)
                history = _private_history(FileHistory, history_path)
        self.prompt_session: Any = PromptSession(
            history=history,
            key_bindings=make_key_bindings(),
            completer=completer,
            complete_while_typing=False,  # Tab asks; typing a message is never interrupted
            prompt_continuation=lambda width, line_no, wrap: "." * (width - 1) + " ",
            input=pt_input,
            output=pt_output,
        )
        self.answer_session: Any = PromptSession(history=InMemoryHistory(), input=pt_input, output=pt_output)
        # A `secret: true` field: masked, and never recalled by Up at a plain answer prompt.
        self.secret_session: Any = PromptSession(is_password=True, input=pt_input, output=pt_output)
        self.live_enabled = self.console.is_interactive  # False for TERM=dumb or a non-terminal
        self._live: Any = None
        self._buffer = ""  # streamed answer text not finished yet (shown in the live region)
        self._segment = ""  # finished answer text of the current segment (printed)
        self._lines_printed = 0  # rendered lines of `_segment` already printed
        self._running: list[tuple[str, float]] = []
        self._progress: dict[str, str] = {}  # a running tool's last progress (`3/5 message`)
        self._status: str | None = None  # plan step / progress while a plan tool runs
        self._waiting: tuple[str, float] | None = None  # the model call waited on, since when
        self._in_turn = False
        self._prompting = False
        self._refresh_handle: asyncio.TimerHandle | None = None
        self._last_refresh = 0.0
        self._ticker: asyncio.Task[None] | None = None
        self._saved_tty: Any = None
        self._key_fd: int | None = None
        self._typeahead = b""
        self.turn_task: asyncio.Task[Any] | None = None

    # --- input ---------------------------------------------------------------------------------

    async def read_message(self) -> str | None:
        """The next message (None on Ctrl-D at an empty prompt)."""
        typed = self.take_typeahead()
        if "\n" in typed:  # Enter was pressed during the turn: that line is the next message
            line, rest = typed.split("\n", 1)
            self._typeahead = rest.encode()  # what was typed after it waits in the next prompt
            if line.strip():
                from rich.text import Text

                self.console.print(Text(f"{MESSAGE_PROMPT}{line}"))  # shown as if typed at the prompt
                return line
            typed = self.take_typeahead()
        return await self._prompt_message(typed)

    async def edit_message(self, text: str) -> str | None:
        """`text` in the input box to edit (/edit); what is sent (None on Ctrl-D, "" cleared)."""
        return await self._prompt_message(text)

    async def _prompt_message(self, default: str) -> str | None:
        try:
            text = await self.prompt_session.prompt_async(MESSAGE_PROMPT, default=default)
            # A trailing backslash continues on the next line (the Enter binding does it in place;
            # this covers dumb terminals, where prompt_toolkit uses its own bindings).
            while text.endswith("\\"):
                text = text[:-1] + "\n" + await self.prompt_session.prompt_async("... ")
            return text
        except EOFError:
            return None
        except KeyboardInterrupt:  # Ctrl-C at the prompt (dumb terminals): clear, never leave
            return ""

    def clear_screen(self) -> None:
        """The screen and its scrollback cleared (a terminal only)."""
        if self.console.is_terminal:
            self.console.clear()
            self.console.file.write("\x1b[3J")  # and the scrollback, where the terminal keeps one
            self.console.file.flush()

    async def read_answer(self, prompt: str, *, secret: bool = False) -> str | None:
        """One line typed in answer to a question, while a turn is running.

        The live region is stopped for the prompt's lifetime. Ctrl-D declines (None); Ctrl-C
        cancels the whole turn, as it does anywhere during a turn.
        """
        self._stop_live()
        keys_were_ours = self._key_fd is not None
        self._turn_keys(False)  # prompt_toolkit reads the keys now (Ctrl-C comes as a key)
        self._prompting = True
        try:
            return await (self.secret_session if secret else self.answer_session).prompt_async(prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            self.cancel_turn()
            return None
        finally:
            self._prompting = False
            if self._in_turn:
                if keys_were_ours:
                    self._turn_keys(True)
                self._start_live()

    # --- turns ---------------------------------------------------------------------------------

    def begin_turn(self) -> None:
        self._in_turn = True
        self._buffer = ""
        self._segment = ""
        self._lines_printed = 0
        self._running.clear()
        self._progress.clear()
        self._status = None
        self._turn_keys(True)
        self._start_live()

    def end_turn(self) -> None:
        self.commit_text()
        self._waiting = None
        self._in_turn = False
        self._running.clear()
        self._progress.clear()
        self._status = None
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        self._stop_live()
        self._turn_keys(False)
        self.turn_task = None
        self.print("")  # a turn ends with a blank line before the next prompt

    def cancel_turn(self) -> None:
        """Ctrl-C: cancel the running turn (never the session)."""
        task = self.turn_task
        if task is not None and not task.done():
            task.cancel()

    # --- answer text ---------------------------------------------------------------------------

    def on_text(self, chunk: str) -> None:
        """A piece of the model's answer: print finished blocks once, keep the tail live."""
        if not chunk:
            return

        self._buffer += safe(chunk)  # the model's control characters never reach the terminal
        stable, tail = split_stable(self._buffer)
        if stable:
            self._buffer = tail
            self._segment += stable
            if stable.strip():
                self._print_segment()
        self._schedule_refresh()

    def commit_text(self) -> None:
        """Print whatever answer text is pending (before tool lines, at the end of a turn); the
        next text starts a new segment."""
        pending, self._buffer = self._buffer, ""
        if pending.strip():
            self._segment += pending
            self._print_segment()
        self._segment = ""
        self._lines_printed = 0
        self._refresh()

    def _print_segment(self) -> None:
        """Render the segment's finished markdown and print only the lines not printed yet: the
        result is exactly what rendering the whole answer at once gives (spacing included)."""
        from rich.markdown import Markdown

        lines = self.console.render_lines(
            Markdown(self._segment.strip("\n"), code_theme=CODE_THEME), self.console.options, pad=False
        )
        fresh = lines[self._lines_printed :]
        self._lines_printed = len(lines)
        if fresh:
            self.print(Lines(fresh))

    # --- activity ------------------------------------------------------------------------------

    def tool_started(self, name: str) -> None:
        self._running.append((name, time.monotonic()))
        if self.live_enabled and self._ticker is None:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        self._refresh()

    def tool_finished(self, name: str) -> None:
        for i, (running, _) in enumerate(self._running):
            if running == name:
                del self._running[i]
                break
        if not any(running == name for running, _ in self._running):
            self._progress.pop(name, None)
        if not self._running:
            self._status = None
        self._refresh()

    def tool_progress(self, name: str, text: str) -> None:
        """A running tool's progress notification: its spinner entry reads `NAME 3/5 · 4.1s`."""
        if any(running == name for running, _ in self._running):
            self._progress[name] = text
            self._schedule_refresh()

    def set_status(self, text: str | None) -> None:
        self._status = text
        self._schedule_refresh()

    def set_waiting(self, what: str | None) -> None:
        """The model is thinking (a live `⋯ thinking 1.2s` until its first text), or not."""
        self._waiting = None if what is None else (what, time.monotonic())
        if what is not None and self.live_enabled and self._ticker is None and self._in_turn:
            self._ticker = asyncio.get_running_loop().create_task(self._tick())
        self._schedule_refresh()

    async def _tick(self) -> None:
        try:
            while self._running or self._waiting:
                await asyncio.sleep(TICK_S)
                self._refresh()
        finally:
            self._ticker = None

    def activity(self, text: str, style: str | None = None) -> None:
        """A permanent activity line (tool start/end, warnings): pending answer text first."""
        from rich.text import Text

        self.commit_text()
        self.print(Text(text, style=style or ""))

    def print(self, renderable: Any = "", **kwargs: Any) -> None:
        """Print above the live region, or above a question prompt that is up. Text and strings
        are escaped (`graphchat.display.safe`): they may hold what a model or a server wrote."""
        renderable = _safe_renderable(renderable)
        if self._prompting:
            from prompt_toolkit.application import run_in_terminal

            run_in_terminal(lambda: self.console.print(renderable, **kwargs))
        else:
            self.console.print(renderable, **kwargs)

    # --- the live region -----------------------------------------------------------------------

    def _view(self) -> TailView:
        from rich.text import Text

        status: list[Any] = []
        if self._waiting and not self._running:
            what, since = self._waiting
            status.append(Text(f"⋯ {what} {time.monotonic() - since:.1f}s", style="dim", no_wrap=True))
        if self._running:
            now = time.monotonic()
            parts = "  ".join(
                f"{name} {self._progress[name]} · {now - started:.1f}s"
                if name in self._progress
                else f"{name} {now - started:.1f}s"
                for name, started in self._running
            )
            status.append(Text(f"⋯ {parts}", style="dim", no_wrap=True, overflow="ellipsis"))
        if self._status:
            status.append(Text(f"▸ {self._status}", style="dim", no_wrap=True, overflow="ellipsis"))
        return TailView(
            self._buffer,
            status,
            max_lines=self.console.height - 2,
            code_theme=CODE_THEME,
            gap=bool(self._segment.strip()),
        )

    def _start_live(self) -> None:
        if not self.live_enabled or self._live is not None or self._prompting:
            return
        from rich.live import Live

        self._live = Live(
            self._view(),
            console=self.console,
            auto_refresh=False,  # we redraw on events, from the loop thread only
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            vertical_overflow="crop",
        )
        self._live.start()

    def _stop_live(self) -> None:
        if self._refresh_handle is not None:
            self._refresh_handle.cancel()
            self._refresh_handle = None
        if self._live is not None:
            live, self._live = self._live, None
            live.update("", refresh=False)
            live.stop()

    def _refresh(self) -> None:
        if self._refresh_handle is not None:
            self._refresh_handle.cancel()
            self._refresh_handle = None
        if self._live is not None:
            self._last_refresh = time.monotonic()
            self._live.update(self._view(), refresh=True)

    def _schedule_refresh(self) -> None:
        if self._live is None or self._refresh_handle is not None:
            return
        wait = REFRESH_S - (time.monotonic() - self._last_refresh)
        if wait <= 0:
            self._refresh()
        else:
            self._refresh_handle = asyncio.get_running_loop().call_later(wait, self._refresh)

    # --- terminal ---------------------------------------------------------------------------

    def _turn_keys(self, on: bool) -> None:
        """While a turn runs the terminal neither echoes keys (they would draw into the live
        region) nor turns Ctrl-C into SIGINT: SIGINT would reach the whole process group, MCP
        servers included. We read the keys ourselves: Ctrl-C cancels the turn, anything else
        is kept as type-ahead for the next prompt."""
        if on:
            if self._key_fd is not None:
                return
            try:
                import termios

                fd = sys.stdin.fileno()
                if not os.isatty(fd):
                    return
                self._saved_tty = termios.tcgetattr(fd)
                attrs = termios.tcgetattr(fd)
                attrs[3] &= ~(termios.ECHO | termios.ICANON | termios.ISIG)
                attrs[6][termios.VMIN] = 1
                attrs[6][termios.VTIME] = 0
                termios.tcsetattr(fd, termios.TCSANOW, attrs)
                asyncio.get_running_loop().add_reader(fd, self._on_keys, fd)
                self._key_fd = fd
            except (ImportError, OSError, ValueError, RuntimeError):
                self._restore_tty()
        else:
            if self._key_fd is not None:
                with suppress(Exception):
                    asyncio.get_running_loop().remove_reader(self._key_fd)
                self._key_fd = None
            self._restore_tty()

    def _restore_tty(self) -> None:
        if self._saved_tty is None:
            return
        with suppress(ImportError, OSError, ValueError):
            import termios

            termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, self._saved_tty)
        self._saved_tty = None

    def _on_keys(self, fd: int) -> None:
        try:
            data = os.read(fd, 1024)
        except OSError:
            return
        if b"\x03" in data:
            self.cancel_turn()
            return
        self._typeahead += data

    def take_typeahead(self) -> str:
        """Printable keys typed during the last turn (escape sequences and controls dropped;
        an Enter stays a line break: `read_message` sends the line before it)."""
        import re

        text = self._typeahead.decode("utf-8", "ignore")
        self._typeahead = b""
        text = re.sub(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|O.|.)?", "", text)
        text = text.replace("\r", "\n")
        return "".join(ch for ch in text if ch == "\n" or ch.isprintable()).lstrip("\n")

    def close(self) -> None:
        """Leave the terminal as it was found (also on an unexpected error)."""
        self._stop_live()
        self._turn_keys(False)


def _safe_renderable(renderable: Any) -> Any:
    """A string or a rich Text with its control characters escaped (other renderables as they
    are: answer Markdown is escaped where its text enters, in `on_text`)."""
    from rich.text import Text

    if isinstance(renderable, str):
        return safe(renderable)
    if isinstance(renderable, Text) and has_control(renderable.plain):
        return Text(safe(renderable.plain), style=renderable.style, no_wrap=renderable.no_wrap)
    return renderable
