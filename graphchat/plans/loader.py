"""YAML plan file → typed `Plan`, with every load-time rule of docs/plans.md checked.

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

from graphchat.catalog.base import similar_tools
from graphchat.errors import did_you_mean
from graphchat.jsonschema_util import refusal
from graphchat.naming import tool_name
from graphchat.plans.grammar import Report, Scope, Site, template_strings, yaml_kind
from graphchat.plans.model import RESERVED_ROOTS, Body, Plan, PlanLoadError, Solver, Step
from graphchat.plans.steps import CONTROL
from graphchat.template import TemplateError, parse
from graphchat.yamlfile import parse_yaml

__all__ = ["PlanLoadError", "load_plan", "load_plan_data", "load_plan_text", "locate", "plan_to_dict"]

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

IDENTIFIER_RE = re.compile(r"^[A-Za-z0-9_-]+$")
STEP_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SERVER_RE = re.compile(r"^[A-Za-z0-9_-]+$")
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


def locate(source: str | Path, problems: list[str]) -> list[str]:
    """`<file>:<line>: <problem>` for each `step <label>: <field>: …` or `<field>: …` problem
    of a plan file, where the line is known (read again: only on the unhappy path)."""
    import yaml

    try:
        node, _ = parse_yaml(Path(source).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return list(problems)
    finder = _Loader(str(source), node)
    out = []
    for problem in problems:
        line: int | None = None
        head, _, rest = problem.partition(": ")
        try:
            if head.startswith("step "):
                line = finder._step_line(head[5:], rest.partition(": ")[0])
            elif rest and " " not in head:
                line = finder._field_line(node, head)
        except Exception:  # a line is a courtesy: never a reason to fail
            line = None
        out.append(f"{source}:{line}: {problem}" if line else f"{source}: {problem}")
    return out


# --- the loader --------------------------------------------------------------------------------


def cached_tool_names(path: Path | None) -> list[str]:
    """The catalog names of the MCP tools the workspace of plan file `path` has cached (read
    from `catalog/cache/`, nothing started): what a bare tool name may have meant."""
    if path is None:
        return []
    import orjson

    for folder in path.resolve().parents:
        cache = folder / "catalog" / "cache"
        if cache.is_dir():
            names = []
            for file in sorted(cache.glob("*-*.json")):
                try:
                    doc = orjson.loads(file.read_bytes())
                    names += [tool_name(doc["server"], t["name"]) for t in doc["tools"]]
                except (OSError, ValueError, KeyError, TypeError):
                    continue
            return names
    return []


class _Loader:
    def __init__(self, source: str, node: Any) -> None:
        self.source = source
        self.node = node
        self.problems: list[str] = []
        self.lines: list[int | None] = []  # the line of each problem, when parsed from text
        self.top_ids: list[str] = []  # every top-level id, in order
        self.body_owner: dict[str, str] = {}  # body step id -> owning top-level step label
        self.seen_ids: dict[tuple[str, str], str] = {}  # (body label or "", id) -> first label
        self.warnings: list[str] = []  # ignored fields, as graph ignores them
        self.refused: set[str] = set()  # labels of steps whose tool name was refused
        self.path: Path | None = None

    # -- reporting

    def plan_problem(self, field: str, what: str) -> None:
        self.problems.append(f"{self.source}: {field}: {what}")
        self.lines.append(self._field_line(self.node, field) if self.node is not None else None)

    def step_problem(self, label: str, field: str, what: str) -> None:
        self.problems.append(f"{self.source}: step {label}: {field}: {what}")
        self.lines.append(self._step_line(label, field) if self.node is not None else None)

    def step_warning(self, label: str, field: str, what: str) -> None:
        line = self._step_line(label, field) if self.node is not None else None
        where = f"{self.source}:{line}" if line else self.source
        self.warnings.append(f"{where}: step {label}: {field}: {what}")

    def plan_warning(self, field: str, what: str) -> None:
        line = self._field_line(self.node, field) if self.node is not None else None
        where = f"{self.source}:{line}" if line else self.source
        self.warnings.append(f"{where}: {field}: {what}")

    # -- where a problem is (only on the unhappy path: lines cost nothing when a plan loads)

    @staticmethod
    def _child(node: Any, key: Any) -> Any:
        value = getattr(node, "value", None)
        if isinstance(value, list):
            if value and isinstance(value[0], tuple):
                for key_node, value_node in value:
                    if key_node.value == key:
                        return value_node
            elif isinstance(key, int) and 0 <= key < len(value):
                return value[key]
        return None

    def _field_line(self, node: Any, field: str) -> int | None:
        """The line of `field` (dotted, `input.if.value`) under `node`, or of its deepest part."""
        line = node.start_mark.line + 1
        for part in field.replace("[", ".").replace("]", "").split("."):
            key: Any = int(part) if part.isdigit() else part
            value = getattr(node, "value", None)
            if isinstance(value, list) and value and isinstance(value[0], tuple):
                found = next(((k, v) for k, v in value if k.value == key), None)
                if found is None:
                    return line
                line = found[0].start_mark.line + 1
                node = found[1]
            elif isinstance(value, list) and isinstance(key, int) and key < len(value):
                node = value[key]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    def _step_line(self, label: str, field: str) -> int | None:
        """Find the step a label names (`E1`, `E1/do`, `E1/then/E10`) and the field in it."""
        steps = self._child(self.node, "steps")
        parts = label.split("/")
        node = self._step_by_id(steps, parts[0])
        i = 1
        while node is not None and i < len(parts):
            body = self._child(self._child(node, "input"), parts[i])
            if body is None:
                break
            if i + 1 < len(parts) and isinstance(getattr(body, "value", None), list):
                node = self._step_by_id(body, parts[i + 1])
                i += 2
            else:
                node = body  # a one-call body (`do: {tool_name, input}`)
                i += 1
        if node is None:
            return None
        return self._field_line(node, field)

    def _step_by_id(self, steps: Any, step_id: str) -> Any:
        for item in getattr(steps, "value", None) or []:
            id_node = self._child(item, "id")
            if id_node is not None and id_node.value == step_id:
                return item
        if step_id.startswith("#") and step_id[1:].isdigit():  # a step without an id: by position
            return self._child(steps, int(step_id[1:]) - 1)
        return None

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
        self, raw: Mapping[Any, Any], allowed: Iterable[str], report: Any, what: str, ignore: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """snake_case the keys of a mapping; report unknown and doubly-spelled ones.

        With `ignore` (a reporter of warnings), an unknown field is dropped with a warning
        instead: graph's steps and solver (serde without `deny_unknown_fields`) ignore them.
        Returns (normalised mapping, snake key -> raw key).
        """
        allowed = tuple(allowed)
        out: dict[str, Any] = {}
        raw_keys: dict[str, Any] = {}
        for key, value in raw.items():
            if not isinstance(key, str):
                report(str(key), f"field names must be strings, got {yaml_kind(key)}")
                continue
            name = snake(key)
            if name not in allowed:
                if ignore is not None:
                    ignore(key, f"unknown field in {what}, ignored (allowed: {', '.join(allowed)})")
                else:
                    import difflib

                    close = difflib.get_close_matches(name, allowed, n=1, cutoff=0.6)
                    hint = f": did you mean `{close[0]}`?" if close and close[0] not in raw else ""
                    report(key, f"unknown field in {what} (allowed: {', '.join(allowed)}){hint}")
                continue
            if name in out:
                report(key, f"given twice (as `{raw_keys[name]}` and `{key}`)")
                continue
            out[name] = value
            raw_keys[name] = key
        return out, raw_keys

    # -- plan

    def load(self, data: Any, path: Path | None) -> Plan:
        self.path = path
        if not isinstance(data, Mapping):
            got = "an empty file" if data is None else yaml_kind(data)
            self.plan_problem("plan", f"a plan file must hold a mapping (identifier, name, ...), got {got}")
            raise PlanLoadError(self.source, self.problems, self.lines)
        doc, _ = self.normalise(data, PLAN_FIELDS, self.plan_problem, "a plan")

        identifier = self.required_string(doc, "identifier")
        if identifier is not None and not IDENTIFIER_RE.match(identifier):
            self.plan_problem("identifier", f"{identifier!r} must use only letters, digits, `_` and `-`")
        name = self.required_string(doc, "name", empty_ok=True)
        description = self.required_string(doc, "description", empty_ok=True)
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
            self.plan_problem("steps", f"must be a list of steps, got {yaml_kind(raw_steps)}")
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
                self.plan_problem("output", f"must be a template map (a mapping), got {yaml_kind(output)}")
            else:
                self.check_templates(output, Scope(["input", *self.top_ids]), None, "output")
        if solver is not None and output is not None:
            self.plan_problem("solver", "`solver` and `output` exclude each other: keep one")

        plan = Plan(
            identifier=identifier or "",
            name=name or "",
            description=description or "",
            steps=steps,
            exemplars=exemplars,
            requires_servers=requires,
            input_schema=input_schema,
            solver=solver,
            output=output,
            path=path,
            warnings=self.warnings,
        )
        if self.problems:
            # What did load, for the checks after loading (tools, data flow): all problems at once.
            raise PlanLoadError(self.source, self.problems, self.lines, partial=plan, refused=self.refused)
        return plan

    def required_string(self, doc: Mapping[str, Any], field: str, *, empty_ok: bool = False) -> str | None:
        """A required string; `empty_ok` lets "" load (graph's `name`/`description` are plain
        `String`s)."""
        if field not in doc or doc[field] is None:
            self.plan_problem(field, "required")
            return None
        value = doc[field]
        if isinstance(value, str) and empty_ok:
            return value
        if not isinstance(value, str) or not value.strip():
            self.plan_problem(field, f"must be a non-empty string, got {yaml_kind(value)}")
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
                "input_schema", f"must be a JSON Schema object (a mapping), got {yaml_kind(schema)}"
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

        if (why := refusal(schema)) is not None:  # issue 10: never fetched, so refused up front
            self.plan_problem("input_schema", why)

    def load_solver(self, raw: Any) -> Solver | None:
        if not isinstance(raw, Mapping):
            self.plan_problem(
                "solver", f"must be a mapping {{query_to_answer, data, system_prompt?}}, got {yaml_kind(raw)}"
            )
            return None

        def report(field: str, what: str) -> None:
            self.plan_problem(f"solver.{field}", what)

        def ignore(field: str, what: str) -> None:
            self.plan_warning(f"solver.{field}", what)

        doc, _ = self.normalise(raw, SOLVER_FIELDS, report, "the solver", ignore)
        scope = Scope(["input", *self.top_ids])
        # graph's SolverData defaults `query_to_answer` to "" and `data` to {}: both may be left out.
        query = doc.get("query_to_answer", "")
        if query is None:
            query = ""
        if not isinstance(query, str):
            report("query_to_answer", f"must be a string (a template), got {yaml_kind(query)}")
            query = None
        else:
            self.check_templates(query, scope, None, "solver.query_to_answer")
        system = doc.get("system_prompt")
        if system is not None and not isinstance(system, str):  # sent verbatim: no templates
            report("system_prompt", f"must be a string, got {yaml_kind(system)}")
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
                scope=Scope(["input", *earlier]),
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
        body_names = {name for control in CONTROL.values() for name in control.BODIES}
        for raw in raw_steps:
            if not isinstance(raw, Mapping) or not isinstance(raw.get("input"), Mapping):
                continue
            owner = raw.get("id") if isinstance(raw.get("id"), str) else "?"
            for key, value in raw["input"].items():
                if isinstance(key, str) and key in body_names and isinstance(value, list):
                    for sub in value:
                        if isinstance(sub, Mapping) and isinstance(sub.get("id"), str):
                            self.body_owner.setdefault(sub["id"], f"{owner}/{key}")

    def check_id(self, raw_id: Any, label: str) -> str | None:
        if raw_id is None:
            self.step_problem(label, "id", "required: letters, digits and `_`, not starting with a digit")
            return None
        if not isinstance(raw_id, str):
            self.step_problem(label, "id", f"must be a string, got {yaml_kind(raw_id)}")
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
        # As graph (doc.rs, body.rs): ids are unique among the top-level steps and within one
        # body; a body step may not reuse a top-level id, but `then` and `else` of one decide,
        # or two different bodies, may use the same id.
        body = label.rsplit("/", 1)[0] if "/" in label else ""
        first = self.seen_ids.get((body, raw_id))
        if first is not None:
            self.step_problem(label, "id", f"duplicate step id {raw_id!r} (first used by step {first})")
            return None
        if body and raw_id in self.top_ids:
            self.step_problem(label, "id", f"duplicate step id {raw_id!r}: a top-level step has this id")
            return None
        self.seen_ids[(body, raw_id)] = label
        return raw_id

    def load_step(
        self,
        raw: Any,
        *,
        label: str | None,
        position: str,
        scope: Scope,
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
            self.step_problem(
                where, "step", f"must be a mapping {{id, tool_name, input}}, got {yaml_kind(raw)}"
            )
            return None

        def report(field: str, what: str) -> None:
            self.step_problem(where, field, what)

        def ignore(field: str, what: str) -> None:
            self.step_warning(where, field, what)

        allowed = BODY_CALL_FIELDS if single else STEP_FIELDS
        what = "a single-call body (no `id`: use a list of steps to name them)" if single else "a step"
        # graph's `Step` ignores unknown fields (e.g. `timeout: 30`); an `id` on a one-call body
        # stays an error, it names nothing.
        doc, _ = self.normalise(raw, allowed, report, what, None if single else ignore)
        step_id = None if single else self.check_id(doc.get("id"), where)

        tool = doc.get("tool_name")
        tool_ok = True
        if tool is None:
            report("tool_name", "required: a catalog tool or a control step")
        elif not isinstance(tool, str) or not tool.strip():
            report("tool_name", f"must be a non-empty string, got {yaml_kind(tool)}")
            tool = None
            self.refused.add(where)
        elif not self.check_tool_name(tool, context, report):
            tool_ok = False
            self.refused.add(where)
        reasoning = doc.get("reasoning")
        if reasoning is not None and not isinstance(reasoning, str):
            report("reasoning", f"must be a string, got {yaml_kind(reasoning)}")
            reasoning = None

        raw_input = doc.get("input")
        is_control = tool in CONTROL
        if raw_input is None:
            if "input" not in doc:  # graph's `Step.input` has no default: required on every step
                why = f"`{tool}` takes its grammar in `input`" if is_control else "give `input: {}` for none"
                report("input", f"required: {why}")
            raw_input = {}
        elif not isinstance(raw_input, Mapping):
            report("input", f"must be a mapping, got {yaml_kind(raw_input)}")
            raw_input = {}

        bodies: dict[str, Body] = {}
        if tool is not None and is_control:
            if tool_ok:
                new_input, bodies = self.load_control(tool, raw_input, where, scope, line_path, report)
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
        control = CONTROL.get(tool)
        if context is not None and control is not None:
            owner, body = context
            if control.BODIES:
                report(
                    "tool_name",
                    f"`{tool}` cannot nest inside `{owner}` `{body}`: call a sub-plan (plan__*) instead",
                )
                return False
            if control.ONLY_IN is not None and owner != control.ONLY_IN:
                report(
                    "tool_name",
                    f"`{tool}` is only allowed in {control.ONLY_IN} branches, not in `{owner}` `{body}`",
                )
                return False
        if control is not None or tool == "plan_and_execute":
            return True
        if "__" not in tool:
            guess = did_you_mean(
                tool, (), close=similar_tools(tool, [*CONTROL, *cached_tool_names(self.path)])
            )
            report(
                "tool_name",
                f"{tool!r} is neither a namespaced tool (server__tool, plan__x, builtin__x) "
                f"nor a control step ({', '.join(sorted(CONTROL))})" + (f"; {guess}" if guess else ""),
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
        scope: Scope,
        line_path: tuple[Any, ...],
        report_step: Report,
    ) -> tuple[dict[str, Any], dict[str, Body]]:
        def report(field: str, what: str) -> None:
            report_step(f"input.{field}", what)

        control = CONTROL[tool]
        spec, raw_keys = self.normalise(raw_input, control.FIELDS, report, f"`{tool}` input")
        site = Site(tool, spec, raw_keys, where, scope, line_path, report, self)
        control.load(site)
        return spec, site.bodies

    def load_body(
        self,
        raw: Any,
        name: str,
        owner: str,
        where: str,
        scope: Scope,
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
        report(name, f"must be one call {{tool_name, input}} or a list of steps, got {yaml_kind(raw)}")
        return None

    # -- templates

    def check_templates(self, value: Any, scope: Scope, where: str | None, field: str) -> None:
        """Syntax, unknown roots and forward references of every template in `value`."""

        def report(loc: str, what: str) -> None:
            full = f"{field}.{loc}" if loc else field
            if where is None:
                self.plan_problem(full, what)
            else:
                self.step_problem(where, full, what)

        known = scope.all
        for text, loc in template_strings(value, ""):
            try:
                template = parse(text)
            except TemplateError as err:
                report(loc, f"template: {err}")
                continue
            for root in sorted(template.roots):
                if root not in known:
                    report(loc, self.explain_root(root, scope, where))
            for root in sorted(template.section_roots - template.roots):
                # Inside a section a bare key reads the item, but a dotted path's first segment
                # is a root, as graph's `referenced_roots` (template/mod.rs) has it: a
                # misspelt `{{E9.x}}` in `{{#E0.values}}` is caught here.
                if root not in known:
                    report(loc, self.explain_root(root, scope, where))

    def explain_root(self, root: str, scope: Scope, where: str | None = None) -> str:
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
