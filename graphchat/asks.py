"""The one asker: every question to the person (ask_user, plan `ask` steps, approvals).

A host (plan run on a terminal, chat, ask, mcp serve, headless) provides one Asker. Questions
are serialized by the asker's lock — one at a time, whoever asks. The host decides whether
anyone can answer; callers never guess: an unavailable host answers `unavailable` at once.
"""

from __future__ import annotations

import sys
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.ci import jsonl_events
from graphchat.display import safe
from graphchat.errors import ConfigError
from graphchat.yamlfile import load_yaml_file

if TYPE_CHECKING:
    import asyncio

    from graphchat.events import EventSink

MAX_ATTEMPTS = 3
# A question offers at most this many options (a plan's enum, a model's ask_user): more is not
# a choice a person can make at a glance (issue 19, build 8).
MAX_OPTIONS = 20
# At an approval (options once / always / refuse), y and n mean what a person means by them.
APPROVAL_WORDS = {"y": 0, "yes": 0, "n": -1, "no": -1}

# The id of the model's tool call being made (set by the agent loop for each call; None outside
# one): a question that call raises and nobody can answer is kept under it, so two calls of one
# step (an `agent` step's round, its successive rounds) wait on distinct requests (issue 19).
TOOL_CALL: ContextVar[str | None] = ContextVar("graphchat_tool_call", default=None)

# The frames of the turn running now (`runs.frames.TurnFrames`: a turn that may park sets it;
# None elsewhere, and inside the plan call it frames): the agent loop makes a plan tool's call
# through it, so a plan that parks inside a turn resumes inside its frames (issue 19).
TURN_FRAMES: ContextVar[Any] = ContextVar("graphchat_turn_frames", default=None)


@dataclass
class Question:
    """A question. `schema` is a flat object schema (fields asked one by one); without it the
    answer is one line of text, optionally one of `options`. `key` is the plan step id (for
    --answers files); `kind` is question | approval."""

    prompt: str
    schema: dict[str, Any] | None = None
    options: list[str] | None = None
    key: str | None = None
    kind: str = "question"
    context: dict[str, Any] = field(default_factory=dict)
    # Shown in full under the prompt (an approval's arguments): wrapped, paged when long.
    detail: str | None = None
    # One line shown under the question (a plan `ask` step's `hint`).
    hint: str | None = None


@dataclass
class Answer:
    answered: bool
    value: Any = None
    reason: str | None = None  # declined | unavailable (when not answered)
    note: str | None = None  # why, in the person's words (`graphchat decline ID --reason R`)

    @classmethod
    def declined(cls) -> Answer:
        return cls(False, None, "declined")

    @classmethod
    def unavailable(cls) -> Answer:
        return cls(False, None, "unavailable")


class Parked(BaseException):  # noqa: N818 - a control-flow signal, like CancelledError
    """The one park signal (issue 19): a question nobody here can answer was opened as a
    request, and whatever was running — a tool call, a round of calls, a turn, a plan step at
    any depth — waits for a person. Raised where the request is opened and re-raised by each
    enclosing level, which adds what it needs to resume (where a plan stopped is kept by its
    parking, step by step: see `runs/parked.py`):

    - `requests`: the requests waited on (their `requests --json` shape);
    - `round`: the agent loop's round (its calls, which wait, the others' results);
    - `thread_id`: the thread whose turn waits.

    A BaseException so that no tool-error or step-error handler turns it into a result."""

    def __init__(
        self,
        requests: list[dict[str, Any]],
        *,
        round: Any = None,
        thread_id: str | None = None,
    ) -> None:
        super().__init__(f"waiting for {len(requests)} request(s)")
        self.requests = requests
        self.round = round
        self.thread_id = thread_id

    @property
    def request(self) -> dict[str, Any]:
        """The first request waited on (a single tool call waits on one)."""
        return self.requests[0]


class Asker:
    """Base asker: serializes questions and reports each one as an `ask` event."""

    # An approval answered "always" here may be written to graphchat.yaml. False: it lasts for
    # this process only (`mcp serve`: a client must not widen the workspace's local approvals).
    lasting_answers = True

    def __init__(self, events: EventSink | None = None) -> None:
        self.events = events
        self._lock: asyncio.Lock | None = None

    @property
    def can_answer(self) -> bool:
        return True

    async def ask(self, question: Question) -> Answer:
        import asyncio

        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            answer = await self._ask(question)
        if self.events is not None:
            self.events.ask(question.prompt, answer.answered, answer.reason)
        return answer

    async def _ask(self, question: Question) -> Answer:
        raise NotImplementedError

    def park(self, question: Question) -> Answer | None:
        """Nobody here answered `question`: a host whose runs can wait returns the answer a
        person gave it meanwhile (a resumed run), or opens it as a request and raises Parked;
        the others return None (the question stays unavailable)."""
        return None


class UnavailableAsker(Asker):
    """Nobody can answer (no terminal, CI, GRAPHCHAT_EVENTS=jsonl): never hangs."""

    @property
    def can_answer(self) -> bool:
        return False

    async def _ask(self, question: Question) -> Answer:
        return Answer.unavailable()


class ScriptedAsker(Asker):
    """Answers from a map of step-id or question-prompt -> answer (`--answers FILE`).

    Questions the file does not answer go to `fallback`: whoever can answer here (the
    terminal, the chat), unavailable when nobody can.
    """

    def __init__(
        self, answers: dict[str, Any], fallback: Asker | None = None, events: EventSink | None = None
    ) -> None:
        super().__init__(events)
        self.answers = answers
        self.fallback = fallback or UnavailableAsker()
        self.used: set[str] = set()

    async def _ask(self, question: Question) -> Answer:
        for key in (question.key, question.prompt):
            if key is not None and key in self.answers:
                self.used.add(key)
                return Answer(True, self.answers[key])
        return await self.fallback._ask(question)

    def unused(self) -> list[str]:
        """Keys of the file that answered no question (a typo, or a question never asked)."""
        return [key for key in self.answers if key not in self.used]

    def park(self, question: Question) -> None:
        self.fallback.park(question)


def load_answers(path: str) -> dict[str, Any]:
    """Read an --answers file (YAML or JSON mapping); errors are one clear line (exit 2)."""
    file = Path(path)
    if not file.is_file():
        raise ConfigError(f"--answers {path}: no such file")
    data = load_yaml_file(file).data
    if not isinstance(data, dict):
        raise ConfigError(f"--answers {path}: expected a mapping of step id or question -> answer")
    return {str(k): v for k, v in data.items()}


# --- a form field's own flags: `secret`, `multiple` (issue 19, build 8) ------------------------


def answer_property(prop: Any) -> Any:
    """The JSON schema an answer to a form field must fit: a `multiple: true` field (with its
    `enum`) takes a list of its options, each once; `secret` and `multiple` are graphchat's
    flags, not JSON Schema, and are left out."""
    if not isinstance(prop, dict) or not ({"secret", "multiple"} & set(prop)):
        return prop
    out = {k: v for k, v in prop.items() if k not in ("secret", "multiple")}
    if prop.get("multiple") is True and isinstance(prop.get("enum"), list):
        items = {k: out.pop(k) for k in ("enum", "type") if k in out}
        out.update({"type": "array", "items": items, "uniqueItems": True})
    return out


def answer_schema(schema: Any) -> Any:
    """An ask's output_schema as the JSON schema its answers fit (`answer_property` per field)."""
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return schema
    props = {name: answer_property(prop) for name, prop in schema["properties"].items()}
    return {**schema, "properties": props}


def secret_fields(schema: Any) -> list[str]:
    """The fields of a form marked `secret: true` (masked when typed, redacted when written)."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return []
    return [name for name, prop in props.items() if isinstance(prop, dict) and prop.get("secret") is True]


# --- coercion of typed text answers (pure) -----------------------------------------------------

TRUE_WORDS = {"y", "yes", "true", "t", "1"}
FALSE_WORDS = {"n", "no", "false", "f", "0"}


def coerce(text: str, prop: dict[str, Any]) -> Any:
    """Turn one typed line into the value the property schema wants; ValueError says why not."""
    text = text.strip()
    enum = prop.get("enum")
    if prop.get("multiple") is True and isinstance(enum, list):  # several options: `a, c` or `1,3`
        chosen = [pick_choice(part, enum) for part in text.split(",") if part.strip()]
        return list(dict.fromkeys(chosen))
    if enum is not None:
        for choice in enum:
            if str(choice).lower() == text.lower():
                return choice
        raise ValueError(f"choose one of: {', '.join(str(c) for c in enum)}")
    kind = prop.get("type", "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "boolean":
        if text.lower() in TRUE_WORDS:
            return True
        if text.lower() in FALSE_WORDS:
            return False
        raise ValueError("answer y/yes/true or n/no/false")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError("expected a number") from None
        return int(number) if number.is_integer() and "." not in text and "e" not in text.lower() else number
    return text


def pattern_problem(prop: dict[str, Any], value: Any) -> str | None:
    """A text answer that misses the field's regex `pattern`, said in words when the field
    says what it wants (its description or title): `expected <that>, e.g. <example>` — the
    example is the schema's `examples`, `example` or `default`, else the pattern is shown.
    None when there is nothing to say in words (jsonschema's message stands) or it matches."""
    import re

    pattern = prop.get("pattern")
    wanted = prop.get("description") or prop.get("title")
    if not isinstance(pattern, str) or not isinstance(value, str) or not wanted:
        return None
    try:
        if re.search(pattern, value):
            return None
    except re.error:
        return None
    examples = prop.get("examples")
    example = (
        examples[0] if isinstance(examples, list) and examples else prop.get("example", prop.get("default"))
    )
    return f"expected {wanted}, " + (f"e.g. {example}" if example is not None else f"matching {pattern}")


def pick_choice(text: str, choices: list[Any]) -> Any:
    """One of `choices` by its number (1-based) or its text (case-insensitive); a choice that
    is itself a number wins over a position. ValueError says what to type."""
    text = text.strip()
    for choice in choices:
        if str(choice).lower() == text.lower():
            return choice
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1]
    raise ValueError(f"choose one of: {', '.join(str(c) for c in choices)} (or its number)")


def describe_field(name: str, prop: dict[str, Any]) -> str:
    """The label shown for one field: name, choices or type, description. Choices are listed
    numbered, one a line, before the label (`ask_by_lines`), so the hint asks for a number."""
    label = prop.get("title") or name
    if "enum" in prop and prop.get("multiple") is True:
        hint = f"one or more of 1-{len(prop['enum'])}, e.g. 1,3"
    elif "enum" in prop:
        hint = f"1-{len(prop['enum'])}" if prop["enum"] else "no choice"
    elif prop.get("type") == "boolean":
        hint = "y/n"
    else:
        hint = str(prop.get("type", "text"))
    desc = prop.get("description")
    return f"{label} ({hint})" + (f" — {desc}" if desc else "")


class LineReader:
    """How a text host reads a line and writes a prompt (terminal, pty, chat)."""

    async def prompt(self, text: str) -> str | None:
        """Show `text`, return the typed line (None on EOF)."""
        raise NotImplementedError

    def say(self, text: str) -> None:
        raise NotImplementedError

    async def secret(self, text: str) -> str | None:
        """Show `text`, return the typed line without showing it (a `secret: true` field)."""
        return await self.prompt(text)

    def size(self) -> tuple[int, int]:
        """(columns, lines) of the screen the question is shown on."""
        import shutil

        size = shutil.get_terminal_size((80, 24))
        return size.columns, size.lines


class StderrLineReader(LineReader):
    def say(self, text: str) -> None:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    async def secret(self, text: str) -> str | None:
        return await self.prompt(text, masked=True)

    async def prompt(self, text: str, masked: bool = False) -> str | None:
        # A daemon thread, not asyncio.to_thread: on Ctrl-C, asyncio.run joins its default
        # executor, and a thread blocked in readline() would hold the exit until Enter.
        import asyncio
        import threading

        loop = asyncio.get_running_loop()
        future: asyncio.Future[str | None] = loop.create_future()

        def deliver(line: str | None, error: BaseException | None) -> None:
            if future.done():  # cancelled meanwhile (Ctrl-C)
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(line)

        def read() -> None:
            line: str | None = None
            error: BaseException | None = None
            try:
                sys.stderr.write(text)
                sys.stderr.flush()
                raw = _read_masked() if masked else sys.stdin.readline()
                line = None if raw == "" else raw.rstrip("\r\n")
            except Exception as exc:
                error = exc
            try:
                loop.call_soon_threadsafe(deliver, line, error)
            except RuntimeError:  # the loop is gone: nobody waits for this answer any more
                pass

        threading.Thread(target=read, name="terminal-answer", daemon=True).start()
        return await future


def _read_masked() -> str:
    """One line from stdin with the terminal's echo off (what getpass does), '' on EOF."""
    import termios

    fd = sys.stdin.fileno()
    try:
        old = termios.tcgetattr(fd)
    except termios.error:  # not a terminal: nothing is shown anyway
        return sys.stdin.readline()
    new = list(old)
    new[3] &= ~termios.ECHO
    try:
        termios.tcsetattr(fd, termios.TCSAFLUSH, new)
        line = sys.stdin.readline()
    finally:
        termios.tcsetattr(fd, termios.TCSAFLUSH, old)
    sys.stderr.write("\n")  # the Enter that was not echoed
    sys.stderr.flush()
    return line


def wrap_lines(text: str, width: int) -> list[str]:
    """`text` cut into lines of at most `width` characters, losing none (a long path is split,
    never shortened)."""
    width = max(width, 10)
    lines: list[str] = []
    for line in text.split("\n"):
        lines.extend(line[i : i + width] for i in range(0, max(len(line), 1), width))
    return lines


PAGE_PROMPT = "  -- {left} more lines: Enter shows them, q refuses -- "


async def show_detail(detail: str, reader: LineReader) -> bool:
    """Show `detail` in full, a screenful at a time; False when the person stops reading (they
    are then not asked to approve what they have not seen)."""
    columns, rows = reader.size()
    lines = wrap_lines(detail, columns - 5)
    page = max(rows - 4, 5)
    shown = 0
    while shown < len(lines):
        for line in lines[shown : shown + page]:
            reader.say(f"    {line}")
        shown += page
        if shown < len(lines):
            reply = await reader.prompt(PAGE_PROMPT.format(left=len(lines) - shown))
            if reply is None or reply.strip().lower() in ("q", "quit", "refuse", "n", "no"):
                return False
    return True


async def ask_by_lines(question: Question, reader: LineReader) -> Answer:
    """Ask a question line by line: fields one at a time, re-asking a bad value up to 3 times;
    a blank line on a required field declines at once. Everything shown is escaped
    (`graphchat.display.safe`): prompts and options may come from a model or a server."""
    reader.say(f"? {safe(question.prompt)}")
    if question.hint:
        reader.say(f"  {safe(question.hint)}")
    if question.detail is not None and not await show_detail(safe(question.detail), reader):
        return Answer.declined()
    if question.schema is None:
        options = question.options or []
        for i, option in enumerate(options, 1):
            reader.say(f"  {i}. {safe(option, newlines=False)}")
        for _ in range(MAX_ATTEMPTS):
            line = await reader.prompt("> ")
            if line is None or not line.strip():
                return Answer.declined()
            line = line.strip()
            if not options:
                return Answer(True, line)
            if line.isdigit() and 1 <= int(line) <= len(options):
                return Answer(True, options[int(line) - 1])
            if question.kind == "approval" and options and line.lower() in APPROVAL_WORDS:
                return Answer(True, options[APPROVAL_WORDS[line.lower()]])  # y: once, n: refuse
            for option in options:
                if option.lower() == line.lower() or option.lower().startswith(line.lower()):
                    return Answer(True, option)
            reader.say(f"  choose one of: {safe(', '.join(options), newlines=False)} (or its number)")
        return Answer.declined()
    props: dict[str, Any] = question.schema.get("properties") or {}
    required = set(question.schema.get("required") or [])
    answer: dict[str, Any] = {}
    for name, prop in props.items():
        choices = prop.get("enum") if isinstance(prop, dict) else None
        if isinstance(choices, list):
            reader.say(f"  {safe(str(prop.get('title') or name), newlines=False)}:")
            for i, choice in enumerate(choices, 1):
                reader.say(f"    {i}. {safe(str(choice), newlines=False)}")
        for _attempt in range(MAX_ATTEMPTS):
            label = f"  {safe(describe_field(name, prop), newlines=False)}: "
            secret = isinstance(prop, dict) and prop.get("secret") is True
            line = await (reader.secret(label) if secret else reader.prompt(label))
            if line is None:
                return Answer.declined()
            if not line.strip():
                if name in required:
                    return Answer.declined()
                break
            try:
                several = isinstance(choices, list) and prop.get("multiple") is True
                value = (
                    pick_choice(line, choices)
                    if isinstance(choices, list) and not several
                    else coerce(line, prop)
                )
            except ValueError as exc:
                reader.say(f"  {safe(exc)}")
                continue
            # The field's own rules (pattern, minimum, …) are checked now, so a bad value is
            # re-asked rather than failing the whole answer once every field is typed.

            problem = pattern_problem(prop, value) if isinstance(prop, dict) else None
            if problem is None and isinstance(prop, dict):
                # on `ask`'s path before it hands the turn to a warm helper: imported when used
                from graphchat.jsonschema_util import first_error

                problem = first_error(answer_property(prop), value)
            if problem is not None:
                reader.say(f"  {safe(problem)}")
                continue
            answer[name] = value
            break
        else:
            return Answer.declined()
    return Answer(True, answer)


class TerminalAsker(Asker):
    """Asks on stderr and reads stdin (both must be terminals)."""

    def __init__(self, events: EventSink | None = None, reader: LineReader | None = None) -> None:
        super().__init__(events)
        self.reader = reader or StderrLineReader()

    async def _ask(self, question: Question) -> Answer:
        held = getattr(self.events, "spinner_held", None)  # a terminal's spinner stops meanwhile
        if held is None:
            return await ask_by_lines(question, self.reader)
        with held():
            return await ask_by_lines(question, self.reader)


def terminal_available() -> bool:
    return sys.stdin.isatty() and sys.stderr.isatty()


def host_asker(events: EventSink | None = None, *, interactive: bool | None = None) -> Asker:
    """The asker of a command-line host: the terminal when stdin and stderr are terminals,
    else unavailable. GRAPHCHAT_EVENTS=jsonl turns every question off. (An --answers file is
    asked before it: see `graphchat.host.answering`.)"""
    if jsonl_events():
        return UnavailableAsker(events)
    if interactive if interactive is not None else terminal_available():
        return TerminalAsker(events)
    return UnavailableAsker(events)
