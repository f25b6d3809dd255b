"""The static data-flow checker behind `plan validate` (and `plan draft`, `plan freeze`, the
planner, and `plan run` before its first step).

For every template of a loaded plan it works out what is known of the value at that path —
the plan's input from `input_schema`, a tool step's result from the tool's declared
`outputSchema` (else its learned shape, `catalog/shapes`, else nothing), a control step's result
from its step module's own declaration (`result(step, known)`), `item`/`index`/`accumulator`
inside bodies from what they range over — and reports every path that cannot resolve, every
argument a tool's input schema refuses, and every default its own schema refuses.

It never calls a tool or a model: it reads schemas and the shape cache. Unknown stays unknown:
where nothing is known, nothing is said. Each finding has a tier:

- `error` — the run certainly fails (a field a control step's result does not have, an input
  `input_schema` does not declare, a required argument missing, a literal the tool refuses);
- `evidence` — near-certain, by evidence (a field two edits from one a learned shape saw, a field
  an open declared schema lacks, a type a learned shape saw): an error for `plan validate`,
  `plan draft` and `plan freeze`, a note before `plan run`'s first step (a shape cache never
  makes a working plan unrunnable);
- `note` — worth saying, never a reason to refuse (a field a learned shape never saw, far from
  every field it did; an argument an open input schema does not name).

Only paths that are resolved strictly at run time are checked: value tags and whole-value
splices, and inside sections the paths that start at a root; a section's own test is a
conditional (never an error), a bare name inside a section reads the element. Where a template
runs only sometimes (a `decide` branch, the message and output of a gated `exit`, a templated
`ask` default), a certain failure is only `evidence`; the solver's `data` is sent as
"(unavailable: …)" when it does not render, so what is found there is a `note`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from graphchat.jsonschema_util import first_error, schema_refusal
from graphchat.plans.grammar import template_strings
from graphchat.plans.model import Body, Plan, Step
from graphchat.plans.splice_types import _arguments, _fits, _say
from graphchat.plans.splice_types import _types as types_of
from graphchat.plans.steps import CONTROL
from graphchat.shapes import infer_schema
from graphchat.template import TemplateError, parse
from graphchat.template.parser import DATA, Section
from graphchat.template.parser import Path as TPath

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog
    from graphchat.template.parser import Path as TPath

ERROR = "error"
EVIDENCE = "evidence"
NOTE = "note"
_RANK = {NOTE: 0, EVIDENCE: 1, ERROR: 2}

# tool name -> its stored shape document ({schema, seen_count, ...}) from the shape cache
ShapeDocs = Callable[[str], "dict[str, Any] | None"]
Schema = dict[str, Any]

_SOURCE = "x-graphchat-source"  # where a (sub)schema comes from; set by this module only


@dataclass(frozen=True)
class Source:
    """Where what is known of a value comes from: `control` (a step's own declaration: closed),
    `input` (the plan's `input_schema`: values are validated), `literal` (written in the plan),
    `declared` (a tool's `outputSchema`, an `output_schema` a model or person answers to),
    `learned` (the shape cache: what the tool returned so far)."""

    kind: str
    whence: str  # "shop__list_items's result", "E1's map result", "the plan's input"
    seen: int = 0  # learned: from how many calls

    @property
    def suffix(self) -> str:
        if self.kind == "learned" and self.seen:
            return f", learned from {self.seen} call{'s' if self.seen != 1 else ''}"
        if self.kind == "declared":
            return ", as declared"
        return ""

    @property
    def said(self) -> str:
        return self.whence + self.suffix

    def element(self) -> Source:
        return Source(self.kind, f"an element of {self.whence}", self.seen)


@dataclass
class Finding:
    tier: str
    label: str | None  # the step's label (`E1`, `E1/do`), None at the plan level
    field: str  # `input.timezone`, `output.zone`, `input_schema.properties.n.default`
    message: str

    @property
    def text(self) -> str:
        where = f"step {self.label}: " if self.label is not None else ""
        return f"{where}{self.field}: {self.message}"


def tag(schema: Any, source: Source) -> Schema | None:
    """`schema` marked as known from `source` (None stays None: unknown)."""
    if not isinstance(schema, Mapping) or not schema:
        return None
    return {**schema, _SOURCE: source}


# --- the walk over a plan -----------------------------------------------------------------------


class _Env:
    """What each root is at one place of the plan: root -> (schema or None, source)."""

    def __init__(self, roots: dict[str, tuple[Schema | None, Source]]) -> None:
        self.roots = roots

    def child(self, **extra: tuple[Schema | None, Source]) -> _Env:
        return _Env({**self.roots, **extra})


class _Checker:
    def __init__(self, plan: Plan, catalog: Catalog | None, shapes: ShapeDocs | None) -> None:
        self.plan = plan
        self.catalog = catalog
        self.shapes = shapes
        self.findings: list[Finding] = []

    # -- reporting

    def report(self, tier: str, label: str | None, field: str, message: str, cap: str = ERROR) -> None:
        if _RANK[tier] > _RANK[cap]:
            tier = cap
        self.findings.append(Finding(tier, label, field, message))

    # -- the plan

    def run(self) -> list[Finding]:
        plan = self.plan
        env = _Env({"input": (self.input_root(), Source("input", "the plan's input"))})
        self.check_defaults()
        for step in plan.steps:
            result = self.step(step, step.label, env, cap=ERROR)
            if step.id:
                env = env.child(**{step.id: result})
        if plan.output is not None:
            self.templates(plan.output, env, None, "output", ERROR)
        if plan.solver is not None:
            self.templates(plan.solver.query_to_answer, env, None, "solver.query_to_answer", NOTE)
            if plan.solver.data is not None:
                self.templates(plan.solver.data, env, None, "solver.data", NOTE)
        return self.findings

    def input_root(self) -> Schema | None:
        schema = self.plan.input_schema
        if not isinstance(schema, Mapping):
            return None
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            return None  # any object is accepted: nothing is known of its keys
        # An undeclared `{{input.x}}` is an error when the schema declares properties (unless
        # it says other keys are welcome: `additionalProperties: true` or a schema).
        extra = schema.get("additionalProperties", False)
        return {
            **schema,
            "type": "object",
            "additionalProperties": extra if extra not in (None, False) else False,
        }

    def check_defaults(self) -> None:
        """A default its own property schema refuses (the run without that input is exit 3)."""
        schema = self.plan.input_schema
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(props, Mapping):
            return

        for name, prop in props.items():
            if not isinstance(prop, Mapping) or "default" not in prop:
                continue
            body = {k: v for k, v in prop.items() if k != "default"}
            problem = first_error(body, prop["default"])
            if problem:
                self.report(
                    EVIDENCE,
                    None,
                    f"input_schema.properties.{name}.default",
                    f"{prop['default']!r} does not fit its own schema: {problem} "
                    f"(a run without '{name}' stops at its input, exit 3): fix the default or the type",
                )

    # -- steps

    def step(self, step: Step, label: str, env: _Env, cap: str) -> tuple[Schema | None, Source]:
        tool = step.tool_name
        control = CONTROL.get(tool)
        if control is None:
            self.tool_step(step, label, env, cap)
            return self.tool_result(step, label)
        # what the step's module declares: its per-item fields and names, its sometimes-fields
        scope = env
        if control.PER_ITEM:
            self.templates(step.input.get("over"), env, label, "input.over", cap)
            if "initial" in step.input:
                self.templates(step.input.get("initial"), env, label, "input.initial", cap)
            named: dict[str, tuple[Schema | None, Source]] = {
                "item": self.over_item(step, env),
                "index": ({"type": "integer"}, Source("control", f"{label}'s index")),
            }
            scope = env.child(
                **{n: named.get(n, (None, Source("control", f"{label}'s {n}"))) for n in control.PER_ITEM}
            )
        sometimes = control.sometimes(step)
        for key, value in step.input.items():
            if key in ("over", "initial"):
                continue
            where = scope if key in control.PER_ITEM_FIELDS else env
            self.templates(value, where, label, f"input.{key}", EVIDENCE if key in sometimes else cap)
        bodies: dict[str, Schema | None] = {}
        for name, body in step.bodies.items():
            where = scope if name in control.PER_ITEM_FIELDS else env
            bodies[name] = self.body(body, f"{label}/{name}", where, EVIDENCE if name in sometimes else cap)
        known = _Known(bodies, self.over_item(step, env)[0] if "over" in step.input else None)
        try:
            declared = control.result(step, known)
        except Exception:  # a declaration must never take validation down
            return None, Source("control", f"{label}'s result")
        source = Source("control", f"a {tool} step's result")
        return tag(declared, source), source

    def body(self, body: Body, label: str, env: _Env, cap: str) -> Schema | None:
        result: tuple[Schema | None, Source] = (None, Source("control", label))
        for sub in body.steps:
            sub_label = label if body.single else f"{label}/{sub.label}"
            result = self.step(sub, sub_label, env, cap)
            if sub.id:
                env = env.child(**{sub.id: result})
        schema, source = result
        return tag(schema, source) if schema is not None and _SOURCE not in schema else schema

    def over_item(self, step: Step, env: _Env) -> tuple[Schema | None, Source]:
        over = step.input.get("over")
        unknown: tuple[Schema | None, Source] = (None, Source("control", f"{step.label}'s item"))
        if isinstance(over, list):
            if any(template_strings(over, "")):
                return unknown

            items = infer_schema(over).get("items")
            source = Source("literal", f"{step.label}'s `over` list")
            return tag(items, source), source
        if not isinstance(over, str):
            return unknown
        resolved = self.resolve_splice(over, env)
        if resolved is None:
            return unknown
        schema, source = resolved
        if _types(schema) == frozenset({"array"}) and isinstance(schema.get("items"), Mapping):
            items = schema["items"]
            element = items.get(_SOURCE, source)
            if element.kind in ("learned", "declared", "input", "literal"):
                element = element.element()
            return tag(items, element), element
        return unknown

    def tool_result(self, step: Step, label: str) -> tuple[Schema | None, Source]:
        tool = step.tool_name
        unknown: tuple[Schema | None, Source] = (None, Source("learned", f"{tool}'s result"))
        if tool == "builtin__infer":
            schema = step.input.get("output_schema")
            if isinstance(schema, Mapping) and not template_strings(schema, ""):
                source = Source("declared", f"{label}'s builtin__infer output_schema")
                return tag(schema, source), source
            if "output_schema" not in step.input:
                source = Source("control", f"{label}'s builtin__infer result")
                closed = {"type": "object", "properties": {"text": {"type": "string"}}}
                return tag({**closed, "additionalProperties": False}, source), source
            return unknown
        spec = self.catalog.get(tool) if self.catalog is not None else None
        if spec is not None and spec.output_schema:
            source = Source("declared", f"{tool}'s result")
            return tag(spec.output_schema, source), source
        doc = self.shapes(tool) if self.shapes is not None else None
        schema = doc.get("schema") if isinstance(doc, Mapping) else None
        if isinstance(schema, Mapping) and doc is not None:
            seen = doc.get("seen_count")
            kind = "declared" if doc.get("source") == "declared" else "learned"
            source = Source(kind, f"{tool}'s result", int(seen) if isinstance(seen, int) else 0)
            return tag(dict(schema), source), source
        return unknown

    # -- a tool step's arguments

    def tool_step(self, step: Step, label: str, env: _Env, cap: str) -> None:
        spec = self.catalog.get(step.tool_name) if self.catalog is not None else None
        args = step.input if isinstance(step.input, Mapping) else {}
        for key, value in args.items():
            self.templates(value, env, label, f"input.{key}", cap)
        if spec is None:
            return
        schema = spec.input_schema or {}
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not isinstance(props, Mapping):
            return

        if schema_refusal(schema) is not None:
            return  # the call itself says why the tool cannot be called
        tool = step.tool_name
        names = ", ".join(str(p) for p in props) or "none"
        required = [
            r
            for r in (schema.get("required") or [])
            if isinstance(r, str) and not (isinstance(props.get(r), Mapping) and "default" in props[r])
        ]
        missing = [r for r in required if r not in args]
        closed = schema.get("additionalProperties") is False
        for key in args:
            if key in props:
                continue
            close = _closest(str(key), [str(p) for p in props])
            if close in missing:
                missing.remove(close)
                self.report(
                    ERROR,
                    label,
                    f"input.{key}",
                    f"{tool} has no argument {key!r}: did you mean {close!r}? "
                    f"(it is required; {tool}'s arguments: {names})",
                    cap,
                )
            else:
                hint = f": did you mean {close!r}?" if close else ""
                self.report(
                    ERROR if closed else NOTE,
                    label,
                    f"input.{key}",
                    f"{tool} has no argument {key!r}{hint} ({tool}'s arguments: {names}"
                    f"{'' if closed else '; the tool may ignore it'})",
                    cap,
                )
        for name in missing:
            self.report(
                ERROR,
                label,
                "input",
                f"{tool}'s required argument {name!r} is missing: add `{name}:` ({tool}'s arguments: {names})",
                cap,
            )
        self.argument_types(args, schema, "input", label, env, cap, tool)

    def argument_types(
        self, args: Mapping[str, Any], schema: Any, where: str, label: str, env: _Env, cap: str, tool: str
    ) -> None:
        for field, value, wanted in _arguments(args, schema, where):
            if isinstance(value, str) and "{{" in value:
                resolved = self.resolve_splice(value, env)
                want = types_of(wanted)
                if resolved is None or want is None:
                    continue
                have = types_of(_strip_null(resolved[0]))
                if have is None or _fits(have, want):
                    continue
                source = resolved[1]
                self.report(
                    _type_tier(source),
                    label,
                    field,
                    f"{value!r} is {_say(have)} ({_splice_whence(value, source)}), but {tool} wants {_say(want)}",
                    cap,
                )
            elif not template_strings(value, ""):
                found = first_error(dict(wanted), value)
                if found:
                    self.report(ERROR, label, field, f"{tool} refuses {value!r}: {found}", cap)

    # -- templates

    def templates(self, value: Any, env: _Env, label: str | None, field: str, cap: str) -> None:
        for text, loc in template_strings(value, ""):
            try:
                template = parse(text)
            except TemplateError:
                continue  # the loader reports it
            where = f"{field}.{loc}" if loc else field
            seen: set[str] = set()
            for path in _strict_paths(template.nodes, env.roots, in_section=False):
                if path.text in seen:
                    continue
                seen.add(path.text)
                self.path(path, text, env, label, where, cap)

    def resolve_splice(self, text: str, env: _Env) -> tuple[Schema, Source] | None:
        try:
            splice = parse(text).splice
        except TemplateError:
            return None
        if splice is None or not splice.segs or splice.segs[0] not in env.roots:
            return None
        outcome = _resolve(splice, env.roots[splice.segs[0]])
        if isinstance(outcome, _Problem):
            return None
        return outcome

    def path(self, path: TPath, text: str, env: _Env, label: str | None, field: str, cap: str) -> None:
        root = path.segs[0]
        if root not in env.roots:
            return  # the loader reports unknown roots
        outcome = _resolve(path, env.roots[root])
        if isinstance(outcome, _Problem):
            shown = "{{" + path.text + "}}"
            quoted = repr(text) if text.strip() != shown else repr(shown)
            self.report(outcome.tier, label, field, f"{quoted}: {outcome.message}", cap)


class _Known:
    def __init__(self, bodies: dict[str, Schema | None], item: Schema | None) -> None:
        self.bodies = bodies
        self.item = item

    def body(self, name: str) -> Schema | None:
        return self.bodies.get(name)

    def over_item(self) -> Schema | None:
        return self.item


# --- resolving one path against what is known ------------------------------------------------------


@dataclass
class _Problem:
    tier: str
    message: str


def _strict_paths(nodes: tuple[Any, ...], roots: Mapping[str, Any], *, in_section: bool) -> Iterator[TPath]:
    """Paths resolved strictly at run time: value tags outside sections, and inside sections
    those that start at a root (a bare name there reads the element; section tests are
    conditionals)."""
    for node in nodes:
        if isinstance(node, TPath):
            if node.kind != DATA or not node.segs:
                continue
            if not in_section or node.segs[0] in roots:
                yield node
        elif isinstance(node, Section):
            yield from _strict_paths(node.body, roots, in_section=True)


def _resolve(path: TPath, start: tuple[Schema | None, Source]) -> tuple[Schema, Source] | _Problem | None:
    """What is known of the value at `path`, a problem that certainly (or by evidence) stops
    it, or None (unknown)."""
    schema, source = start
    segs = path.segs
    walk = segs[1 : len(segs) - 1] if path.length else segs[1:]
    at = segs[0]
    for seg in walk:
        if schema is None:
            return None
        source = schema.get(_SOURCE, source)
        schema = _strip_null(schema)
        types = _types(schema)
        if types is None:
            return None
        index = seg.isascii() and seg.isdigit()
        if index:
            if "array" in types:
                items = schema.get("items")
                schema = dict(items) if isinstance(items, Mapping) and items else None
                at = f"{at}.{seg}"
                continue
            if "object" in types:
                keys = _keys(schema)
                return _Problem(
                    _type_tier(source),
                    f"{at} is an object ({_known_as(at, source, keys)}); {seg!r} is an index: "
                    f"objects are read by key",
                )
            return _Problem(
                _type_tier(source), f"{at} is {_say_types(types)} ({source.said}): it has no {seg!r}"
            )
        if "object" in types:
            props = schema.get("properties")
            if isinstance(props, Mapping) and seg in props:
                child = props[seg]
                schema = dict(child) if isinstance(child, Mapping) and child else None
                at = f"{at}.{seg}"
                continue
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                schema = dict(extra)  # a map: any key
                at = f"{at}.{seg}"
                continue
            if not isinstance(props, Mapping) or not props or extra is True or len(types) > 1:
                return None  # an open object with nothing declared: unknown
            return _absent(at, seg, schema, source)
        if "array" in types:
            return _Problem(
                _type_tier(source),
                f"{at} is an array ({source.said}), it has no field {seg!r}: read an element "
                f"({{{{{at}.0.{seg}}}}}) or `map` over it",
            )
        return _Problem(
            _type_tier(source), f"{at} is {_say_types(types)} ({source.said}): it has no field {seg!r}"
        )
    if path.length and schema is not None:
        source = schema.get(_SOURCE, source)
        types = _types(_strip_null(schema))
        if types is not None and not types & {"array", "string"}:
            return _Problem(
                _type_tier(source),
                f".length applies to arrays and strings; {at} is {_say_types(types)} ({source.said})",
            )
        return None
    if schema is None:
        return None
    return schema, schema.get(_SOURCE, source)


def _absent(at: str, seg: str, schema: Schema, source: Source) -> _Problem:
    keys = _keys(schema)
    close = _closest(seg, keys)
    hint = f": did you mean {close!r}?" if close else ""
    if schema.get("additionalProperties") is False:
        tier = ERROR
    elif source.kind == "learned":
        near = close is not None and _near(seg, close)
        tier = EVIDENCE if near else NOTE
        if not near:
            hint = " seen so far (it may be optional" + (f"; closest: {close!r})" if close else ")")
    else:
        tier = EVIDENCE
    if at == "input" and source.kind == "input":
        return _Problem(tier, f"{seg!r} is not an input of this plan{hint} (inputs: {', '.join(keys)})")
    return _Problem(tier, f"no field {seg!r}{hint} ({_known_as(at, source, keys)})")


def _known_as(at: str, source: Source, keys: list[str]) -> str:
    shown = "{" + ", ".join(keys[:12]) + (", …" if len(keys) > 12 else "") + "}"
    if "." not in at:
        return f"{at} is {source.whence} {shown}{source.suffix}"
    return f"{at} is {shown}, in {source.said}"


def _keys(schema: Mapping[str, Any]) -> list[str]:
    props = schema.get("properties")
    return [str(k) for k in props] if isinstance(props, Mapping) else []


def _type_tier(source: Source) -> str:
    return ERROR if source.kind in ("control", "input", "literal") else EVIDENCE


def _splice_whence(text: str, source: Source) -> str:
    root = text.strip().strip("{}").strip().split(".", 1)[0]
    if source.kind == "input":
        return "per the plan's input_schema"
    if source.kind == "learned":
        return f"{root}'s learned shape of {source.whence.removesuffix(chr(39) + 's result')}"
    return f"{root} is {source.said}"


def _strip_null(schema: Schema) -> Schema:
    """`anyOf: [X, null]` is X: reading a field of null fails as surely as a missing one."""
    branches = schema.get("anyOf")
    if isinstance(branches, list) and len(schema.keys() - {"anyOf", _SOURCE}) == 0:
        rest = [b for b in branches if not (isinstance(b, Mapping) and b.get("type") == "null")]
        if len(rest) == 1 and isinstance(rest[0], Mapping):
            return dict(rest[0])
    return schema


def _types(schema: Any) -> frozenset[str] | None:
    found = types_of(schema)
    if found is None and isinstance(schema, Mapping) and isinstance(schema.get("properties"), Mapping):
        if not any(k in schema for k in ("anyOf", "oneOf", "allOf", "not", "$ref", "if")):
            return frozenset({"object"})
    if found is not None:
        found = found - {"null"} or found
    return found


def _say_types(types: frozenset[str]) -> str:
    names = sorted(types)
    article = {"array": "an array", "object": "an object", "integer": "an integer"}
    return " or ".join(article.get(n, f"a {n}") for n in names)


def _closest(word: str, names: list[str]) -> str | None:
    near = [n for n in names if _near(word, n)]
    if near:
        return min(near, key=lambda n: (_distance(word, n), n))
    found = difflib.get_close_matches(word, names, n=1, cutoff=0.6)
    return found[0] if found else None


def _near(a: str, b: str) -> bool:
    """Within two edits (one for names of four characters or fewer)."""
    return _distance(a, b) <= (1 if min(len(a), len(b)) <= 4 else 2)


def _distance(a: str, b: str) -> int:
    """Edit distance with transpositions (optimal string alignment)."""
    if a == b:
        return 0
    rows = [list(range(len(b) + 1))]
    for i, ca in enumerate(a, 1):
        row = [i]
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            best = min(rows[-1][j] + 1, row[j - 1] + 1, rows[-1][j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                best = min(best, rows[-2][j - 2] + 1)
            row.append(best)
        rows.append(row)
    return rows[-1][-1]


# --- entry point ----------------------------------------------------------------------------------


def check_plan(plan: Plan, catalog: Catalog | None = None, shapes: ShapeDocs | None = None) -> list[Finding]:
    """Every data-flow finding of a loaded plan, in file order (the plan-level ones first)."""
    return _Checker(plan, catalog, shapes).run()
