"""This terminal as a run's `Front` (graphchat.runs.front): the answer on stdout and nothing
else there, activity and errors on stderr, questions on the terminal when there is one."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from graphchat.asks import host_asker
from graphchat.ci import annotate, jsonl_events
from graphchat.cli.ask import StdoutWriter
from graphchat.cli.output import note, print_json, report_error, warn
from graphchat.display import safe
from graphchat.errors import EXIT_WAITING, GraphchatError
from graphchat.events import sink_for_environment

if TYPE_CHECKING:
    from graphchat.plans.executor import PlanOutcome


class TerminalFront:
    """Where an `ask` turn shows itself in this process: the answer on stdout (and nothing
    else there), activity and errors on stderr, questions on the terminal when there is one.
    A warm helper runs the same turn against a RemoteFront, whose client replays every call
    on this class: the same code renders both."""

    def __init__(self) -> None:
        self.writer: Any = None
        self._sink: Any = None

    def sink(self) -> Any:
        """This process's activity sink: terminal lines on stderr, or JSONL (one, made once)."""
        if self._sink is None:
            self._sink = sink_for_environment()
        return self._sink

    def here(self, sink: Any) -> Any:
        return host_asker(sink)

    def begin(self, streaming: bool) -> None:
        self.writer = StdoutWriter(self.sink()) if streaming else None

    def text(self, text: str) -> None:
        if self.writer is not None:
            self.writer.write(text)
            return

        # a plan's solver text: on a terminal escaped; in a pipe byte-exact
        sys.stdout.write(safe(text) if sys.stdout.isatty() else text)
        sys.stdout.flush()

    def narration(self, text: str) -> None:
        if self.writer is not None:
            self.writer.narration(text)

    def finish(self, complete: bool = True) -> None:
        if self.writer is not None:
            self.writer.finish(complete)

    def answer(self, content: str, payload: dict[str, Any] | None) -> None:
        """The turn's answer: the --json object, the end of the streamed text, or the text."""
        if payload is not None:
            print_json(payload)
        elif self.writer is not None:
            self.writer.finish()
        else:
            sys.stdout.write(content)
            if content and not content.endswith("\n"):
                sys.stdout.write("\n")
            sys.stdout.flush()

    def warn(self, message: str) -> None:
        warn(message)

    def note(self, message: str) -> None:
        note(message)

    def error(self, message: str, hint: str | None = None) -> None:
        report_error(message, hint)

    def parked(
        self, requests: list[dict[str, Any]], json: bool, home: str | None, what: str = "the run"
    ) -> int:
        for request in requests:  # GRAPHCHAT_EVENTS=github: the run waits (exit 5)
            annotate(
                "warning", f"{what} waits for a person: {request['question']}",
                json=json, title=f"request {request['id']}",
            )  # fmt: skip

        return report_parked(requests, json=json, home=home)

    def plan_outcome(self, plan: Any, outcome: Any, flags: Any, streamed: list[str]) -> int:
        """A plan run's deliverable on stdout (graph's --json envelope), notes on stderr."""
        shown = safe if sys.stdout.isatty() else str  # a terminal: escaped; a pipe: byte-exact
        if flags.json and outcome.kind not in ("failed", "input"):  # as graph: no envelope then
            print_json(envelope(outcome))
        if outcome.kind == "input":
            import orjson

            annotate("error", outcome.error or "", json=flags.json)
            note(outcome.error or "")
            if outcome.input_schema:
                note("input schema:")
                note(orjson.dumps(outcome.input_schema, option=orjson.OPT_INDENT_2).decode())
            return exit_code(outcome)
        if outcome.kind == "failed":
            raise GraphchatError(outcome.error or "plan failed")
        if outcome.kind == "exit":
            assert outcome.exit is not None
            mark = "✓" if outcome.exit["status"] == "success" else "✗"
            note(f"{mark} {outcome.exit['message']}")
            if not flags.json and "output" in outcome.exit:
                print_json(outcome.exit["output"])
            if outcome.exit["status"] != "success":  # as graph: the exit's message, after the output
                annotate("error", str(outcome.exit["message"]), json=flags.json)
            return exit_code(outcome)
        if not flags.json:
            if plan.finish == "output":
                print_json(outcome.output)
            elif plan.finish == "solver" and not streamed and outcome.answer:
                sys.stdout.write(shown(outcome.answer.rstrip("\n")) + "\n")
        if plan.finish == "silent":
            note(f"✓ plan '{plan.identifier}' completed ({outcome.steps_executed} steps)")
        return 0


def report_parked(requests: list[dict[str, Any]], *, json: bool, home: str | None = None) -> int:
    """A parked run: each request, its question, what the answer may be and the exact command
    that answers it on stderr (`--json`: the `{parked, requests, resume}` object on stdout);
    exit 5."""
    # on `ask`'s path before it hands the turn to a warm helper: imported when used
    from graphchat.requests_text import answer_command, answer_help, approval_lines

    jsonl = jsonl_events()  # request_opened said it
    for request in [] if jsonl else requests:
        note(f"⏸ waiting for a person: request {request['id']}: {request['question']}")
        if request.get("hint"):
            note(f"    {request['hint']}")
        for line in approval_lines(request):
            note(f"    {line}")
        for i, option in enumerate(request.get("options") or [], 1):
            note(f"    {i}. {option}")
        note(f"  answer it: {answer_command(request, home)}")
        for line in answer_help(request, home):
            note(f"    {line}")
    if json:
        resume = answer_command(requests[0], home) if requests else ""
        print_json({"parked": True, "requests": requests, "resume": resume})
    return EXIT_WAITING


def exit_code(outcome: PlanOutcome) -> int:
    """The exit code of `plan run` for a run's outcome (0 ok, 1 failed, 3 input, 4 exit error,
    5 parked)."""
    if outcome.kind == "parked":
        return 5
    if outcome.kind == "ok":
        return 0
    if outcome.kind == "exit":
        return 0 if outcome.exit and outcome.exit["status"] == "success" else 4
    if outcome.kind == "input":
        return 3
    return 1


def envelope(outcome: PlanOutcome) -> dict[str, Any]:
    """The `--json` envelope of `plan run`: graph's result body (`PlanOutcome.body`).
    A failed run (exit 1) and a run that needs input (exit 3) print no envelope."""
    return outcome.body()
