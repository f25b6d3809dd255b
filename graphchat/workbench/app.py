"""The workbench's screen (textual): the chat on the left, the plan / context / run tabs on the
right. Only this module imports textual, and only `graphchat workbench` imports it.

It shows a `Bench` and maps keys to it; it holds no state of its own beyond what is selected.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, Log, OptionList, Static, TabbedContent, TabPane
from textual.widgets.option_list import Option

from graphchat.asks import Answer, Question
from graphchat.plans.authoring import all_steps, plain
from graphchat.plans.picture import tree
from graphchat.workbench.bench import Bench
from graphchat.workbench.debug import Decision, Pause
from graphchat.workbench.draft import DraftError
from graphchat.workbench.pane_asker import PaneAsker
from graphchat.workbench.runs import MARKS, needs_inputs, prefilled_inputs
from graphchat.workbench.screens import CSS as DIALOGS_CSS
from graphchat.workbench.screens import InputsScreen, PauseScreen, QuestionScreen

_ROW_ID = re.compile(r"[├└]─\S?\s*(?:─\s*)?([A-Za-z_][A-Za-z0-9_]*)")


class ConfirmQuit(ModalScreen[bool]):
    """Quitting with unsaved changes: y quits, anything else stays."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "quit, dropping the changes"),
        Binding("n,escape", "answer(False)", "stay"),
    ]

    def compose(self) -> ComposeResult:
        yield Label("The draft has unsaved changes. Quit anyway? (y / n — Ctrl-S saves)", id="confirm")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class WorkbenchApp(App[None]):
    TITLE = "graphchat workbench"
    AUTO_FOCUS = "#prompt"  # focused as the screen is composed, before the first paint
    CSS = (
        """
    #chat { width: 45%; border-right: solid $primary; }
    #chat-log { height: 1fr; }
    #tabs { width: 55%; }
    #steps { height: auto; max-height: 60%; }
    #validation, #step-input { height: auto; padding: 0 1; }
    #confirm { padding: 1 2; border: thick $warning; background: $surface; }
    ConfirmQuit { align: center middle; }
    """
        + DIALOGS_CSS
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("v", "validate", "validate"),
        Binding("r", "run", "run"),
        Binding("g", "debug_run", "debug run"),
        Binding("b", "breakpoint", "breakpoint"),
        Binding("u", "undo", "undo"),
        Binding("ctrl+s", "save", "save", priority=True),
        Binding("q", "quit_bench", "quit"),
        Binding("tab", "toggle_focus", "chat ↔ plan", show=False, priority=True),
    ]

    def __init__(self, bench: Bench) -> None:
        super().__init__()
        self.bench = bench
        self.selected: str | None = None
        self._shown_chat = 0
        self._shown_run = 0
        bench.notify = self._refresh_soon
        bench.show_pause = self._show_pause
        if isinstance(bench.asker, PaneAsker):  # the workbench pane answers the run's questions
            bench.asker.show = self._ask_in_pane

    def compose(self) -> ComposeResult:
        with Horizontal():
            with Vertical(id="chat"):
                yield Log(id="chat-log", auto_scroll=True)
                yield Input(placeholder="ask the agent to edit the plan (Enter sends)", id="prompt")
            with TabbedContent(id="tabs", initial="plan"):
                with TabPane("plan", id="plan"):
                    yield OptionList(id="steps")
                    yield Static(id="validation")
                    with VerticalScroll():
                        yield Static(id="step-input")
                with TabPane("context", id="context"):
                    with VerticalScroll():
                        yield Static(id="catalog")
                with TabPane("run", id="run"):
                    yield Log(id="run-log", auto_scroll=True)
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_panes()
        self.query_one("#prompt", Input).focus()

    # -- what the panes show ------------------------------------------------------------------

    def _refresh_soon(self) -> None:
        if self.is_running:
            self.call_later(self.refresh_panes)

    def plan_rows(self) -> list[str]:
        """What the plan tab's tree shows: the step tree, or the YAML while it does not load."""
        plan = self.bench.draft.plan()
        if plan is None:
            return self.bench.draft.text.splitlines()
        return tree(plan, self.step_marks([s.label for s in plan.steps]))

    def step_marks(self, labels: list[str]) -> dict[str, str] | None:
        """Beside each top-level step: its status in the last (or current) run, its breakpoint."""
        status, breakpoints = self.bench.step_status, self.bench.breakpoints
        if not status and not breakpoints:
            return None
        marks = {}
        for label in labels:
            mark = MARKS.get(status.get(label, ""), "")
            if label in breakpoints:
                mark = f"● breakpoint  {mark}".rstrip()
            marks[label] = mark
        return marks

    def validation_text(self) -> str:
        draft = self.bench.draft
        mark = "[unsaved] " if draft.dirty else ""
        where = str(draft.path) if draft.path else "(new draft, not saved)"
        if draft.problems:
            state = "✗ static problems:\n" + "\n".join(f"  - {p}" for p in draft.problems)
        elif self.bench.validation is None:
            state = "○ not validated since the last change (v validates)"
        elif self.bench.validation:
            state = "✗ invalid:\n" + "\n".join(f"  - {p}" for p in self.bench.validation)
        else:
            state = "✓ valid"
        return f"{mark}{where}\n{state}"

    def step_text(self) -> str:
        if self.selected is None:
            return "(select a step to see its input)"
        for step in all_steps(self.bench.draft.data):
            if str(step.get("id")) == self.selected:
                tool = str(step.get("tool_name") or step.get("toolName") or "")
                shown = json.dumps(plain(step.get("input")), indent=2, ensure_ascii=False)
                returns = self.bench.returns_text(tool)
                return f"{self.selected} → {tool}\ninput:\n{shown}" + (f"\n{returns}" if returns else "")
        return "(select a step to see its input)"

    def catalog_text(self) -> str:
        rows = []
        for spec in sorted(self.bench.catalog.list(), key=lambda s: s.name):
            description = (spec.description or "").strip().splitlines()
            rows.append(f"{spec.name}\n    {description[0] if description else ''}")
        return "\n".join(rows) or "(no tools)"

    def refresh_panes(self) -> None:
        steps = self.query_one("#steps", OptionList)
        rows = self.plan_rows()
        ids = {str(s.get("id")) for s in all_steps(self.bench.draft.data)}
        steps.clear_options()
        highlight = None
        for index, row in enumerate(rows):
            match = _ROW_ID.search(row)
            step_id = match.group(1) if match and match.group(1) in ids else None
            # only a step's row can be selected (the title, bodies' heads and the finish cannot)
            option = Option(Text(row), id=f"step:{step_id}" if step_id else None, disabled=step_id is None)
            steps.add_option(option)
            if step_id is not None and step_id == self.selected:
                highlight = index
        if highlight is not None:
            steps.highlighted = highlight
        self.query_one("#validation", Static).update(Text(self.validation_text()))
        self.query_one("#step-input", Static).update(Text(self.step_text()))
        self.query_one("#catalog", Static).update(Text(self.catalog_text()))
        chat = self.query_one("#chat-log", Log)
        chat.write_lines(self.bench.chat_lines[self._shown_chat :])
        self._shown_chat = len(self.bench.chat_lines)
        run = self.query_one("#run-log", Log)
        if self._shown_run > len(self.bench.run_lines):
            run.clear()
            self._shown_run = 0
        run.write_lines(self.bench.run_lines[self._shown_run :])
        self._shown_run = len(self.bench.run_lines)
        self.sub_title = ("[unsaved] " if self.bench.draft.dirty else "") + (
            self.bench.draft.identifier or ""
        )

    @on(OptionList.OptionHighlighted, "#steps")
    def _step_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        option_id = event.option.id
        if option_id and option_id.startswith("step:") and option_id[5:] != self.selected:
            self.selected = option_id[5:]
            self.query_one("#step-input", Static).update(Text(self.step_text()))

    # -- the chat -----------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def _send(self, event: Input.Submitted) -> None:
        message = event.value.strip()
        event.input.value = ""
        if message:
            self.agent_turn(message)

    @work(exclusive=True, group="agent")
    async def agent_turn(self, message: str) -> None:
        prompt = self.query_one("#prompt", Input)
        prompt.disabled = True
        try:
            await self.bench.turn(message)
        finally:
            prompt.disabled = False
            prompt.focus()
            self.refresh_panes()

    # -- keys ---------------------------------------------------------------------------------

    def action_toggle_focus(self) -> None:
        """Tab: from the chat's side (or from nothing) to the plan tree, else to the chat's input."""
        focused = self.focused
        if focused is None or self.query_one("#chat", Vertical) in (focused, *focused.ancestors):
            self.query_one("#steps", OptionList).focus()
        else:
            self.query_one("#prompt", Input).focus()

    def action_validate(self) -> None:
        problems = self.bench.validate()
        self.notify("valid" if not problems else f"{len(problems)} problem(s)")
        self.refresh_panes()

    def action_run(self) -> None:
        self.start_run(debug=False)

    def action_debug_run(self) -> None:
        self.start_run(debug=True)

    def start_run(self, *, debug: bool) -> None:
        """A run of the draft; a plan with required inputs first opens the inputs editor."""
        if self.bench.running:
            self.notify("a run is going on", severity="warning")
            return
        plan = self.bench.draft.plan()
        schema = plan.input_schema if plan is not None else None
        self.show_run_tab()
        if not needs_inputs(schema):
            self.run_draft({}, debug)
            return
        text = json.dumps(prefilled_inputs(schema), indent=2, ensure_ascii=False)

        def entered(inputs: dict | None) -> None:
            if inputs is not None:
                self.run_draft(inputs, debug)

        self.push_screen(InputsScreen(schema, text), entered)

    def show_run_tab(self) -> None:
        """The run tab, now (the transcript is live). A focused widget of the plan tab would
        take its tab back (textual shows the focused widget's pane), so the focus moves to the
        transcript."""
        focused = self.focused
        if focused is not None and self.query_one("#plan", TabPane) in focused.ancestors:
            self.query_one("#run-log", Log).focus()
        self.query_one("#tabs", TabbedContent).active = "run"

    @work(group="run")
    async def run_draft(self, inputs: dict, debug: bool = False) -> None:
        try:
            await self.bench.run(inputs, debug=debug)
        except DraftError as exc:
            self.bench.log_run(f"✗ {exc}")
        # its end is in the run tab (a closed pause gave the focus, and its tab, back to the plan)
        self.query_one("#tabs", TabbedContent).active = "run"
        self.refresh_panes()

    def action_breakpoint(self) -> None:
        plan = self.bench.draft.plan()
        if plan is None or self.selected not in {s.label for s in plan.steps}:
            self.notify("select a top-level step for a breakpoint", severity="warning")
            return
        self.bench.breakpoints ^= {self.selected}
        self.refresh_panes()

    # -- the person answers the run: debug pauses, questions ----------------------------------

    def _show_pause(self, pause: Pause) -> None:
        def decided(decision: Decision | None) -> None:
            if self.bench.debugger is not None and decision is not None:
                self.bench.debugger.answer(decision)

        self.push_screen(PauseScreen(pause), decided)
        self._refresh_soon()

    async def _ask_in_pane(self, question: Question) -> Answer:
        import asyncio

        answered: asyncio.Future[Answer] = asyncio.get_running_loop().create_future()

        def done(answer: Answer | None) -> None:
            if not answered.done():
                answered.set_result(answer if answer is not None else Answer.declined())

        self.push_screen(QuestionScreen(question), done)
        return await answered

    def action_undo(self) -> None:
        try:
            self.bench.draft.undo()
        except DraftError as exc:
            self.notify(str(exc), severity="warning")
        self.refresh_panes()

    def action_save(self) -> None:
        try:
            path = self.bench.save()
        except DraftError as exc:
            self.notify(str(exc), severity="error")
            return
        self.notify(f"saved {path}")
        self.refresh_panes()

    async def action_quit(self) -> None:
        """textual's own Ctrl-Q: asks too when the draft is unsaved."""
        self.action_quit_bench()

    def action_quit_bench(self) -> None:
        if not self.bench.draft.dirty:
            self.exit()
            return

        def answered(quit_anyway: bool | None) -> None:
            if quit_anyway:
                self.exit()

        self.push_screen(ConfirmQuit(), answered)
