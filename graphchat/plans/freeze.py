"""Freeze a thread into a plan: the successful tool calls of a chat, as the steps of a plan.

Pure: a thread's events in, a plan document and its YAML text out (no file, no catalog, no
model). The rules are issue 8's Decisions:

- kept: every tool call that completed without error, in order; failed, cancelled, interrupted
  and unanswered calls are dropped and listed in the file's head comment. Steps are `E0, E1, …`.
- each argument value (leaves of nested arguments too), unless trivial (booleans, null, numbers
  in [-1, 1], strings shorter than 3 characters, empty arrays and objects): equal (JSON, with
  type) to a value in the result of a call of an earlier round → a reference (nearest round,
  lowest call index, shortest path, smallest path); else a secret (redacted in the thread, or a
  credential by its look) → a required input with no default; else a string found in the user's
  messages (a number: as a whole token) → an input named after its key with the value as default
  (required and without default when its key names a credential); else a literal — noted on its
  line, in the head comment and in `Frozen.notes` when the person typed it in another form
  (`Tokyo` for `Asia/Tokyo`, issue 21).
- two or more calls of one tool in one round that differ in one place only, where the varying
  values are elements (or one leaf field of the elements) of one earlier array → one `map` over
  that whole array; later references to a mapped result read `E<n>.results.<i>`.
- an answered `ask_user` → an `ask` step asking the same question again.
- finish: `solver` when the frozen turns end in a written answer, else `output`; both name every
  step's whole result. A thread whose one kept call is a `plan_and_execute` (what `plan go`
  records) keeps that plan's own finish.
- the text around the steps is written in terms of the inputs (issue 21): the solver's question
  is the first message with each value that became an input as its `{{input.x}}`; `name` is its
  first clause (≤ NAME_CHARS, cut after a word) or the tools called; `description` says what the
  plan does with `<input>` in the question. A secret is never in any of them, nor in the
  identifier, the exemplars or a default.

The YAML writer is deterministic (same thread → same bytes) and puts a comment on every line
where a reference was chosen among several matches.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from graphchat.errors import GraphchatError
from graphchat.jsontype import json_type
from graphchat.plans.steps.ask import ask_schema_problems, flat_answer_problems
from graphchat.threads import lines as ev
from graphchat.threads.redact import REDACTED
from graphchat.threads.repair import answered_call
from graphchat.yamlfile import yaml12_dumper, yaml12_loader

FINISHES = ("solver", "output", "silent")
ASK_USER = "ask_user"
PLAN_AND_EXECUTE = "plan_and_execute"
ANSWER_FIELD = "answer"  # the one field of an ask frozen from a plain-text or options question
CANCELLED_PREFIX = "cancelled"
MAX_TEXT = 300
_PATH_FORBIDDEN = frozenset(" \t\r\n\f\v{}()[]|\"'=<>!&,;+*?`\\.")
_NUMBER_TOKEN = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w]|\.\d)")


class FreezeError(GraphchatError):
    """A thread that cannot be frozen (nothing to keep, bad --turns)."""


# --- what the thread recorded -----------------------------------------------------------------


@dataclass
class Call:
    """One tool call as the thread recorded it."""

    turn: int
    round: int  # global round number (1-based), one a model message with tool calls
    index: int  # position in its round
    name: str
    arguments: Any
    value: Any = None  # the result, parsed from its JSON text when it is JSON
    done: bool = False  # a result was recorded
    is_error: bool = False
    bad_arguments: bool = False

    def drop_reason(self) -> str | None:
        """Why this call is not kept, or None when it is."""
        if self.bad_arguments:
            return "its arguments were not a JSON object"
        if not self.done:
            return "interrupted before it finished"
        if self.is_error:
            message = self.value.get("error") if isinstance(self.value, dict) else self.value
            text = _one_line(str(message), 100)
            if text.startswith(CANCELLED_PREFIX):
                return "cancelled"
            return f"failed: {text}"
        if self.name == ASK_USER:
            if not isinstance(self.value, dict) or self.value.get("answered") is not True:
                reason = self.value.get("reason") if isinstance(self.value, dict) else None
                return f"not answered ({reason or 'no answer'})"
        return None


@dataclass
class Turn:
    number: int
    user_text: str = ""
    answer: str | None = None  # the written answer the turn ended with, if any
    calls: list[Call] = field(default_factory=list)


def read_turns(events: Iterable[dict[str, Any]]) -> list[Turn]:
    """The thread's turns (one a user message) with their calls paired to results by call id
    within their model message (graphchat.threads.repair.answered_call)."""
    turns: list[Turn] = []
    pending: list[Call] = []
    call_ids: list[str] = []
    round_no = 0
    retracted = False  # the latest turn was taken back already

    def current() -> Turn:
        if not turns:  # an assistant line before any user line: its own turn
            turns.append(Turn(1))
        return turns[-1]

    for event in events:
        kind = event.get("kind")
        if kind == ev.USER:
            pending, call_ids = [], []
            turns.append(Turn(len(turns) + 1, ev.text_of(event.get("content"))))
        elif kind == ev.ASSISTANT:
            pending, call_ids = [], []
            turn = current()
            raw_calls = [c for c in event.get("tool_calls") or [] if isinstance(c, dict)]
            content = event.get("content")
            turn.answer = content if isinstance(content, str) and content.strip() and not raw_calls else None
            if raw_calls:
                round_no += 1
            for index, raw in enumerate(raw_calls):
                arguments, bad = _arguments(raw.get("arguments"))
                call = Call(turn.number, round_no, index, str(raw.get("name") or ""), arguments)
                call.bad_arguments = bad
                turn.calls.append(call)
                pending.append(call)
                call_ids.append(str(raw.get("id") or ""))
        elif kind == ev.TOOL_RESULT:
            k = answered_call(call_ids, [c.done for c in pending], event.get("tool_call_id"))
            if k is not None:
                call = pending[k]
                call.done = True
                call.is_error = bool(event.get("is_error"))
                call.value = _result_value(event.get("content"))
        elif kind in ev.TURN_CLOSERS:
            pending, call_ids = [], []
        elif kind == ev.TURN_RETRACTED and turns and not retracted:  # /retry, /edit: taken back
            pending, call_ids = [], []
            turns.pop()
            retracted = True
        if kind == ev.USER:
            retracted = False
    return turns


def _arguments(raw: Any) -> tuple[Any, bool]:
    if isinstance(raw, dict):
        return raw, False
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, False
    try:
        value = orjson.loads(raw)
    except (orjson.JSONDecodeError, TypeError):
        return None, True
    return (value, False) if isinstance(value, dict) else (None, True)


def _result_value(content: Any) -> Any:
    if not isinstance(content, str):
        return content
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return content  # the tool returned text


# --- values -----------------------------------------------------------------------------------


class _Skipped:
    """An element of a mapped array the chat never called the tool for: no known result."""

    def __repr__(self) -> str:
        return "<skipped>"


SKIPPED = _Skipped()


def is_trivial(value: Any) -> bool:
    """Values never turned into references or inputs."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return -1 <= value <= 1
    if isinstance(value, str):
        return len(value) < 3
    if isinstance(value, (list, dict)):
        return not value
    return True


def value_key(value: Any) -> Any:
    """A hashable key under which two JSON values are equal exactly when they are equal as JSON
    values with their type (`"5"` is not `5`, `5` is `5.0`, `true` is not `1`)."""
    if value is None:
        return ("null",)
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("num", value)
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer():
            return ("num", int(value))
        return ("num", value)
    if isinstance(value, str):
        return ("str", value)
    if isinstance(value, list):
        return ("list", tuple(value_key(v) for v in value))
    if isinstance(value, dict):
        return ("obj", tuple(sorted((str(k), value_key(v)) for k, v in value.items())))
    return ("other", id(value))  # SKIPPED and anything else: equal to nothing else


def _segment_ok(key: Any) -> bool:
    """Whether a result key can be a segment of a template path."""
    return (
        isinstance(key, str)
        and key != ""
        and key != "length"
        and not key.startswith("@")
        and not any(c in _PATH_FORBIDDEN for c in key)
    )


Path = tuple[str, ...]


def _walk(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every (path, sub-value) of a JSON value reachable through template paths."""
    if value is SKIPPED:
        return
    yield path, value
    if isinstance(value, dict):
        for key, sub in value.items():
            if _segment_ok(key):
                yield from _walk(sub, (*path, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            yield from _walk(sub, (*path, str(i)))


def _path_order(path: Path) -> tuple[int, tuple[tuple[int, int, str], ...]]:
    """Shortest first, then smallest (segment by segment; array indexes in number order)."""
    return len(path), tuple((0, int(s), "") if s.isdigit() else (1, 0, s) for s in path)


def _dotted(root: str, path: Path) -> str:
    return ".".join((root, *path))


# --- the plan being built ----------------------------------------------------------------------


@dataclass(frozen=True)
class Noted:
    """A scalar written with a line comment."""

    value: Any
    comment: str


@dataclass
class Step:
    id: str
    doc: dict[str, Any]
    view: Any  # the step's result as the plan will see it (as the chat saw it)
    round: int
    summary: str  # one line: what the step does
    _index: dict[Any, list[Path]] | None = None

    def index(self) -> dict[Any, list[Path]]:
        """value key → paths where the view holds that value (sorted shortest, then smallest)."""
        if self._index is None:
            found: dict[Any, list[Path]] = {}
            for path, value in _walk(self.view):
                if not is_trivial(value):
                    found.setdefault(value_key(value), []).append(path)
            for paths in found.values():
                paths.sort(key=_path_order)
            self._index = found
        return self._index


@dataclass
class Input:
    name: str
    schema: dict[str, Any]
    value: Any  # the default (None for a secret)
    secret: bool = False
    typed: Any = None  # the value as the chat had it: what the question is searched for

    def shown(self) -> str:
        """How a text about the plan names this input: `<name>`."""
        return f"<{self.name}>"


@dataclass
class Frozen:
    """A frozen plan: its document (with line comments as `Noted`), head comment and YAML text."""

    identifier: str
    document: dict[str, Any]
    head: list[str]
    steps: list[Step]
    inputs: list[Input]
    dropped: list[str]
    finish: str
    notes: list[str] = field(default_factory=list)  # typed values a tool took in another form
    text: str = ""

    def step_lines(self) -> list[str]:
        return [f"{step.id}  {step.summary}" for step in self.steps]

    def input_lines(self) -> list[str]:
        lines = []
        for item in self.inputs:
            kind = item.schema.get("type", "value")
            if item.secret:
                lines.append(f"{item.name} ({kind}, required: a secret, not kept)")
            else:
                lines.append(f"{item.name} ({kind}, default {_one_line(_json(item.value), 60)})")
        return lines


class _Builder:
    def __init__(self, user_texts: list[str]) -> None:
        self.user_texts = user_texts
        self.steps: list[Step] = []
        self.inputs: list[Input] = []
        self.notes: list[str] = []  # "E0 timezone: 'Tokyo' was typed, the tool took 'Asia/Tokyo': …"
        self.at = ""  # the step being converted, for the notes
        # how the plan of the last plan_and_execute call ended (its solver or output, renamed)
        self.planned_finish: tuple[str, Any] | None = None

    # -- references

    def reference(self, value: Any, before_round: int) -> tuple[str, str | None] | None:
        """The reference for `value` into an earlier round's result, and a note when several matched."""
        key = value_key(value)
        matches: list[str] = []
        earlier = sorted(
            (s for s in self.steps if s.round < before_round),
            key=lambda s: (-s.round, self.steps.index(s)),
        )
        for step in earlier:
            for path in step.index().get(key, ()):
                matches.append(_dotted(step.id, path))
        if not matches:
            return None
        note = None
        if len(matches) > 1:
            others = matches[1:4]
            more = f" and {len(matches) - 4} more" if len(matches) > 4 else ""
            note = f"chosen among {len(matches)} equal values; also at {', '.join(others)}{more}"
        return matches[0], note

    # -- inputs

    def input_for(self, key: str, value: Any, *, secret: bool = False) -> str:
        base = _input_name(key)
        n = 1
        while True:
            name = base if n == 1 else f"{base}_{n}"
            existing = next((i for i in self.inputs if i.name == name), None)
            if existing is None:
                schema: dict[str, Any] = {"type": _json_type(value)}
                if not secret:
                    schema["default"] = value
                self.inputs.append(Input(name, schema, None if secret else value, secret, value))
                return "{{input." + name + "}}"
            if not secret and not existing.secret and value_key(existing.value) == value_key(value):
                return "{{input." + name + "}}"
            n += 1

    def typed(self, value: Any) -> bool:
        """Whether the person typed this value in a message of the frozen turns."""
        if isinstance(value, str):
            return any(value in text for text in self.user_texts)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for text in self.user_texts:
                for token in _NUMBER_TOKEN.findall(text):
                    if value_key(float(token) if "." in token else int(token)) == value_key(value):
                        return True
        return False

    # -- arguments

    def convert(
        self, value: Any, key: str, round_no: int, path: Path = (), hole: tuple[Path, str] | None = None
    ) -> Any:
        """An argument value as the plan writes it (see the module doc for the precedence)."""
        if hole is not None and path == hole[0]:
            return hole[1]
        if path and not is_trivial(value) and (hole is None or not _is_prefix(path, hole[0])):
            found = self.reference(value, round_no)
            if found is not None:
                ref, note = found
                text = "{{" + ref + "}}"
                return Noted(text, note) if note else text
        if isinstance(value, dict):
            return {k: self.convert(v, str(k), round_no, (*path, str(k)), hole) for k, v in value.items()}
        if isinstance(value, list):
            return [self.convert(v, key, round_no, (*path, str(i)), hole) for i, v in enumerate(value)]
        if isinstance(value, str) and (REDACTED in value or _SECRET_VALUE.search(value)):
            return self.input_for(key, value, secret=True)
        if not is_trivial(value) and self.typed(value):
            return self.input_for(key, value, secret=looks_secret(key, value))
        if isinstance(value, str) and "{{" in value:
            # A literal cannot hold `{{` (every string of an input is a template): keep it as data.
            return Noted(self.input_for(key, value), "the value holds `{{`, so it is an input's default")
        if isinstance(value, str) and not is_trivial(value):
            typed = other_form(value, self.user_texts)
            if typed is not None:
                note = f"'{typed}' was typed, the tool took '{value}': left as a literal"
                line = f"{self.at} {key}: {note}"
                if line not in self.notes:
                    self.notes.append(line)
                return Noted(value, note)
        return value


def _is_prefix(prefix: Path, path: Path) -> bool:
    return path[: len(prefix)] == prefix


def _input_name(key: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", key).strip("_") or "value"
    if name[0].isdigit():
        name = "v_" + name
    return name + "_value" if name == "length" else name


# A credential by its argument's name (`api_key`, `token`, `password`, …) or by its look.
_SECRET_KEY = re.compile(
    r"(?:^|_)(?:api_?key|access_?key|private_?key|secret|token|password|passwd|passphrase|credentials?|"
    r"auth|authorization)$",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(?<!\S)(?:Bearer\s+\S{12,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|"
    r"sk-[A-Za-z0-9_-]{16,}|sk_live_\w{16,}|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
    r"glpat-[\w-]{20,}|hf_[A-Za-z0-9]{20,}|AIza[\w-]{30,})"
)


def looks_secret(key: str, value: Any) -> bool:
    """Whether a value the person typed is a credential: it never becomes a default, a name or a
    description (its input is required and has no default)."""
    if not isinstance(value, str) or len(value) < 6:
        return False
    camel = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", key)
    return bool(_SECRET_KEY.search(camel) or _SECRET_VALUE.search(value))


_FORM_WORD = re.compile(r"[^\W_]+")
_COMMON_WORDS = frozenset(
    "a an and are at be by can do for from get how in is it its list me my no not of on or set show "
    "the this that to up what when where which who why with you your all any new now time date day".split()
)


def other_form(value: str, texts: list[str]) -> str | None:
    """The words of `value` the person typed in another form (`Tokyo` for `Asia/Tokyo`, `new york`
    for `America/New_York`, `utc` for `UTC`), as typed; None when they typed none of it. The
    typed words must make up at least 40% of the value's letters and digits and not all be common."""
    words = _FORM_WORD.findall(value)
    total = sum(len(w) for w in words)
    if not words or total < 3:
        return None
    runs = sorted(
        ((i, j) for i in range(len(words)) for j in range(i + 1, len(words) + 1)),
        key=lambda r: (-(r[1] - r[0]), r[0]),
    )
    for i, j in runs:
        run = words[i:j]
        size = sum(len(w) for w in run)
        if size < 3 or size * 5 < total * 2 or all(w.lower() in _COMMON_WORDS for w in run):
            continue
        sep = r"[\s_\-/.,:]+"
        pattern = re.compile(
            r"(?<![^\W_])" + sep.join(re.escape(w) for w in run) + r"(?![^\W_])", re.IGNORECASE
        )
        for text in texts:
            found = pattern.search(text)
            if found is not None and found.group(0) != value:
                return found.group(0)
    return None


def _json_type(value: Any) -> str:
    return json_type(value) or "null"


def _json(value: Any) -> str:
    return orjson.dumps(value, default=str).decode()


def _one_line(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _no_template(text: str) -> str:
    """Text that is not a template (there is no escape for literal braces)."""
    return text.replace("{{", "{ {")


def _get(value: Any, path: Path) -> Any:
    for seg in path:
        value = value[int(seg)] if isinstance(value, list) else value[seg]
    return value


# --- map detection ---------------------------------------------------------------------------


def varying_place(arguments: list[Any]) -> Path | None:
    """The one place where the calls' arguments differ (the deepest common one), or None."""
    places: list[Path] = []

    def diff(values: list[Any], path: Path) -> None:
        first = values[0]
        if all(isinstance(v, dict) for v in values) and all(v.keys() == first.keys() for v in values):
            for k in first:
                diff([v[k] for v in values], (*path, str(k)))
        elif all(isinstance(v, list) for v in values) and all(len(v) == len(first) for v in values):
            for i in range(len(first)):
                diff([v[i] for v in values], (*path, str(i)))
        elif any(value_key(v) != value_key(first) for v in values):
            places.append(path)

    diff(arguments, ())
    if not places:
        return None
    common = places[0]
    for place in places[1:]:
        n = 0
        while n < min(len(common), len(place)) and common[n] == place[n]:
            n += 1
        common = common[:n]
    return common or None


def _leaf_paths(element: Any) -> list[Path]:
    return sorted(
        (p for p, v in _walk(element) if p and not isinstance(v, (dict, list))),
        key=_path_order,
    )


def _assign(values: list[Any], elements: list[Any], field_path: Path | None) -> list[int] | None:
    """For each value, a distinct index of the element (or element field) equal to it."""
    keys: list[Any] = []
    for element in elements:
        if field_path is None:
            keys.append(value_key(element))
            continue
        try:
            keys.append(value_key(_get(element, field_path)))
        except (KeyError, IndexError, TypeError, ValueError):
            keys.append(None)
    used: set[int] = set()
    out = []
    for value in values:
        key = value_key(value)
        j = next((j for j, k in enumerate(keys) if k == key and j not in used), None)
        if j is None:
            return None
        used.add(j)
        out.append(j)
    return out


@dataclass
class _MapSource:
    step: Step
    path: Path
    field: Path | None
    assignment: list[int]
    length: int
    others: int  # other arrays that would have done


def find_array(steps: list[Step], values: list[Any], before_round: int) -> _MapSource | None:
    """The earlier array whose elements (or one leaf field of them) the values run over."""
    earlier = sorted((s for s in steps if s.round < before_round), key=lambda s: (-s.round, steps.index(s)))
    found: list[_MapSource] = []
    for step in earlier:
        arrays = sorted(
            ((p, v) for p, v in _walk(step.view) if isinstance(v, list) and len(v) >= len(values)),
            key=lambda pv: _path_order(pv[0]),
        )
        for path, array in arrays:
            fields: list[Path | None] = [None]
            first = next((e for e in array if isinstance(e, dict)), None)
            if first is not None:
                fields.extend(_leaf_paths(first))
            for field_path in fields:
                assignment = _assign(values, array, field_path)
                if assignment is not None:
                    found.append(_MapSource(step, path, field_path, assignment, len(array), 0))
                    break
    if not found:
        return None
    best = found[0]
    best.others = len(found) - 1
    return best


# --- freezing ---------------------------------------------------------------------------------


def parse_turns(text: str | None, count: int) -> tuple[int, int]:
    """`A..B` (1-based, inclusive; `A..` and `..B` leave an end open; `N` is one turn)."""
    if not text:
        return 1, count
    match = re.fullmatch(r"\s*(\d*)\s*(?:\.\.\s*(\d*))?\s*", text)
    if match is None or (not match.group(1) and not match.group(2)):
        raise FreezeError(f"--turns {text!r}: expected A..B (1-based turn numbers, e.g. 2..3)", 2)
    start = int(match.group(1)) if match.group(1) else 1
    if match.group(2) is None:
        end = start
    else:
        end = int(match.group(2)) if match.group(2) else count
    if not 1 <= start <= end <= count:
        raise FreezeError(f"--turns {text}: the thread has turns 1..{count}", 2)
    return start, end


def slug(text: str, limit: int = 40) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    out = ""
    for word in words:
        candidate = f"{out}_{word}" if out else word
        if len(candidate) > limit:
            break
        out = candidate
    return out


def freeze(
    events: list[dict[str, Any]],
    *,
    thread_id: str,
    name: str | None = None,
    turns: str | None = None,
    finish: str | None = None,
    servers: Iterable[str] = (),
) -> Frozen:
    """The plan a thread's successful tool calls make (see the module doc). Raises FreezeError
    when there is nothing to freeze."""
    all_turns = read_turns(events)
    if not all_turns:
        raise FreezeError(f"thread {thread_id} has no messages: nothing to freeze")
    start, end = parse_turns(turns, len(all_turns))
    frozen_turns = all_turns[start - 1 : end]
    user_texts = [t.user_text for t in frozen_turns if t.user_text]
    request = user_texts[0] if user_texts else ""
    builder = _Builder(user_texts)
    dropped: list[str] = []
    calls = [c for t in frozen_turns for c in t.calls]
    kept: list[Call] = []
    for call in calls:
        reason = call.drop_reason()
        if reason is None and call.name == ASK_USER and _ask_schema(call) is None:
            reason = "its answer schema cannot be an `ask` step (a flat object of primitive fields)"
        if reason is None and call.name == PLAN_AND_EXECUTE and _planned_doc(call) is None:
            reason = "its result holds no plan to inline"
        if reason is not None:
            dropped.append(f"{call.name or '(no name)'} (turn {call.turn}): {reason}")
        else:
            kept.append(call)
    if not kept:
        where = f" in turns {start}..{end}" if turns else ""
        raise FreezeError(f"thread {thread_id} has no successful tool call{where}: nothing to freeze")

    rounds: dict[int, list[Call]] = {}
    for call in kept:
        rounds.setdefault(call.round, []).append(call)
    for round_no in sorted(rounds):
        _freeze_round(builder, rounds[round_no], round_no)

    planned = builder.planned_finish if len(kept) == 1 and kept[0].name == PLAN_AND_EXECUTE else None
    if finish is None and planned is not None:  # one planned run (`plan go`): the plan as it ran
        chosen = planned[0]
    else:
        chosen = finish or ("solver" if frozen_turns[-1].answer else "output")
        planned = None
    if chosen not in FINISHES:
        raise FreezeError(f"--finish {chosen!r}: choose one of {', '.join(FINISHES)}", 2)
    identifier = name or slug(scrubbed(request, builder.inputs)) or f"thread_{thread_id}"
    document = _document(builder, identifier, request, chosen, thread_id, servers)
    if planned is not None and planned[1] is not None:
        document.pop("output", None)
        document.pop("solver", None)
        document[chosen] = planned[1]
    secrets = [i for i in builder.inputs if i.secret]
    dropped = [with_inputs(item, secrets, str) for item in dropped]  # an error may echo a secret
    head = _head(thread_id, start, end, len(all_turns), identifier, dropped, builder)
    frozen = Frozen(identifier, document, head, builder.steps, builder.inputs, dropped, chosen, builder.notes)
    frozen.text = to_yaml(document, head)
    return frozen


def _freeze_round(builder: _Builder, calls: list[Call], round_no: int) -> None:
    """The steps of one round, in call order (a map stands where its first call stood)."""
    by_tool: dict[str, list[Call]] = {}
    for call in calls:
        if call.name != ASK_USER:
            by_tool.setdefault(call.name, []).append(call)
    mapped: dict[int, tuple[list[Call], _MapSource, Path]] = {}  # first call index → the map
    in_map: set[int] = set()
    for group in by_tool.values():
        if len(group) < 2:
            continue
        place = varying_place([c.arguments for c in group])
        if place is None:
            continue
        values = [_get(c.arguments, place) for c in group]
        if any(is_trivial(v) for v in values):
            continue
        source = find_array(builder.steps, values, round_no)
        if source is None:
            continue
        mapped[group[0].index] = (group, source, place)
        in_map.update(c.index for c in group)
    for call in calls:
        if call.index in mapped:
            group, source, place = mapped[call.index]
            _add_map(builder, group, source, place, round_no)
        elif call.index in in_map:
            continue
        elif call.name == ASK_USER:
            _add_ask(builder, call)
        elif call.name == PLAN_AND_EXECUTE:
            _add_planned(builder, call)
        else:
            _add_call(builder, call)


def _next_id(builder: _Builder) -> str:
    return f"E{len(builder.steps)}"


def _add_call(builder: _Builder, call: Call) -> None:
    step_id = builder.at = _next_id(builder)
    arguments = builder.convert(call.arguments, "value", call.round)
    doc = {"id": step_id, "tool_name": call.name, "input": arguments}
    summary = f"{call.name} {_one_line(_json(_plain(arguments)), 100)}"
    builder.steps.append(Step(step_id, doc, call.value, call.round, summary))


def _add_map(builder: _Builder, group: list[Call], source: _MapSource, place: Path, round_no: int) -> None:
    step_id = _next_id(builder)
    builder.at = f"{step_id} (each call)"
    item = "{{item}}" if source.field is None else "{{" + _dotted("item", source.field) + "}}"
    template = group[0]
    key = next((seg for seg in reversed(place) if not seg.isdigit()), "value")
    body_input = builder.convert(template.arguments, key, round_no, (), (place, item))
    over = "{{" + _dotted(source.step.id, source.path) + "}}"
    comments = []
    skipped = sorted(set(range(source.length)) - set(source.assignment))
    if skipped:
        shown = ", ".join(str(i) for i in skipped[:10]) + (", …" if len(skipped) > 10 else "")
        comments.append(
            f"the chat called {template.name} for {len(group)} of {source.length} elements (skipped {shown})"
        )
    if source.others:
        comments.append(f"chosen among {source.others + 1} arrays that hold these values")
    doc = {
        "id": step_id,
        "tool_name": "map",
        "input": {
            "over": Noted(over, "; ".join(comments)) if comments else over,
            "concurrency": len(group),
            "do": {"tool_name": template.name, "input": body_input},
        },
    }
    results: list[Any] = [SKIPPED] * source.length
    for call, j in zip(group, source.assignment, strict=True):
        results[j] = call.value
    view = {"count": source.length, "results": results}
    summary = f"map over {over[2:-2]} → {template.name} {_one_line(_json(_plain(body_input)), 80)}"
    builder.steps.append(Step(step_id, doc, view, round_no, summary))


_TEMPLATE_ROOT = re.compile(r"(\{\{[#^/]?\s*)([A-Za-z_][A-Za-z0-9_-]*)(?=[.}\s])")


def _planned_doc(call: Call) -> dict[str, Any] | None:
    """The final plan a plan_and_execute call ran (its result's `plan`), when it has steps."""
    plan = call.value.get("plan") if isinstance(call.value, dict) else None
    if isinstance(plan, dict) and isinstance(plan.get("steps"), list) and plan["steps"]:
        return plan
    return None


def _rename_roots(value: Any, names: dict[str, str]) -> Any:
    """`value` with the template roots in `names` renamed (`{{E0.x}}` → `{{E4.x}}`)."""
    if isinstance(value, str):
        if "{{" not in value:
            return value
        return _TEMPLATE_ROOT.sub(lambda m: m.group(1) + names.get(m.group(2), m.group(2)), value)
    if isinstance(value, dict):
        return {k: _rename_roots(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename_roots(v, names) for v in value]
    return value


def _add_planned(builder: _Builder, call: Call) -> None:
    """A plan_and_execute call: the steps of the final plan it ran, inlined here with fresh ids
    (body step ids become `<new id>_<old id>`); its inputs become the frozen plan's, with the
    defaults it ran with. Later calls cannot reference inside these steps (the chat never saw
    their results)."""
    plan = _planned_doc(call)
    assert plan is not None  # checked when the calls were kept
    names: dict[str, str] = {}
    props = (plan.get("input_schema") or {}).get("properties") or {}
    if isinstance(props, dict):
        for key, prop in props.items():
            default = prop.get("default") if isinstance(prop, dict) else None
            names[f"input.{key}"] = builder.input_for(str(key), default)[len("{{input.") : -2]
    first = len(builder.steps)
    steps = [s for s in plan["steps"] if isinstance(s, dict)]
    for n, step in enumerate(steps):
        if isinstance(step.get("id"), str):
            names[step["id"]] = f"E{first + n}"

    def body_ids(value: Any, owner: str) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("id"), str) and value["id"] not in names:
                names[value["id"]] = f"{owner}_{value['id']}"
            for item in value.values():
                body_ids(item, owner)
        elif isinstance(value, list):
            for item in value:
                body_ids(item, owner)

    for n, step in enumerate(steps):
        body_ids(step.get("input"), f"E{first + n}")
    goal = (call.arguments or {}).get("query") or (call.arguments or {}).get("goal") or ""
    for step in steps:
        new_id = names.get(step.get("id") or "", _next_id(builder))
        tool = str(step.get("tool_name") or step.get("toolName") or "")
        arguments = _rename_input_roots(_rename_roots(step.get("input") or {}, names), names)
        arguments = _rename_ids(arguments, names)
        doc = {"id": new_id, "tool_name": tool, "input": arguments}
        summary = (
            f"{tool} {_one_line(_json(_plain(arguments)), 80)} (planned for {_one_line(str(goal), 40)!r})"
        )
        builder.steps.append(Step(new_id, doc, None, call.round, summary))
    finish: tuple[str, Any] = ("silent", None)
    for key in ("solver", "output"):
        if plan.get(key) is not None:
            finish = (key, _rename_input_roots(_rename_roots(plan[key], names), names))
            break
    builder.planned_finish = finish


def _rename_input_roots(value: Any, names: dict[str, str]) -> Any:
    """`{{input.x}}` → `{{input.<x's name in the frozen plan>}}`."""
    if isinstance(value, str):
        if "{{" not in value:
            return value
        pattern = re.compile(r"(\{\{[#^/]?\s*input\.)([A-Za-z0-9_-]+)")
        return pattern.sub(lambda m: m.group(1) + names.get("input." + m.group(2), m.group(2)), value)
    if isinstance(value, dict):
        return {k: _rename_input_roots(v, names) for k, v in value.items()}
    if isinstance(value, list):
        return [_rename_input_roots(v, names) for v in value]
    return value


def _rename_ids(value: Any, names: dict[str, str]) -> Any:
    """The `id`s of body steps renamed as their references were."""
    if isinstance(value, dict):
        out = {k: _rename_ids(v, names) for k, v in value.items()}
        if isinstance(out.get("id"), str) and "tool_name" in out:
            out["id"] = names.get(out["id"], out["id"])
        return out
    if isinstance(value, list):
        return [_rename_ids(v, names) for v in value]
    return value


def _ask_schema(call: Call) -> tuple[dict[str, Any], bool] | None:
    """The `ask` output_schema for an ask_user call, and whether its answer is wrapped in one field."""
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    schema = arguments.get("schema")
    if isinstance(schema, dict) and schema:
        return (schema, False) if not ask_schema_problems(schema) else None
    options = arguments.get("options")
    prop: dict[str, Any] = {"type": "string"}
    if isinstance(options, list) and options and all(isinstance(o, str) for o in options):
        prop = {"enum": list(options)}
    return {"type": "object", "required": [ANSWER_FIELD], "properties": {ANSWER_FIELD: prop}}, True


def _add_ask(builder: _Builder, call: Call) -> None:
    step_id = _next_id(builder)
    found = _ask_schema(call)
    assert found is not None  # checked when the calls were kept
    schema, wrapped = found
    answer = call.value.get("answer") if isinstance(call.value, dict) else None
    if wrapped:
        answer = {ANSWER_FIELD: answer}
    question = str((call.arguments or {}).get("question") or "Your answer?")
    spec: dict[str, Any] = {"prompt": _no_template(question), "output_schema": schema}
    text = _json(answer)
    secret = REDACTED in text or _SECRET_VALUE.search(text.replace('"', " "))
    if not flat_answer_problems(schema, answer) and "{{" not in text and not secret:
        spec["when_unanswered"] = "default"  # headless runs keep the chat's answer
        spec["default"] = answer
    doc = {"id": step_id, "tool_name": "ask", "input": spec}
    view = {"answer": answer, "answered": True}
    summary = f"ask {_one_line(question, 80)!r}"
    builder.steps.append(Step(step_id, doc, view, call.round, summary))


def _document(
    builder: _Builder, identifier: str, request: str, finish: str, thread_id: str, servers: Iterable[str]
) -> dict[str, Any]:
    inputs = builder.inputs
    clean = scrubbed(request, inputs)
    line = _one_line(clean, MAX_TEXT)
    document: dict[str, Any] = {
        "identifier": identifier,
        "name": plan_name(clean, builder.steps, identifier),
        "description": plan_description(request, builder.steps, inputs, finish, thread_id),
    }
    if line:
        document["exemplars"] = [line]
    known = set(servers)
    used = sorted(
        {
            prefix
            for step in builder.steps
            for name in _tools_of(step.doc)
            if (prefix := name.partition("__")[0]) in known and "__" in name
        }
    )
    if used:
        document["requires_servers"] = used
    if inputs:
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {i.name: i.schema for i in inputs},
        }
        required = [i.name for i in inputs if i.secret]
        if required:
            schema["required"] = required
        document["input_schema"] = schema
    document["steps"] = [step.doc for step in builder.steps]
    results = {step.id: "{{" + step.id + "}}" for step in builder.steps}
    if finish == "solver":
        query = with_inputs(_no_template(request.strip()), inputs, _as_template)
        document["solver"] = {"query_to_answer": query or "Report what the steps found.", "data": results}
    elif finish == "output":
        document["output"] = results
    return document


# --- what the plan is called and says it does ---------------------------------------------------

NAME_CHARS = 60
_CLAUSE_END = re.compile(r"[?!;\n]|[.:](?=\s|$)")


def with_inputs(
    text: str,
    inputs: list[Input],
    shown: Callable[[Input], str],
    secret: Callable[[Input], str] | None = None,
) -> str:
    """`text` with every value that became an input replaced by `shown(input)`: strings where
    they occur not inside a word (longest first), numbers as whole tokens; a value that
    became two inputs is the first one's. A secret is `secret(input)`, else `[redacted]`."""
    strings: dict[str, Input] = {}
    numbers: dict[Any, Input] = {}
    for item in inputs:
        value = item.typed
        if is_trivial(value):
            continue
        if isinstance(value, str) and REDACTED not in value:
            strings.setdefault(_no_template(value), item)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            numbers.setdefault(value_key(value), item)
    if not strings and not numbers:
        return _SECRET_VALUE.sub(REDACTED, text)
    ordered = sorted(strings, key=lambda n: (-len(n), n))
    needles = "|".join(re.escape(n) if strings[n].secret else _whole(n) for n in ordered)
    pattern = re.compile((f"(?P<s>{needles})|" if needles else "") + f"(?P<n>{_NUMBER_TOKEN.pattern})")

    def replace(match: re.Match[str]) -> str:
        token = match.group(0)
        if match.lastgroup == "s":
            item = strings[token]
        else:
            found = numbers.get(value_key(float(token) if "." in token else int(token)))
            if found is None:
                return token
            item = found
        if item.secret:
            return REDACTED if secret is None else secret(item)
        return shown(item)

    return _SECRET_VALUE.sub(REDACTED, pattern.sub(replace, text))


def _whole(needle: str) -> str:
    """A pattern for `needle` that does not start or end inside a word (`books` is not replaced in
    `bookstore`; a secret is, wherever it is)."""
    head = r"(?<![^\W_])" if needle[:1].isalnum() else ""
    tail = r"(?![^\W_])" if needle[-1:].isalnum() else ""
    return head + re.escape(needle) + tail


def _as_template(item: Input) -> str:
    return "{{input." + item.name + "}}"


def scrubbed(text: str, inputs: list[Input]) -> str:
    """`text` with the secrets typed in it left out (and `[redacted]` marks too): what a name, an
    identifier or a description may be made from."""
    secrets = [i for i in inputs if i.secret]
    text = with_inputs(text, secrets, lambda _item: REDACTED)
    return re.sub(r"[ \t]{2,}", " ", text.replace(REDACTED, "")).strip()


def cut_words(text: str, limit: int) -> str | None:
    """`text` on one line, at most `limit` characters, cut after a whole word (with `…`); None
    when not even its first word fits."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    out = ""
    for word in text.split(" "):
        candidate = f"{out} {word}" if out else word
        if len(candidate) + 1 > limit:
            break
        out = candidate
    out = out.rstrip(" ,;:-–—")
    return out + "…" if out else None


def _called(steps: list[Step]) -> list[tuple[str, int]]:
    """The tools the steps call (bodies included), in order of first use, with how many steps call
    each; `ask` steps count as questions to the person."""
    counts: dict[str, int] = {}
    for step in steps:
        for tool in dict.fromkeys(_tools_of(step.doc)):
            name = tool if "__" in tool else ("a question to the person" if tool == "ask" else "")
            if name:
                counts[name] = counts.get(name, 0) + 1
    return list(counts.items())


def _tools_phrase(called: list[tuple[str, int]], limit: int = 4) -> str:
    shown = [f"{tool} (×{n})" if n > 1 else tool for tool, n in called[:limit]]
    if len(called) > limit:
        shown.append(f"{len(called) - limit} more")
    if len(shown) <= 1:
        return "".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def plan_name(clean: str, steps: list[Step], identifier: str) -> str:
    """At most NAME_CHARS characters, cut after a word: the question's first clause, else (a
    clause of fewer than two words, or none) the tools used, else the identifier."""
    clause = _CLAUSE_END.split(clean.strip(), maxsplit=1)[0].strip().rstrip(" ,;:-–—")
    name = cut_words(clause, NAME_CHARS) if len(_FORM_WORD.findall(clause)) >= 2 else None
    if name is None:
        tools = [tool for tool, _ in _called(steps)]
        name = cut_words("Calls " + _tools_phrase([(t, 1) for t in tools]), NAME_CHARS) if tools else None
    if name is None:
        return identifier[:NAME_CHARS]
    return name[:1].upper() + name[1:]


def plan_description(
    request: str, steps: list[Step], inputs: list[Input], finish: str, thread_id: str
) -> str:
    """What the plan does in terms of its inputs (the `plan__` tool's description): the question
    with `<input>` where a value became an input, the tools it calls, how it ends, its inputs."""
    named = with_inputs(request, inputs, Input.shown, Input.shown)
    question = cut_words(scrubbed(named, inputs), 200) or ""
    tools = _tools_phrase(_called(steps)) or "its steps"
    if question:
        text = {
            "solver": f'Answers "{question}" from {tools}.',
            "output": f'Returns what {tools} give for "{question}".',
        }.get(finish, f'Runs {tools} for "{question}".')
    else:
        text = {
            "solver": f"Calls {tools}, then writes an answer from their results.",
            "output": f"Returns what {tools} give.",
        }.get(finish, f"Calls {tools}.")
        text += f" Frozen from thread {thread_id}."
    if inputs:
        names = [f"{i.name} (required)" if i.secret else i.name for i in inputs]
        text += f" Input{'s' if len(names) > 1 else ''}: {', '.join(names)}."
    return text


def _tools_of(doc: Any) -> list[str]:
    """Every tool a step calls, its bodies' included (an inlined planned step may have any)."""
    found: list[str] = []
    if isinstance(doc, dict):
        tool = doc.get("tool_name")
        if isinstance(tool, str):
            found.append(tool)
        for value in doc.values():
            if isinstance(value, (dict, list)):
                found.extend(_tools_of(value))
    elif isinstance(doc, list):
        for item in doc:
            found.extend(_tools_of(item))
    return found


def _head(
    thread_id: str, start: int, end: int, count: int, identifier: str, dropped: list[str], builder: _Builder
) -> list[str]:
    turns = f"turn {start}" if start == end else f"turns {start}..{end}"
    head = [
        f"Frozen from thread {thread_id} ({turns} of {count}) by `graphchat plan freeze`.",
        f"Run it: graphchat plan run {identifier}",
    ]
    if dropped:
        head.append("Left out (only calls that completed without error are kept):")
        head.extend(f"  - {_one_line(item, 110)}" for item in dropped)
    elif builder.notes:
        head.append("Every tool call of these turns completed without error and is kept.")
    else:
        head.append("Nothing was left out: every tool call of these turns completed without error.")
    if builder.notes:
        head.append(
            "Typed values a tool took in another form (make them inputs by hand if they should vary):"
        )
        head.extend(f"  - {_one_line(item, 140)}" for item in builder.notes)
    secrets = [i.name for i in builder.inputs if i.secret]
    if secrets:
        names = ", ".join(secrets)
        head.append(f"Secrets typed in the chat are not kept: give {names} with --input when you run it.")
    return head


# --- the YAML writer --------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """The document without its comments."""
    if isinstance(value, Noted):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _scalar(value: Any) -> str:
    import yaml

    if isinstance(value, str) and (
        any(c in value for c in "\r\n\t\x85\u2028\u2029") or not value.isprintable()
    ):
        return orjson.dumps(value).decode()  # a JSON string is a YAML double-quoted scalar

    text: str = yaml.dump(
        value,
        Dumper=yaml12_dumper(),
        default_flow_style=True,
        allow_unicode=True,
        width=2**31,
        sort_keys=False,
    )
    for trailer in ("\n...\n", "\n"):
        if text.endswith(trailer):
            return text[: -len(trailer)]
    return text


def _is_flat(value: Any) -> bool:
    """A non-empty container of scalars that fits on one short line: written in flow style."""
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    else:
        return False
    if not items or any(isinstance(v, (dict, list, Noted)) for v in items):
        return False
    return len(_scalar(value)) <= 72


def _inline(value: Any) -> str | None:
    """The one-line form of a value, or None when it is written as a block."""
    if isinstance(value, (dict, list)):
        return _scalar(value) if not value or _is_flat(value) else None
    return _scalar(value)


def _comment(text: str) -> str:
    return "  # " + _one_line(text, 160)


def _emit_map(mapping: dict[str, Any], indent: int, lines: list[str], first: str | None = None) -> None:
    pad = " " * indent
    for i, (key, value) in enumerate(mapping.items()):
        prefix = first if (i == 0 and first is not None) else pad
        head = f"{prefix}{_scalar(key)}:"
        if isinstance(value, Noted):
            lines.append(f"{head} {_scalar(value.value)}{_comment(value.comment)}")
            continue
        one = _inline(value)
        if one is not None:
            lines.append(f"{head} {one}")
        elif isinstance(value, dict):
            lines.append(head)
            _emit_map(value, indent + 2, lines)
        else:
            lines.append(head)
            _emit_seq(value, indent + 2, lines)


def _emit_seq(items: list[Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for item in items:
        if isinstance(item, Noted):
            lines.append(f"{pad}- {_scalar(item.value)}{_comment(item.comment)}")
            continue
        one = _inline(item)
        if one is not None:
            lines.append(f"{pad}- {one}")
        elif isinstance(item, dict):
            _emit_map(item, indent + 2, lines, first=f"{pad}- ")
        else:
            lines.append(f"{pad}-")
            _emit_seq(item, indent + 2, lines)


def to_yaml(document: dict[str, Any], head: list[str]) -> str:
    """The plan file: the head comment, then the document in block style with line comments.
    Deterministic, and checked: it reads back as exactly the document."""
    import yaml

    lines = [f"# {line}".rstrip() for line in head]
    _emit_map(document, 0, lines)
    text = "\n".join(lines) + "\n"

    loader = yaml12_loader()
    if yaml.load(text, Loader=loader) != _plain(document):  # noqa: S506 - a safe loader class
        raise AssertionError("the frozen plan's YAML does not read back as the plan")
    return text
