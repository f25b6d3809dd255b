"""YAML plan file → typed `Plan`, with every load-time rule of spec/plans.md checked.

All problems are collected (never only the first), each as
`<file>: step <id>: <field>: <what is wrong>` (plan-level: `<file>: <field>: <what>`).
camelCase keys are normalised to snake_case at the plan level, the step level, the solver and
the control-step grammar — never inside an ordinary tool's `input` (those keys belong to the
tool) nor inside schema / template-map values.

Body steps are labelled with their path, so a problem is findable: `step E1/then/E10`, and a
single-call body `step E1/do`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from graphchat.plans.model import CONTROL_STEPS, RESERVED_ROOTS, Body, Plan, PlanLoadError, Solver, Step

__all__ = ["PlanLoadError", "load_plan", "load_plan_data", "load_plan_text", "plan_to_dict"]

PLAN_FIELDS = (
    "identifier",
    "name",
    "description",
    "exemplars",
    "requires_servers",
    "input_schema",
    "steps",
    "solver",
    "output",
)
STEP_FIELDS = ("id", "tool_name", "input", "reasoning")
BODY_CALL_FIELDS = ("tool_name", "input", "reasoning")
SOLVER_FIELDS = ("query_to_answer", "data", "system_prompt")
CONTROL_FIELDS: dict[str, tuple[str, ...]] = {
    "exit": ("when", "infer", "model", "status", "message", "output"),
    "decide": ("if", "infer", "model", "then", "else"),
    "filter": ("over", "where", "infer", "model", "concurrency"),
    "map": ("over", "do", "concurrency"),
    "reduce": ("over", "do", "initial"),
    "agent": ("prompt", "output_schema", "tools", "max_iterations", "model", "system_prompt"),
    "ask": ("prompt", "output_schema", "when_unanswered", "default"),
}
# Allowed as a body step (exit only in decide branches).
BODY_CONTROL = frozenset({"agent", "ask", "filter", "exit"})
NO_NEST = frozenset({"decide", "map", "reduce"})
ASK_TYPES = ("string", "number", "integer", "boolean")

IDENTIFIER_RE = re.compile(r"^[A-Za-z0-9_-]+$")
STEP_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVER_RE = re.compile(r"^[A-Za-z0-9_-]+$")
TOOL_PATTERN_RE = re.compile(r"^[A-Za-z0-9_*.-]+$")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])([A-Z])")


def snake(key: str) -> str:
    """`toolName` → `tool_name` (already-snake keys are unchanged)."""
    return _CAMEL_RE.sub(lambda m: "_" + m.group(1).lower(), key)


# --- entry points ------------------------------------------------------------------------------


def load_plan(path: Path) -> Plan:
    """Read and check a plan file. Raises PlanLoadError with every problem found."""
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PlanLoadError(source, [f"{source}: file: cannot read: {exc.strerror}"]) from None
    except UnicodeDecodeError as exc:
        raise PlanLoadError(source, [f"{source}: file: not UTF-8 text (offset {exc.start})"]) from None
    return load_plan_text(text, source, path=path)


def load_plan_text(text: str, source: str, *, path: Path | None = None) -> Plan:
    """Parse YAML text (safe loader only) and check it as a plan."""
    import yaml

    from graphchat.yamlfile import parse_yaml

    try:
        node, data = parse_yaml(text)  # one parse; alias bombs refused
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}: " if mark else ""
        what = exc.problem or exc.context or "syntax error"
        raise PlanLoadError(source, [f"{source}: yaml: {where}invalid YAML: {what}"]) from None
    except yaml.YAMLError as exc:
        raise PlanLoadError(source, [f"{source}: yaml: invalid YAML: {exc}"]) from None
    return _Loader(source, node).load(data, path)


def load_plan_data(data: Any, source: str = "<plan>") -> Plan:
    """Check a plan given as data (a dict as YAML would give it)."""
    return _Loader(source, None).load(data, None)


# --- the loader --------------------------------------------------------------------------------


class _Scope:
    """What templates at one place may reference: roots, and where other ids live."""

    def __init__(self, roots: Iterable[str], pseudo: Iterable[str] = ()) -> None:
        self.roots = set(roots)
        self.pseudo = set(pseudo)

    def child(self, extra: Iterable[str] = (), pseudo: Iterable[str] = ()) -> _Scope:
        return _Scope(self.roots | set(extra), self.pseudo | set(pseudo))

    @property
    def all(self) -> set[str]:
        return self.roots | self.pseudo


class _Loader:
    def __init__(self, source: str, node: Any) -> None:
        self.source = source
        self.node = node
        self.problems: list[str] = []
        self.top_ids: list[str] = []  # every top-level id, in order
        self.body_owner: dict[str, str] = {}  # body step id -> owning top-level step label
        self.seen_ids: dict[str, str] = {}  # id -> label of its first definition

    # -- reporting

    def plan_problem(self, field: str, what: str) -> None:
        self.problems.append(f"{self.source}: {field}: {what}")

    def step_problem(self, label: str, field: str, what: str) -> None:
        self.problems.append(f"{self.source}: step {label}: {field}: {what}")

    def line(self, path: tuple[Any, ...]) -> int | None:
        """1-based line of the YAML node at `path` (raw keys / indexes), when parsed from text."""
        node = self.node
        if node is None:
            return None
        line = node.start_mark.line + 1
        for part in path:
            value = getattr(node, "value", None)
            if isinstance(value, list) and value and isinstance(value[0], tuple):
                for key_node, value_node in value:
                    if key_node.value == part:
                        node = value_node
                        line = key_node.start_mark.line + 1
                        break
                else:
                    return line
            elif isinstance(value, list) and isinstance(part, int) and part < len(value):
                node = value[part]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    # -- normalisation

    def normalise(
        self, raw: Mapping[Any, Any], allowed: Iterable[str], report: Any, what: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """snake_case the keys of a mapping; report unknown and doubly-spelled ones.

        Returns (normalised mapping, snake key -> raw key).
        """
        allowed = tuple(allowed)
        out: dict[str, Any] = {}
        raw_keys: dict[str, Any] = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                report(str(key), f"field names must be strings, got {_kind(key)}")
                continue
            name = snake(key)
            if name not in allowed:
                report(key, f"unknown field in {what} (allowed: {', '.join(allowed)})")
                continue
            if name in out:
                report(key, f"given twice (as `{raw_keys[name]}` and `{key}`)")
                continue
            out[name] = value
            raw_keys[name] = key
        return out, raw_keys

    # -- plan

    def load(self, data: Any, path: Path | None) -> Plan:
        if not isinstance(data, Mapping):
            got = "an empty file" if data is None else _kind(data)
            self.plan_problem("plan", f"a plan file must hold a mapping (identifier, name, ...), got {got}")
            raise PlanLoadError(self.source, self.problems)
        doc, _ = self.normalise(data, PLAN_FIELDS, self.plan_problem, "a plan")

        identifier = self.required_string(doc, "identifier")
        if identifier is not None and not IDENTIFIER_RE.match(identifier):
            self.plan_problem("identifier", f"{identifier!r} must use only letters, digits, `_` and `-`")
        name = self.required_string(doc, "name")
        description = self.required_string(doc, "description")
        exemplars = self.string_list(doc, "exemplars")
        requires = self.string_list(doc, "requires_servers")
        for server in requires:
            if not SERVER_RE.match(server) or "__" in server:
                self.plan_problem(
                    "requires_servers", f"{server!r} is not a server name ([A-Za-z0-9_-], no `__`)"
                )
        input_schema = doc.get("input_schema")
        if "input_schema" in doc:
            self.check_input_schema(input_schema)

        steps: list[Step] = []
        raw_steps = doc.get("steps")
        if "steps" not in doc:
            self.plan_problem("steps", "required: a list of steps")
        elif not isinstance(raw_steps, list):
            self.plan_problem("steps", f"must be a list of steps, got {_kind(raw_steps)}")
        elif not raw_steps:
            self.plan_problem("steps", "the plan has no steps")
        else:
            steps = self.load_steps(raw_steps, data)

        solver = None
        if "solver" in doc and doc["solver"] is not None:
            solver = self.load_solver(doc["solver"])
        output = doc.get("output")
        if output is not None:
            if not isinstance(output, Mapping):
                self.plan_problem("output", f"must be a template map (a mapping), got {_kind(output)}")
            else:
                self.check_templates(output, _Scope(["input", *self.top_ids]), None, "output")
        if solver is not None and output is not None:
            self.plan_problem("solver", "`solver` and `output` exclude each other: keep one")

        if self.problems:
            raise PlanLoadError(self.source, self.problems)
        assert identifier is not None and name is not None and description is not None
        return Plan(
            identifier=identifier,
            name=name,
            description=description,
            steps=steps,
            exemplars=exemplars,
            requires_servers=requires,
            input_schema=input_schema,
            solver=solver,
            output=output,
            path=path,
        )

    def required_string(self, doc: Mapping[str, Any], field: str) -> str | None:
        if field not in doc or doc[field] is None:
            self.plan_problem(field, "required")
            return None
        value = doc[field]
        if not isinstance(value, str) or not value.strip():
            self.plan_problem(field, f"must be a non-empty string, got {_kind(value)}")
            return None
        return value

    def string_list(self, doc: Mapping[str, Any], field: str) -> list[str]:
        value = doc.get(field)
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
            self.plan_problem(field, "must be a list of non-empty strings")
            return []
        return list(value)

    def check_input_schema(self, schema: Any) -> None:
        if not isinstance(schema, Mapping):
            self.plan_problem(
                "input_schema", f"must be a JSON Schema object (a mapping), got {_kind(schema)}"
            )
            return
        kind = schema.get("type")
        if kind is not None and kind != "object":
            self.plan_problem("input_schema", f'`type` must be "object" (inputs are an object), got {kind!r}')
        props = schema.get("properties")
        if props is not None and not isinstance(props, Mapping):
            self.plan_problem("input_schema", "`properties` must be a mapping")
        required = schema.get("required")
        if required is not None and (
            not isinstance(required, list) or not all(isinstance(r, str) for r in required)
        ):
            self.plan_problem("input_schema", "`required` must be a list of property names")
        from graphchat.jsonschema_util import refusal

        if (why := refusal(schema)) is not None:  # issue 10: never fetched, so refused up front
            self.plan_problem("input_schema", why)

    def load_solver(self, raw: Any) -> Solver | None:
        if not isinstance(raw, Mapping):
            self.plan_problem(
                "solver", f"must be a mapping {{query_to_answer, data, system_prompt?}}, got {_kind(raw)}"
            )
            return None

        def report(field: str, what: str) -> None:
            self.plan_problem(f"solver.{field}", what)

        doc, _ = self.normalise(raw, SOLVER_FIELDS, report, "the solver")
        scope = _Scope(["input", *self.top_ids])
        query = doc.get("query_to_answer")
        if not isinstance(query, str) or not query.strip():
            report("query_to_answer", "required: a non-empty string (a template)")
            query = None
        else:
            self.check_templates(query, scope, None, "solver.query_to_answer")
        system = doc.get("system_prompt")
        if system is not None:
            if not isinstance(system, str):
                report("system_prompt", f"must be a string, got {_kind(system)}")
            else:
                self.check_templates(system, scope, None, "solver.system_prompt")
        data = doc.get("data")
        if data is not None:
            self.check_templates(data, scope, None, "solver.data")
        if query is None:
            return None
        return Solver(query_to_answer=query, data=data, system_prompt=system)

    # -- steps

    def load_steps(self, raw_steps: list[Any], data: Mapping[str, Any]) -> list[Step]:
        raw_key = next((k for k in data if isinstance(k, str) and snake(k) == "steps"), "steps")
        # First pass: every top-level id, so a later one referenced early reads as "forward".
        for raw in raw_steps:
            if isinstance(raw, Mapping) and isinstance(raw.get("id"), str):
                self.top_ids.append(raw["id"])
        top_set = set(self.top_ids)
        self.collect_body_ids(raw_steps, top_set)
        steps: list[Step] = []
        earlier: list[str] = []
        for index, raw in enumerate(raw_steps):
            step = self.load_step(
                raw,
                label=None,
                position=f"#{index + 1}",
                scope=_Scope(["input", *earlier]),
                context=None,
                line_path=(raw_key, index),
            )
            if step is not None:
                steps.append(step)
            if step is not None and step.id:
                earlier.append(step.id)
        return steps

    def collect_body_ids(self, raw_steps: list[Any], top_set: set[str]) -> None:
        """Ids of body steps → their owner, to say "not visible here" instead of "unknown"."""
        for raw in raw_steps:
            if not isinstance(raw, Mapping) or not isinstance(raw.get("input"), Mapping):
                continue
            owner = raw.get("id") if isinstance(raw.get("id"), str) else "?"
            for key, value in raw["input"].items():
                if isinstance(key, str) and key in ("then", "else", "do") and isinstance(value, list):
                    for sub in value:
                        if isinstance(sub, Mapping) and isinstance(sub.get("id"), str):
                            self.body_owner.setdefault(sub["id"], f"{owner}/{key}")

    def check_id(self, raw_id: Any, label: str) -> str | None:
        if raw_id is None:
            self.step_problem(label, "id", "required: letters, digits and `_`, not starting with a digit")
            return None
        if not isinstance(raw_id, str):
            self.step_problem(label, "id", f"must be a string, got {_kind(raw_id)}")
            return None
        if not STEP_ID_RE.match(raw_id):
            self.step_problem(
                label, "id", f"{raw_id!r} must use letters, digits and `_`, not starting with a digit"
            )
            return None
        if raw_id in RESERVED_ROOTS:
            roots = ", ".join(sorted(RESERVED_ROOTS))
            self.step_problem(label, "id", f"{raw_id!r} is a reserved template root ({roots})")
            return None
        if raw_id in self.seen_ids:
            self.step_problem(
                label, "id", f"duplicate step id {raw_id!r} (first used by step {self.seen_ids[raw_id]})"
            )
            return None
        self.seen_ids[raw_id] = label
        return raw_id

    def load_step(
        self,
        raw: Any,
        *,
        label: str | None,
        position: str,
        scope: _Scope,
        context: tuple[str, str] | None,
        line_path: tuple[Any, ...],
        single: bool = False,
    ) -> Step | None:
        """One step. `context` is (owner control step, body name) for body steps, else None.

        `label` is the path prefix for body steps (`E1/then`); `single` marks a one-call body.
        """
        if single:
            where = label or position
        else:
            raw_id = raw.get("id") if isinstance(raw, Mapping) else None
            shown = raw_id if isinstance(raw_id, str) and raw_id else position
            where = f"{label}/{shown}" if label else str(shown)
        if not isinstance(raw, Mapping):
            self.step_problem(where, "step", f"must be a mapping {{id, tool_name, input}}, got {_kind(raw)}")
            return None

        def report(field: str, what: str) -> None:
            self.step_problem(where, field, what)

        allowed = BODY_CALL_FIELDS if single else STEP_FIELDS
        what = "a single-call body (no `id`: use a list of steps to name them)" if single else "a step"
        doc, _ = self.normalise(raw, allowed, report, what)
        step_id = None if single else self.check_id(doc.get("id"), where)

        tool = doc.get("tool_name")
        tool_ok = True
        if tool is None:
            report("tool_name", "required: a catalog tool or a control step")
        elif not isinstance(tool, str) or not tool.strip():
            report("tool_name", f"must be a non-empty string, got {_kind(tool)}")
            tool = None
        elif not self.check_tool_name(tool, context, report):
            tool_ok = False
        reasoning = doc.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, str):
            report("reasoning", f"must be a string, got {_kind(reasoning)}")
            reasoning = None

        raw_input = doc.get("input")
        is_control = tool in CONTROL_STEPS
        if raw_input is None:
            if is_control and "input" not in doc:
                report("input", f"required: `{tool}` takes its grammar in `input`")
            raw_input = {}
        elif not isinstance(raw_input, Mapping):
            report("input", f"must be a mapping, got {_kind(raw_input)}")
            raw_input = {}

        bodies: dict[str, Body] = {}
        if tool is not None and is_control:
            if tool_ok:
                new_input, bodies = self.load_control(
                    tool, raw_input, where, scope, context, line_path, report
                )
            else:  # a control step where it may not be: its grammar would only add noise
                new_input = dict(raw_input)
        else:
            new_input = dict(raw_input)
            self.check_templates(new_input, scope, where, "input")
        return Step(
            id=step_id,
            tool_name=tool or "",
            input=new_input,
            reasoning=reasoning,
            bodies=bodies,
            line=self.line(line_path),
        )

    def check_tool_name(self, tool: str, context: tuple[str, str] | None, report: Any) -> bool:
        if tool == "ask_user":
            report("tool_name", "`ask_user` is not allowed in plans: use an `ask` step")
            return False
        if tool.startswith("workbench__"):
            report("tool_name", f"{tool!r}: workbench__* tools do not exist in plans")
            return False
        if context is not None:
            owner, body = context
            if tool in NO_NEST:
                report(
                    "tool_name",
                    f"`{tool}` cannot nest inside `{owner}` `{body}`: call a sub-plan (plan__*) instead",
                )
                return False
            if tool == "exit" and owner != "decide":
                report("tool_name", f"`exit` is only allowed in decide branches, not in `{owner}` `{body}`")
                return False
        if tool in CONTROL_STEPS or tool == "plan_and_execute":
            return True
        if "__" not in tool:
            report(
                "tool_name",
                f"{tool!r} is neither a namespaced tool (server__tool, plan__x, builtin__x) "
                f"nor a control step ({', '.join(sorted(CONTROL_STEPS))})",
            )
            return False
        if not re.match(r"^[A-Za-z0-9_-]+$", tool):
            report("tool_name", f"{tool!r} is not a valid tool name ([A-Za-z0-9_-])")
            return False
        return True

    # -- control steps

    def load_control(
        self,
        tool: str,
        raw_input: Mapping[str, Any],
        where: str,
        scope: _Scope,
        context: tuple[str, str] | None,
        line_path: tuple[Any, ...],
        report_step: Any,
    ) -> tuple[dict[str, Any], dict[str, Body]]:
        def report(field: str, what: str) -> None:
            report_step(f"input.{field}", what)

        spec, raw_keys = self.normalise(raw_input, CONTROL_FIELDS[tool], report, f"`{tool}` input")
        bodies: dict[str, Body] = {}
        checker = getattr(self, f"control_{tool}")
        checker(spec, where, scope, report, context)
        if tool in ("decide", "map", "reduce"):
            names = ("then", "else") if tool == "decide" else ("do",)
            body_scope = scope if tool == "decide" else scope.child(pseudo=("item", "index"))
            if tool == "reduce":
                body_scope = body_scope.child(pseudo=("accumulator",))
            for name in names:
                if name not in spec:
                    if name != "else":
                        report(name, "required: one call {tool_name, input} or a list of steps with ids")
                    continue
                body = self.load_body(
                    spec[name],
                    name,
                    tool,
                    where,
                    body_scope,
                    (*line_path, "input", raw_keys.get(name, name)),
                    report,
                )
                if body is not None:
                    bodies[name] = body
                spec.pop(name, None)
        return spec, bodies

    def load_body(
        self,
        raw: Any,
        name: str,
        owner: str,
        where: str,
        scope: _Scope,
        line_path: tuple[Any, ...],
        report: Any,
    ) -> Body | None:
        label = f"{where}/{name}"
        if isinstance(raw, Mapping):
            step = self.load_step(
                raw,
                label=label,
                position=label,
                scope=scope,
                context=(owner, name),
                line_path=line_path,
                single=True,
            )
            return Body(steps=[step], single=True) if step is not None else None
        if isinstance(raw, list):
            if not raw:
                report(name, "an empty body: give one call or at least one step")
                return None
            steps: list[Step] = []
            body_ids: list[str] = []
            for index, item in enumerate(raw):
                step = self.load_step(
                    item,
                    label=label,
                    position=f"#{index + 1}",
                    scope=scope.child(body_ids),
                    context=(owner, name),
                    line_path=(*line_path, index),
                )
                if step is not None:
                    steps.append(step)
                    if step.id:
                        body_ids.append(step.id)
            return Body(steps=steps, single=False)
        report(name, f"must be one call {{tool_name, input}} or a list of steps, got {_kind(raw)}")
        return None

    def gate(self, spec: dict[str, Any], field: str, scope: _Scope, where: str, report: Any) -> None:
        from graphchat.plans.gates import gate_problems, is_infer

        gate = spec[field]
        if isinstance(gate, Mapping) and is_infer(gate):
            report(field, f"an inferred gate is written as `infer:` beside `{field}`, not inside it")
            return
        problems = gate_problems(gate)
        for problem in problems:
            report(field, problem)
        if not problems:
            self.check_templates(gate, scope, where, f"input.{field}")

    def one_of(self, spec: dict[str, Any], a: str, b: str, report: Any, *, required: bool) -> None:
        if a in spec and b in spec:
            report(a, f"`{a}` and `{b}` exclude each other: keep one")
        elif required and a not in spec and b not in spec:
            report(a, f"required: exactly one of `{a}` or `{b}`")

    def infer_field(self, spec: dict[str, Any], scope: _Scope, where: str, report: Any) -> None:
        if "infer" in spec:
            value = spec["infer"]
            if not isinstance(value, str) or not value.strip():
                report("infer", f"must be a non-empty yes/no question, got {_kind(value)}")
            else:
                self.check_templates(value, scope, where, "input.infer")
        if "model" in spec:
            model = spec["model"]
            if not isinstance(model, str) or not model.strip():
                report("model", f"must be a model name or role, got {_kind(model)}")
            else:
                self.check_templates(model, scope, where, "input.model")

    def string_field(
        self, spec: dict[str, Any], field: str, scope: _Scope, where: str, report: Any, *, required: bool
    ) -> None:
        if field not in spec or spec[field] is None:
            if required:
                report(field, "required: a string (a template)")
            return
        value = spec[field]
        if not isinstance(value, str) or (required and not value.strip()):
            report(field, f"must be a non-empty string, got {_kind(value)}")
            return
        self.check_templates(value, scope, where, f"input.{field}")

    def positive_int(self, spec: dict[str, Any], field: str, report: Any) -> None:
        if field in spec:
            value = spec[field]
            if isinstance(value, bool) or not isinstance(value, int):
                report(field, f"must be an integer ≥ 1, got {_kind(value)}")
            elif value < 1:
                report(field, f"must be at least 1, got {value}")

    def over_field(
        self, spec: dict[str, Any], field: str, scope: _Scope, where: str, report: Any, own: Iterable[str]
    ) -> None:
        """`over`/`initial` render before any item exists: the step's own pseudo-roots are not there."""
        if field not in spec:
            if field == "over":
                report(field, 'required: an array, usually a template like "{{E0.items}}"')
            return
        value = spec[field]
        if field == "over" and not isinstance(value, (str, list)):
            report(field, f"must render to an array (a template or a list), got {_kind(value)}")
            return
        for root in own:
            if root not in scope.all and root in _roots_of(value):
                inside = "`where`/`infer`" if field == "over" and "accumulator" not in own else "`do`"
                report(field, f"{{{{{root}}}}} is only available inside {inside}, not in `{field}`")
        self.check_templates(
            value, scope.child(pseudo=[r for r in own if r not in scope.all]), where, f"input.{field}"
        )

    def control_exit(
        self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any
    ) -> None:
        self.one_of(spec, "when", "infer", report, required=False)
        if "when" in spec:
            self.gate(spec, "when", scope, where, report)
        self.infer_field(spec, scope, where, report)
        status = spec.get("status")
        if status is None:
            report("status", "required: success or error")
        elif status not in ("success", "error"):
            report("status", f"must be success or error, got {status!r}")
        self.string_field(spec, "message", scope, where, report, required=False)
        if "output" in spec and spec["output"] is not None:
            if not isinstance(spec["output"], Mapping):
                report("output", f"must be a template map (a mapping), got {_kind(spec['output'])}")
            else:
                self.check_templates(spec["output"], scope, where, "input.output")

    def control_decide(
        self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any
    ) -> None:
        self.one_of(spec, "if", "infer", report, required=True)
        if "if" in spec:
            self.gate(spec, "if", scope, where, report)
        self.infer_field(spec, scope, where, report)

    def control_filter(
        self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any
    ) -> None:
        self.one_of(spec, "where", "infer", report, required=True)
        gate_scope = scope.child(pseudo=("item", "index"))
        if "where" in spec:
            self.gate(spec, "where", gate_scope, where, report)
        if "infer" in spec:
            self.infer_field({"infer": spec["infer"]}, gate_scope, where, report)
        if "model" in spec:
            self.infer_field({"model": spec["model"]}, scope, where, report)
        self.positive_int(spec, "concurrency", report)
        self.over_field(spec, "over", scope, where, report, ("item", "index"))

    def control_map(self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any) -> None:
        self.positive_int(spec, "concurrency", report)
        self.over_field(spec, "over", scope, where, report, ("item", "index", "accumulator"))

    def control_reduce(
        self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any
    ) -> None:
        self.over_field(spec, "over", scope, where, report, ("item", "index", "accumulator"))
        self.over_field(spec, "initial", scope, where, report, ("item", "index", "accumulator"))

    def control_agent(
        self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any
    ) -> None:
        self.string_field(spec, "prompt", scope, where, report, required=True)
        self.string_field(spec, "system_prompt", scope, where, report, required=False)
        schema = spec.get("output_schema")
        if "output_schema" not in spec:
            report("output_schema", "required: a JSON Schema of type object")
        elif not isinstance(schema, Mapping):
            report("output_schema", f"must be a JSON Schema object (a mapping), got {_kind(schema)}")
        elif schema.get("type") not in (None, "object"):
            report("output_schema", f'`type` must be "object", got {schema.get("type")!r}')
        elif schema.get("type") is None and not isinstance(schema.get("properties"), Mapping):
            report("output_schema", "must have `type: object` or declare `properties`")
        elif "properties" in schema and not isinstance(schema["properties"], Mapping):
            report("output_schema", "`properties` must be a mapping")
        else:
            from graphchat.jsonschema_util import refusal

            if (why := refusal(schema)) is not None:  # issue 10: never fetched, so refused up front
                report("output_schema", why)
        if "tools" in spec:
            tools = spec["tools"]
            if not isinstance(tools, list):
                report("tools", f"must be a list of tool names or `*` globs, got {_kind(tools)}")
            elif not tools:
                report(
                    "tools", "is empty: omit it for the whole catalog, or name at least one tool or pattern"
                )
            else:
                for pattern in tools:
                    if not isinstance(pattern, str) or not pattern:
                        report("tools", f"every entry must be a tool name or glob, got {_kind(pattern)}")
                    elif not TOOL_PATTERN_RE.match(pattern):
                        report(
                            "tools",
                            f"{pattern!r} is not a tool name or `*` glob (letters, digits, _ - * only)",
                        )
        self.positive_int(spec, "max_iterations", report)
        if "model" in spec:
            self.infer_field({"model": spec["model"]}, scope, where, report)

    def control_ask(self, spec: dict[str, Any], where: str, scope: _Scope, report: Any, context: Any) -> None:
        self.string_field(spec, "prompt", scope, where, report, required=True)
        schema_ok = False
        if "output_schema" not in spec:
            report(
                "output_schema",
                "required: a flat object schema of string/number/integer/boolean/enum properties",
            )
        else:
            problems = ask_schema_problems(spec["output_schema"])
            for problem in problems:
                report("output_schema", problem)
            schema_ok = not problems
        mode = spec.get("when_unanswered", "fail")
        if mode not in ("fail", "default"):
            report("when_unanswered", f"must be fail or default, got {mode!r}")
            return
        has_default = "default" in spec
        if mode == "default" and not has_default:
            report("when_unanswered", "is `default` but no `default` answer is given")
        if mode == "fail" and has_default:
            report(
                "default",
                "can never be used with when_unanswered: fail (set when_unanswered: default, or drop it)",
            )
        if has_default:
            default = spec["default"]
            if _has_template(default):
                self.check_templates(default, scope, where, "input.default")
            elif schema_ok:
                for problem in flat_answer_problems(spec["output_schema"], default):
                    report("default", f"does not match output_schema: {problem}")

    # -- templates

    def check_templates(self, value: Any, scope: _Scope, where: str | None, field: str) -> None:
        """Syntax, unknown roots and forward references of every template in `value`."""
        from graphchat.plans.template import TemplateError, parse

        def report(loc: str, what: str) -> None:
            full = f"{field}.{loc}" if loc else field
            if where is None:
                self.plan_problem(full, what)
            else:
                self.step_problem(where, full, what)

        known = scope.all
        for text, loc in _template_strings(value, ""):
            try:
                template = parse(text)
            except TemplateError as err:
                report(loc, f"template: {err}")
                continue
            for root in sorted(template.roots):
                if root not in known:
                    report(loc, self.explain_root(root, scope, where))
            for root in sorted(template.section_roots):
                # Inside a section a dotted path may read the item; only flag ids that are
                # certainly steps which have not run yet here.
                if root not in known and (root in self.top_ids or root in self.body_owner):
                    report(loc, self.explain_root(root, scope, where))

    def explain_root(self, root: str, scope: _Scope, where: str | None = None) -> str:
        ref = "{{" + root + "}}"
        if root in ("item", "index"):
            return f"{ref} is only available inside a map/reduce body or a filter gate"
        if root == "accumulator":
            return f"{ref} is only available inside a reduce body"
        if root in self.top_ids:
            return f"forward reference to step {root!r}: it has not run yet here (only `input` and earlier steps)"
        owner = self.body_owner.get(root)
        if owner is not None and where is not None and where.startswith(f"{owner}/"):
            return f"forward reference to step {root!r}: it runs later in this body"
        if root in self.body_owner:
            return f"{root!r} is a step of body {self.body_owner[root]} and is not visible here"
        known = ", ".join(sorted(scope.all, key=lambda r: (r != "input", r)))
        return f"unknown root {root!r} in {ref} (known here: {known})"


# --- ask schemas -------------------------------------------------------------------------------


def ask_schema_problems(schema: Any) -> list[str]:
    """Problems of an `ask` output_schema: a flat object of primitive or enum properties."""
    if not isinstance(schema, Mapping):
        return [f"must be a flat object schema (a mapping), got {_kind(schema)}"]
    problems: list[str] = []
    if schema.get("type", "object") != "object":
        problems.append(f'`type` must be "object", got {schema.get("type")!r}')
    props = schema.get("properties")
    if not isinstance(props, Mapping) or not props:
        problems.append("needs `properties`: at least one string/number/integer/boolean/enum field")
        return problems
    for name, prop in props.items():
        if not isinstance(prop, Mapping):
            problems.append(f"property {name!r} must be a schema (a mapping), got {_kind(prop)}")
            continue
        kind = prop.get("type")
        if "enum" in prop:
            enum = prop["enum"]
            if not isinstance(enum, list) or not enum:
                problems.append(f"property {name!r}: `enum` must be a non-empty list")
            elif not all(isinstance(v, (str, int, float, bool)) for v in enum):
                problems.append(f"property {name!r}: enum values must be strings, numbers or booleans")
            if kind is not None and kind not in ASK_TYPES:
                problems.append(f"property {name!r}: type {kind!r} is not allowed with an enum")
            continue
        if kind in ("object", "array"):
            problems.append(
                f"property {name!r} is {'a nested object' if kind == 'object' else 'an array'}: "
                "an ask takes only string/number/integer/boolean/enum fields"
            )
        elif kind not in ASK_TYPES:
            problems.append(
                f"property {name!r} needs `type` string/number/integer/boolean or an `enum`, got {kind!r}"
            )
    required = schema.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            problems.append("`required` must be a list of property names")
        else:
            for name in required:
                if name not in props:
                    problems.append(f"`required` names {name!r}, which is not a property")
    return problems


def flat_answer_problems(schema: Mapping[str, Any], answer: Any) -> list[str]:
    """Check an answer against a (valid) flat ask schema without importing jsonschema."""
    if not isinstance(answer, Mapping):
        return [f"an answer is an object, got {_kind(answer)}"]
    props: Mapping[str, Any] = schema.get("properties") or {}
    problems: list[str] = []
    for name in schema.get("required") or []:
        if name not in answer:
            problems.append(f"{name!r} is required")
    for name, value in answer.items():
        prop = props.get(name)
        if prop is None:
            if schema.get("additionalProperties") is False:
                problems.append(f"{name!r} is not a property of the schema")
            continue
        if "enum" in prop:
            if not any(_json_equal(value, option) for option in prop["enum"]):
                problems.append(f"{name!r}: {value!r} is not one of {prop['enum']}")
            continue
        kind = prop.get("type")
        ok = {
            "string": isinstance(value, str),
            "boolean": isinstance(value, bool),
            "integer": isinstance(value, int)
            and not isinstance(value, bool)
            or isinstance(value, float)
            and value.is_integer(),
            "number": isinstance(value, (int, float)) and not isinstance(value, bool),
        }.get(kind, True)
        if not ok:
            problems.append(f"{name!r}: expected {kind}, got {_kind(value)}")
    return problems


# --- serialising (plan show) -------------------------------------------------------------------


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """The normalised plan as snake_case data; unset optional fields are left out."""
    out: dict[str, Any] = {
        "identifier": plan.identifier,
        "name": plan.name,
        "description": plan.description,
    }
    if plan.exemplars:
        out["exemplars"] = list(plan.exemplars)
    if plan.requires_servers:
        out["requires_servers"] = list(plan.requires_servers)
    if plan.input_schema is not None:
        out["input_schema"] = plan.input_schema
    out["steps"] = [step_to_dict(step) for step in plan.steps]
    if plan.solver is not None:
        solver: dict[str, Any] = {"query_to_answer": plan.solver.query_to_answer}
        if plan.solver.system_prompt is not None:
            solver["system_prompt"] = plan.solver.system_prompt
        if plan.solver.data is not None:
            solver["data"] = plan.solver.data
        out["solver"] = solver
    if plan.output is not None:
        out["output"] = plan.output
    return out


def step_to_dict(step: Step) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if step.id is not None:
        out["id"] = step.id
    out["tool_name"] = step.tool_name
    data = dict(step.input)
    for name, body in step.bodies.items():
        if body.single:
            data[name] = step_to_dict(body.steps[0])
        else:
            data[name] = [step_to_dict(s) for s in body.steps]
    out["input"] = data
    if step.reasoning is not None:
        out["reasoning"] = step.reasoning
    return out


# --- helpers -----------------------------------------------------------------------------------


def _template_strings(value: Any, where: str) -> list[tuple[str, str]]:
    """(string holding `{{`, dotted location) for every string in a JSON tree, in order."""
    found: list[tuple[str, str]] = []
    if isinstance(value, str):
        if "{{" in value:
            found.append((value, where))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            found.extend(_template_strings(item, f"{where}.{key}" if where else str(key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found.extend(_template_strings(item, f"{where}.{i}" if where else str(i)))
    return found


def _roots_of(value: Any) -> set[str]:
    from graphchat.plans.template import TemplateError, parse

    roots: set[str] = set()
    for text, _ in _template_strings(value, ""):
        try:
            roots |= parse(text).roots
        except TemplateError:
            pass
    return roots


def _has_template(value: Any) -> bool:
    return bool(_template_strings(value, ""))


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return (
        bool(a == b)
        and type(a) is type(b)
        or (isinstance(a, (int, float)) and isinstance(b, (int, float)) and a == b)
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__
