"""The toolkit a control step states its grammar with, at load time.

The plan loader reads the file, the steps and their `input`; for a control step it hands the
step's module (`graphchat.plans.steps.<name>`) a `Site`: the step's normalised `input`, where
it stands, what its templates may reference, and the checks every grammar is made of (gates,
`infer`/`model`, `over`, strings, counts, bodies). The module calls the checks its grammar
needs; every problem is reported as `step <id>: input.<field>: <what is wrong>`.

This module imports neither the loader nor the steps (the loader lends itself through the
`Checks` protocol), so the loader → step table → step modules → grammar chain has no cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from graphchat.jsontype import json_type
from graphchat.plans.gates import gate_problems, is_infer
from graphchat.template import TemplateError, parse

if TYPE_CHECKING:
    from graphchat.plans.model import Body

Report = Callable[[str, str], None]  # report(field, what is wrong)
Schema = dict[str, Any]


class Results(Protocol):
    """What a step's result declaration (`result(step, known)` in each step module) may ask of
    the data-flow checker (`graphchat.plans.check`): the result schema of one of its bodies,
    and the schema of one element of its `over` — each None when unknown."""

    def body(self, name: str) -> Schema | None: ...

    def over_item(self) -> Schema | None: ...


def closed(properties: Mapping[str, Any], required: Iterable[str] = ()) -> Schema:
    """A control step's result: an object with exactly these fields (`additionalProperties:
    false`), so a path into any other field certainly fails."""
    props = {name: (schema if schema is not None else {}) for name, schema in properties.items()}
    return {
        "type": "object",
        "properties": props,
        "required": [name for name in required if name in props] or list(props),
        "additionalProperties": False,
    }


def array_of(items: Schema | None) -> Schema:
    return {"type": "array", "items": items} if items else {"type": "array"}


def or_null(schema: Schema | None) -> Schema:
    """`schema`, or null (reading a field of null fails as surely as a missing field)."""
    return {"anyOf": [schema or {}, {"type": "null"}]}


class Scope:
    """What templates at one place may reference: roots, and where other ids live."""

    def __init__(self, roots: Iterable[str], pseudo: Iterable[str] = ()) -> None:
        self.roots = set(roots)
        self.pseudo = set(pseudo)

    def child(self, extra: Iterable[str] = (), pseudo: Iterable[str] = ()) -> Scope:
        return Scope(self.roots | set(extra), self.pseudo | set(pseudo))

    @property
    def all(self) -> set[str]:
        return self.roots | self.pseudo


class Checks(Protocol):
    """What the loader lends a grammar: template checks against the plan's step ids, and loading
    a body's steps (through the loader, recursively)."""

    def check_templates(self, value: Any, scope: Scope, where: str | None, field: str) -> None: ...

    def load_body(
        self,
        raw: Any,
        name: str,
        owner: str,
        where: str,
        scope: Scope,
        line_path: tuple[Any, ...],
        report: Report,
    ) -> Body | None: ...


@dataclass
class Site:
    """One control step's `input` being loaded.

    `spec` is the input with snake_case keys (unknown and doubly-spelled keys already
    reported); the bodies a grammar loads with `body()` are taken out of it into `bodies`.
    """

    tool: str
    spec: dict[str, Any]
    raw_keys: dict[str, Any]  # snake key -> the key as written
    where: str  # the step's label in messages (`E1`, `E1/then/E10`)
    scope: Scope
    line_path: tuple[Any, ...]
    report: Report  # report("x", what) -> `step <where>: input.x: <what>`
    checks: Checks
    bodies: dict[str, Body] = field(default_factory=dict)

    def templates(self, value: Any, field: str, scope: Scope | None = None) -> None:
        """Syntax, unknown roots and forward references of the templates in `input.<field>`."""
        self.checks.check_templates(
            value, self.scope if scope is None else scope, self.where, f"input.{field}"
        )

    def one_of(self, a: str, b: str, *, required: bool) -> None:
        if a in self.spec and b in self.spec:
            self.report(a, f"`{a}` and `{b}` exclude each other: keep one")
        elif required and a not in self.spec and b not in self.spec:
            self.report(a, f"required: exactly one of `{a}` or `{b}`")

    def gate(self, field: str, scope: Scope | None = None) -> None:
        """A logical gate (an inferred one is written as `infer:` beside it)."""
        gate = self.spec[field]
        if isinstance(gate, Mapping) and is_infer(gate):
            self.report(field, f"an inferred gate is written as `infer:` beside `{field}`, not inside it")
            return
        problems = gate_problems(gate)
        for problem in problems:
            self.report(field, problem)
        if not problems:
            self.templates(gate, field, scope)

    def infer(self, scope: Scope | None = None) -> None:
        """`infer`, when given: a yes/no question for the judge (a template)."""
        if "infer" in self.spec:
            value = self.spec["infer"]
            if not isinstance(value, str) or not value.strip():
                self.report("infer", f"must be a non-empty yes/no question, got {yaml_kind(value)}")
            else:
                self.templates(value, "infer", scope)

    def model(self, scope: Scope | None = None) -> None:
        """`model`, when given: a model name or a role (a template)."""
        if "model" in self.spec:
            model = self.spec["model"]
            if not isinstance(model, str) or not model.strip():
                self.report("model", f"must be a model name or role, got {yaml_kind(model)}")
            else:
                self.templates(model, "model", scope)

    def string(self, field: str, *, required: bool) -> None:
        """A string template (non-empty when required)."""
        if field not in self.spec or self.spec[field] is None:
            if required:
                self.report(field, "required: a string (a template)")
            return
        value = self.spec[field]
        if not isinstance(value, str) or (required and not value.strip()):
            self.report(field, f"must be a non-empty string, got {yaml_kind(value)}")
            return
        self.templates(value, field)

    def positive_int(self, field: str) -> None:
        if field in self.spec:
            value = self.spec[field]
            if isinstance(value, bool) or not isinstance(value, int):
                self.report(field, f"must be an integer ≥ 1, got {yaml_kind(value)}")
            elif value < 1:
                self.report(field, f"must be at least 1, got {value}")

    def over(self, field: str, own: Iterable[str]) -> None:
        """`over`/`initial` render before any item exists: the step's own pseudo-roots (`own`)
        are not there yet."""
        if field not in self.spec:
            if field == "over":
                self.report(field, 'required: an array, usually a template like "{{E0.items}}"')
            return
        value = self.spec[field]
        if field == "over" and not isinstance(value, (str, list)):
            self.report(field, f"must render to an array (a template or a list), got {yaml_kind(value)}")
            return
        scope = self.scope
        for root in own:
            if root not in scope.all and root in roots_of(value):
                inside = "`where`/`infer`" if field == "over" and "accumulator" not in own else "`do`"
                self.report(field, f"{{{{{root}}}}} is only available inside {inside}, not in `{field}`")
        self.templates(value, field, scope.child(pseudo=[r for r in own if r not in scope.all]))

    def body(self, name: str, scope: Scope, *, required: bool = True) -> None:
        """A `then`/`else`/`do` body: one call, or a list of steps with ids, loaded into
        `bodies` (and taken out of `spec`). Its steps see `scope`."""
        if name not in self.spec:
            if required:
                self.report(name, "required: one call {tool_name, input} or a list of steps with ids")
            return
        line_path = (*self.line_path, "input", self.raw_keys.get(name, name))
        body = self.checks.load_body(
            self.spec[name], name, self.tool, self.where, scope, line_path, self.report
        )
        if body is not None:
            self.bodies[name] = body
        self.spec.pop(name, None)


# --- helpers -----------------------------------------------------------------------------------


def yaml_kind(value: Any) -> str:
    """What a YAML value is, for loader messages (`a mapping`, `a list`, `a number (3)`).

    In YAML's words, as the plan's author wrote it; `graphchat.template.json_kind` names
    a rendered JSON value at run time (`an object`, `an array`). The messages are pinned."""
    kind = json_type(value)
    if kind in ("integer", "number"):
        return f"a number ({value})"
    return _YAML_KIND.get(kind or "") or type(value).__name__


_YAML_KIND = {
    "null": "null",
    "boolean": "a boolean",
    "string": "a string",
    "array": "a list",
    "object": "a mapping",
}


def template_strings(value: Any, where: str) -> list[tuple[str, str]]:
    """(string holding `{{`, dotted location) for every string in a JSON tree, in order."""
    found: list[tuple[str, str]] = []
    if isinstance(value, str):
        if "{{" in value:
            found.append((value, where))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            found.extend(template_strings(item, f"{where}.{key}" if where else str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(template_strings(item, f"{where}.{i}" if where else str(i)))
    return found


def roots_of(value: Any) -> set[str]:
    """The roots every template in `value` reads (templates that do not parse are skipped)."""
    roots: set[str] = set()
    for text, _ in template_strings(value, ""):
        try:
            roots |= parse(text).roots
        except TemplateError:
            pass
    return roots


def has_template(value: Any) -> bool:
    return bool(template_strings(value, ""))
