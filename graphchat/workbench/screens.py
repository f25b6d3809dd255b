"""The workbench's dialogs (textual): a debug pause, the inputs of a run, a question of the run.

Each one is a modal screen dismissed with what the person chose; the app turns that into a
`Decision`, the run's inputs, or an `Answer`. Imported only when the workbench starts.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, Static, TextArea

from graphchat.asks import Answer, Question
from graphchat.jsonschema_util import errors
from graphchat.workbench.debug import Decision, Pause
from graphchat.workbench.pane_asker import read_answer
from graphchat.workbench.runs import inputs_problems, parse_json

CSS = """
PauseScreen, InputsScreen, QuestionScreen { align: right middle; }
#dialog { width: 60%; height: auto; max-height: 90%; border: thick $warning; background: $surface; padding: 0 1; }
#dialog-body { height: auto; max-height: 20; }
#dialog-error { color: $error; height: auto; }
#inputs-editor { height: 12; }
"""


class PauseScreen(ModalScreen[Decision]):
    """A debug pause: s step · c continue · k skip with a result (JSON typed below) · a abort.
    After a failed call: c continues failing, k injects a result, a aborts. Before a model call,
    k skips it: the typed text (or JSON) is the model's answer."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "decide('step')", "step"),
        Binding("c", "decide('continue')", "continue"),
        Binding("k", "skip", "skip with a result"),
        Binding("a", "decide('abort')", "abort"),
    ]

    AUTO_FOCUS = None  # the keys are the screen's; the result box takes focus only on k

    def __init__(self, pause: Pause) -> None:
        super().__init__()
        self.pause = pause

    def keys_text(self) -> str:
        if self.pause.kind == "failed":
            return "c continue (the call stays failed) · k inject a result · a abort"
        if self.pause.kind == "model":
            return "s step · c continue · k skip with an answer · a abort"
        return "s step · c continue · k skip with a result · a abort"

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            with VerticalScroll(id="dialog-body"):
                yield Static(Text(self.pause.describe()), id="pause-text")
            yield Label(self.keys_text(), id="pause-keys")
            yield Static(id="dialog-error")

    def action_decide(self, action: str) -> None:
        if action == "step" and self.pause.kind == "failed":
            action = "continue"
        self.dismiss(Decision(action))

    def action_skip(self) -> None:
        if self.query("#inject"):
            return
        what = (
            "the model's answer (text or JSON)"
            if self.pause.kind == "model"
            else "the injected result (JSON)"
        )
        box = Input(placeholder=f"{what}; Enter injects it, Escape goes back", id="inject")
        self.query_one("#dialog", Vertical).mount(box, before="#dialog-error")
        box.focus()

    @on(Input.Submitted, "#inject")
    def _inject(self, event: Input.Submitted) -> None:
        value, problem = parse_json(event.value)
        if (
            problem is not None
            and self.pause.kind == "model"
            and not self.pause.schema
            and event.value.strip()
        ):
            value, problem = event.value, None  # a model's answer may be plain text
        if problem is None and self.pause.schema:
            found = errors(self.pause.schema, value) if isinstance(value, dict) else ["not a JSON object"]
            problem = "the answer does not fit: " + "; ".join(found) if found else None
        if problem is not None:
            self.query_one("#dialog-error", Static).update(Text(f"✗ {problem}"))
            return
        self.dismiss(Decision("skip", value))


class InputsScreen(ModalScreen["dict[str, Any] | None"]):
    """The run's inputs as JSON, prefilled from the plan's input schema: Ctrl-R runs, Escape
    cancels; invalid JSON or schema problems are shown under the editor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "submit", "run with these inputs", priority=True),
        Binding("escape", "cancel", "cancel"),
    ]

    def __init__(self, schema: dict[str, Any] | None, text: str) -> None:
        super().__init__()
        self.schema = schema
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label("The plan's inputs (JSON) — Ctrl-R runs, Escape cancels", id="inputs-title")
            yield TextArea(self.text, id="inputs-editor")
            yield Static(id="dialog-error")

    def on_mount(self) -> None:
        self.query_one("#inputs-editor", TextArea).focus()

    def action_submit(self) -> None:
        value, problems = inputs_problems(self.schema, self.query_one("#inputs-editor", TextArea).text)
        if problems:
            self.query_one("#dialog-error", Static).update(Text("\n".join(f"✗ {p}" for p in problems)))
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class QuestionScreen(ModalScreen[Answer]):
    """A question of the run (an `ask` step, an approval): typed at the input, Enter answers,
    Escape declines. With options: one of them (or its number); with a schema: a JSON object."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "decline", "decline")]

    def __init__(self, question: Question) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        q = self.question
        lines = [f"? {q.prompt}"]
        if q.hint:
            lines.append(q.hint)
        if q.detail:
            lines.append(q.detail)
        if q.options:
            lines.append("  ".join(f"{i}) {o}" for i, o in enumerate(q.options, 1)))
        if q.schema:
            lines.append("answer with a JSON object: " + json.dumps(q.schema.get("properties") or {}))
        with Vertical(id="dialog"):
            with VerticalScroll(id="dialog-body"):
                yield Static(Text("\n".join(lines)), id="question-text")
            yield Input(placeholder="your answer (Enter answers, Escape declines)", id="answer")
            yield Static(id="dialog-error")

    def on_mount(self) -> None:
        self.query_one("#answer", Input).focus()

    def action_decline(self) -> None:
        self.dismiss(Answer.declined())

    @on(Input.Submitted, "#answer")
    def _answer(self, event: Input.Submitted) -> None:
        value, problem = read_answer(self.question, event.value)
        if problem is not None:
            self.query_one("#dialog-error", Static).update(Text(f"✗ {problem}"))
            return
        self.dismiss(Answer(True, value))
