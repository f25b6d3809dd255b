"""Drafting a plan with the `planner` model role: what it sees, what it is asked, and the
validate-and-retry loop. Shared by `graphchat plan draft` and the planner of `plan_and_execute`
(which passes the failing step, the error and the available keys as extra `context`).

- `catalog_digest`: every tool a plan may call — name, description, input schema and output
  shape (declared schema, else the shape cache's learned shape marked as observed, else none,
  and then the planner is told to reference the whole result) — and the workspace's plans.
- `planner_messages`: the system prompt (a concise description of the plan language) and the
  request (goal, digest, context sections, feedback).
- `draft_plan`: one model call per attempt, asking for the plan document as one JSON object
  with a response schema; a fenced ```yaml / ```json block is accepted when a provider ignores
  the schema. Every draft is checked with the loader and catalog validation `plan validate`
  uses; the problems go back to the model, up to `attempts` calls in all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from graphchat.llm.jsonreply import parse_json_reply
from graphchat.plans.discovery import discover, relative_problems
from graphchat.plans.loader import PLAN_FIELDS, STEP_FIELDS, load_plan_text
from graphchat.plans.model import Plan, PlanLoadError
from graphchat.plans.splice_types import learned_shapes
from graphchat.plans.validate import known_servers, partial_problems, validate_against_catalog
from graphchat.shapes import ShapeStore
from graphchat.threads import lines as ev
from graphchat.threads.repair import shorten_tool_result
from graphchat.workspace import builtin_prompt
from graphchat.yamlfile import yaml12_dumper, yaml12_loader

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog, ToolSpec
    from graphchat.llm.types import ModelClient, Usage
    from graphchat.workspace import Settings

# Tools a plan may not call: they are left out of what the planner sees.
NOT_IN_PLANS = frozenset({"ask_user", "plan_and_execute"})
DIGEST_CHARS = 60_000  # a catalog whose entries are longer than this is shown compactly
SCHEMA_CHARS = 1500  # an input schema or output shape longer than this is cut (marked)
EXAMPLE_CHARS = 300  # a learned example is shown only when it is this short
# Results known without a declared schema (what the tool's description promises).
KNOWN_OUTPUTS = {"builtin__infer": "{text: string}; with output_schema: an object of that schema"}
SOURCE = "draft"  # the name drafts are loaded under (stripped from the problems)

# The response schema: the plan document, with the plan's fields at the top level.
PLAN_DOCUMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "identifier": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$"},
        "name": {"type": "string"},
        "description": {"type": "string"},
        "exemplars": {"type": "array", "items": {"type": "string"}},
        "input_schema": {"type": "object"},
        "steps": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "tool_name": {"type": "string"},
                    "input": {"type": "object"},
                    "reasoning": {"type": "string"},
                },
                "required": ["id", "tool_name", "input"],
            },
        },
        "solver": {
            "type": "object",
            "properties": {
                "query_to_answer": {"type": "string"},
                "data": {},
                "system_prompt": {"type": "string"},
            },
            "required": ["query_to_answer"],
        },
        "output": {"type": "object"},
    },
    "required": ["identifier", "name", "description", "steps"],
}

PLANNER_SYSTEM = """\
You are the planner of graphchat. You write plans: workflows that call catalog tools in order, \
with no model call between steps unless the plan puts one there. Reply with the plan document \
only: one JSON object with the fields below at the top level.

# The plan document
- identifier: [A-Za-z0-9_-]+, snake_case words, not used by another plan of the workspace.
- name: a short display name. description: one sentence saying what the plan does.
- exemplars (optional): example requests the plan answers.
- input_schema (optional): JSON Schema of the plan's input object \
({"type": "object", "properties": {...}, "required": [...]}), with defaults where sensible. \
Inputs are read as {{input.name}}. Make values the user may want to change inputs.
- steps: the steps, run in order.
- The finish, at most one of: output: a map of templates rendered into the plan's JSON result \
(no model call); solver: {"query_to_answer", "data", "system_prompt"?}: one model call writes \
a report for a person from the rendered data; neither: the plan is silent.

A step is {"id", "tool_name", "input", "reasoning"?}. id: letters, digits and _ (E0, E1, … is \
usual), unique in the whole plan (body steps too), never input, item, index, accumulator or \
length. tool_name: a tool of the catalog, spelled exactly as listed, or a control step. input: \
the tool's arguments, as its input schema says.

# Templates
Every string in a step's input, in output and in solver is a template. {{path}} reads a value. Roots: `input` and the \
ids of EARLIER steps only (a step that runs later cannot be read); inside map/reduce bodies and \
filter gates also `item` and `index`; in reduce bodies `accumulator`. A path is dot-separated; \
a number indexes an array ({{E0.items.0.id}}); a last segment `length` is the length of an \
array or string. A string that is exactly one {{path}} keeps the value's type (array, object, \
number, boolean); text around it makes a string. Sections: {{#E0.items}}{{name}}, \
{{/E0.items}} repeats for each item (with {{@index}}, {{@first}}, {{@last}}), \
{{^E0.items}}none{{/E0.items}} renders when empty. \
Nothing else exists: no helpers, filters, expressions or partials.
Read only fields a tool's output shape shows. When a tool's output is unknown, reference its \
whole result ({{E0}}) and let a model read it (builtin__infer, an agent step, or the solver).

# Control steps (as tool_name, with their fields in input)
- exit: {"when"?: gate, "infer"?: question, "status": "success"|"error", "message", \
"output"?: map}: ends the plan when the gate holds (always, without a gate).
- decide: {"if": gate | "infer": question, "then": body, "else"?: body} → \
{branch, verdict, reason, result}.
- filter: {"over": array, "where": gate on {{item}} | "infer": question, "concurrency"?} → \
{count, items, dropped, dropped_count}.
- map: {"over": array, "do": body using {{item}}/{{index}}, "concurrency"?} → {count, results}.
- reduce: {"over": array, "do": body using {{accumulator}}, "initial"?} → {count, result}.
- agent: {"prompt", "output_schema": object schema, "tools"?: names or globs, \
"max_iterations"?} → {output, iterations, tools_called, final}.
- ask: {"prompt", "output_schema": flat object of string/number/integer/boolean/enum fields, \
"when_unanswered"?: "fail"|"default", "default"?} → {answer, answered}.
A gate is {"value": "{{…}}", "op": eq|ne|gt|lt|gte|lte|contains|empty|not_empty, "to": value} \
(no "to" for empty/not_empty), or {"all": [gates]}, {"any": [gates]}, {"not": gate}; \
"infer": "<a yes/no question>" asks a model instead.
A body is one call {"tool_name", "input"} without id, or a list of steps with ids (the last \
one's result is the body's result). In a body: tool calls, agent, ask, filter, and exit in \
decide branches; never decide, map or reduce (call a plan__* tool instead).
Never use ask_user (use an ask step).

# Good plans
- As few steps as do the job; tools before model calls; map for per-item work, with \
builtin__infer inside the map for per-item judgement.
- Do not invent data: where data may be missing, end with an exit (status success and a message \
saying what was not found) instead of guessing.
- A plan that checks something ends in gated exits: success when the check holds, error when not.
- output when the result is data for a program; solver when a person wants a written answer.

# Example (its tools are illustrative)
{"identifier": "dst_zones", "name": "DST zones", "description": "Which of the given timezones \
observe daylight saving time now.", "input_schema": {"type": "object", "properties": {"zones": \
{"type": "array", "items": {"type": "string"}, "default": ["Europe/Berlin", "Asia/Tokyo"]}}}, \
"steps": [{"id": "E0", "tool_name": "map", "input": {"over": "{{input.zones}}", \
"concurrency": 4, "do": {"tool_name": "time__get_current_time", "input": {"timezone": \
"{{item}}"}}}}, {"id": "E1", "tool_name": "filter", "input": {"over": "{{E0.results}}", \
"where": {"value": "{{item.is_dst}}", "op": "eq", "to": true}}}], "output": {"on_dst": \
"{{E1.items}}", "count": "{{E1.count}}"}}"""


# --- what the planner sees --------------------------------------------------------------------


def _json(value: Any, limit: int = SCHEMA_CHARS) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def sketch(schema: Any, *, defs: Mapping[str, Any] | None = None, depth: int = 0) -> str:
    """A JSON-schema shape as a compact sketch a model reads at a glance:
    `{id: integer, tags?: [string], meta: {<key>: number}}` (`?` = not always present)."""
    if not isinstance(schema, Mapping) or not schema:
        return "any"
    if depth > 8:
        return "…"
    if defs is None:
        found = schema.get("$defs") or schema.get("definitions")
        defs = found if isinstance(found, Mapping) else {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        target = defs.get(name)
        return sketch(target, defs=defs, depth=depth + 1) if isinstance(target, Mapping) else name
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return " | ".join(sketch(b, defs=defs, depth=depth + 1) for b in branches)
    if "enum" in schema and isinstance(schema["enum"], list):
        return " | ".join(_json(v, 60) for v in schema["enum"][:8])
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if not kinds and ("properties" in schema or "additionalProperties" in schema):
        kinds = ["object"]
    parts: list[str] = []
    for one in kinds:
        if one == "object":
            props = schema.get("properties")
            extra = schema.get("additionalProperties")
            if isinstance(props, Mapping) and props:
                required = set(schema.get("required") or [])
                fields = [
                    f"{name}{'' if name in required else '?'}: {sketch(sub, defs=defs, depth=depth + 1)}"
                    for name, sub in props.items()
                ]
                parts.append("{" + ", ".join(fields) + "}")
            elif isinstance(extra, Mapping):
                parts.append("{<key>: " + sketch(extra, defs=defs, depth=depth + 1) + "}")
            else:
                parts.append("object")
        elif one == "array":
            items = schema.get("items")
            parts.append("[" + sketch(items, defs=defs, depth=depth + 1) + "]" if items else "array")
        elif isinstance(one, str):
            parts.append(one)
    return " | ".join(parts) if parts else "any"


def output_shape(spec: ToolSpec, shapes: Any, plans: Mapping[str, Plan] | None = None) -> tuple[str, str]:
    """(`declared` | `observed` | `none`, the shape's text) of one tool's result."""
    if spec.output_schema:
        return "declared", sketch(spec.output_schema)
    if spec.name in KNOWN_OUTPUTS:
        return "declared", KNOWN_OUTPUTS[spec.name]
    stored = shapes.get(spec.name) if shapes is not None else None
    if isinstance(stored, Mapping) and isinstance(stored.get("schema"), Mapping):
        kind = "declared" if stored.get("source") == "declared" else "observed"
        text = sketch(stored["schema"])
        example = stored.get("example")
        if kind == "observed" and example is not None:
            shown = _json(example, EXAMPLE_CHARS + 1)
            if len(shown) <= EXAMPLE_CHARS:
                text += f"\n  example: {shown}"
        return kind, text
    plan = (plans or {}).get(spec.meta.get("plan") or "") if spec.source == "plan" else None
    if plan is not None and plan.finish == "solver":
        return "declared", "{answer: string}"
    if plan is not None and plan.finish == "output":
        return "declared", "the plan's output map: " + _json(plan.output)
    return "none", ""


def _tool_entry(spec: ToolSpec, shapes: Any, plans: Mapping[str, Plan], *, compact: bool = False) -> str:
    """One tool for the planner; `compact` (a big catalog): a shorter description, the input
    schema sketched, shorter output shapes and no examples."""
    lines = [f"## {spec.name}"]
    description = " ".join((spec.description or "").split())
    if description:
        lines.append(description[: 200 if compact else 600])
    schema = spec.input_schema or {"type": "object", "properties": {}}
    lines.append("input: " + (sketch(schema)[:400] if compact else _json(schema)))
    kind, shape = output_shape(spec, shapes, plans)
    if compact:
        shape = shape.split("\n", 1)[0][:400]
    if kind == "declared":
        lines.append("output (declared): " + shape[:SCHEMA_CHARS])
    elif kind == "observed":
        lines.append("output (observed in earlier calls, may vary): " + shape[: SCHEMA_CHARS + EXAMPLE_CHARS])
    else:
        lines.append("output: unknown — reference the whole result, not fields inside it")
    return "\n".join(lines)


def _plan_entry(plan: Plan) -> str:
    steps = ", ".join(f"{s.label} {s.tool_name}" for s in plan.steps)
    where = f" ({plan.path.name})" if plan.path is not None else ""
    return f"- {plan.identifier}{where}: {plan.name} — {plan.description} [{plan.finish}; steps: {steps}]"


def catalog_digest(catalog: Catalog, settings: Settings, *, plans: Mapping[str, Plan] | None = None) -> str:
    """The catalog as the planner sees it (tools with their shapes), then the workspace's plans."""
    if plans is None:
        plans = workspace_plans(settings)
    shapes = ShapeStore(settings.catalog_dir / "shapes")
    specs = sorted(
        (s for s in catalog.list() if s.name not in NOT_IN_PLANS),
        key=lambda s: s.name,
    )
    tools = [_tool_entry(spec, shapes, plans) for spec in specs] or ["(no tools)"]
    if sum(len(t) for t in tools) > DIGEST_CHARS:
        tools = [_tool_entry(spec, shapes, plans, compact=True) for spec in specs]
    listed = [_plan_entry(p) for p in sorted(plans.values(), key=lambda p: p.identifier)] or ["(none yet)"]
    return (
        "# Catalog: the tools a plan may call\n\n"
        + "\n\n".join(tools)
        + "\n\n# The workspace's plans (each is also the tool plan__<identifier>)\n"
        + "\n".join(listed)
    )


def workspace_plans(settings: Settings) -> dict[str, Plan]:
    return dict(discover(settings.plans_dir).plans)


def thread_exchange(
    events: Iterable[Mapping[str, Any]], *, max_result_chars: int = 2000, max_chars: int = 40_000
) -> str:
    """A thread's conversation as text: user and assistant messages, tool calls with their
    arguments, and their results (each cut to `max_result_chars`). A longer conversation than
    `max_chars` keeps its first message and its latest part."""
    out: list[str] = []
    for event in events:
        kind = event.get("kind")
        if kind == ev.USER:
            out.append("user: " + ev.text_of(event.get("content")))
        elif kind == ev.ASSISTANT:
            if event.get("content"):
                out.append("assistant: " + str(event["content"]))
            for call in event.get("tool_calls") or []:
                if isinstance(call, Mapping):
                    out.append(f"tool call {call.get('name', '')}: {call.get('arguments', '')}")
        elif kind == ev.TOOL_RESULT:
            mark = " (error)" if event.get("is_error") else ""
            content = shorten_tool_result(str(event.get("content", "")), max_result_chars)
            out.append(f"tool result {event.get('name', '')}{mark}: {content}")
        elif kind == ev.TURN_FAILED:
            out.append(f"(turn failed: {event.get('error', '')})")
    text = "\n".join(out)
    if len(text) <= max_chars or not out:
        return text
    head = out[0][: max_chars // 4]
    tail = text[-(max_chars - len(head)) :]
    return f"{head}\n[… the middle of the conversation was cut …]\n…{tail}"


# --- what the planner is asked ----------------------------------------------------------------

Context = Mapping[str, str] | str | None


def _feedback_lines(feedback: str | Sequence[str] | None) -> list[str]:
    if not feedback:
        return []
    return [feedback] if isinstance(feedback, str) else list(feedback)


def planner_messages(
    goal: str,
    digest: str,
    *,
    context: Context = None,
    feedback: str | Sequence[str] | None = None,
    identifier: str | None = None,
    system: str = PLANNER_SYSTEM,
) -> list[dict[str, Any]]:
    """The first request of a draft: the plan language (`system`: PLANNER_SYSTEM, or
    `prompts.planner`), then goal, catalog, context, feedback."""
    sections = [f"# Goal\n{goal.strip()}", digest]
    if isinstance(context, str) and context.strip():
        sections.append(f"# Context\n{context.strip()}")
    elif isinstance(context, Mapping):
        sections += [f"# {title}\n{text.strip()}" for title, text in context.items() if text]
    lines = _feedback_lines(feedback)
    if lines:
        sections.append("# To take into account\n" + "\n".join(f"- {line}" for line in lines))
    ask = "Write the plan for the goal. Reply with the plan document as one JSON object."
    if identifier:
        ask += f' Its identifier is "{identifier}".'
    sections.append(ask)
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n\n".join(sections)},
    ]


def retry_message(problems: Sequence[str]) -> dict[str, Any]:
    listed = "\n".join(f"- {p}" for p in problems)
    return {
        "role": "user",
        "content": f"That plan does not validate:\n{listed}\n\nFix every problem and reply with the "
        "whole corrected plan document as one JSON object.",
    }


# --- reading a reply --------------------------------------------------------------------------


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every ``` fenced block, in order."""
    import re

    return [
        (m.group(1).lower(), m.group(2))
        for m in re.finditer(r"```[ \t]*([A-Za-z]*)[^\n]*\n(.*?)```", text, re.DOTALL)
    ]


def read_plan_reply(text: str) -> dict[str, Any]:
    """The plan document in a reply: the whole text as JSON, else a fenced ```yaml or ```json
    block, else the outermost {...}. ValueError saying why when there is none."""
    import yaml

    found: Any = None
    stripped = text.strip()
    if not stripped:
        raise ValueError("the reply was empty")
    why: list[str] = []  # what did not parse, so the planner can fix its form
    try:
        found = orjson.loads(stripped)
    except orjson.JSONDecodeError as exc:
        if stripped.startswith("{"):
            why.append(f"it is not valid JSON ({exc})")
        for lang, body in _fenced_blocks(stripped):
            if lang not in ("", "json", "yaml", "yml"):
                continue
            try:
                found = orjson.loads(body) if lang == "json" else yaml.load(body, Loader=yaml12_loader())  # noqa: S506
            except (orjson.JSONDecodeError, yaml.YAMLError) as err:
                detail = " ".join(str(err).split())[:200]
                hint = "; quote strings that start with {{" if lang != "json" else ""
                why.append(f"its ```{lang} block does not parse ({detail}{hint})")
                continue
            if isinstance(found, Mapping):
                break
        if not isinstance(found, Mapping):
            try:
                found = parse_json_reply(stripped)
            except ValueError:
                because = f": {'; '.join(why)}" if why else ""
                raise ValueError(
                    f"the reply holds no plan document (one JSON object, or a ```yaml block){because}"
                ) from None
    if isinstance(found, Mapping) and set(found) == {"plan"} and isinstance(found["plan"], Mapping):
        found = found["plan"]  # a wrapped document: the plan's fields belong at the top level
    if not isinstance(found, Mapping):
        raise ValueError(f"the plan document must be a JSON object, got {type(found).__name__}")
    return dict(found)


# --- checking a draft ---------------------------------------------------------------------------


def _ordered(doc: Mapping[str, Any], order: Sequence[str]) -> dict[str, Any]:
    head = {k: doc[k] for k in order if k in doc}
    return {**head, **{k: v for k, v in doc.items() if k not in head}}


def normalise_document(
    doc: Mapping[str, Any],
    catalog: Catalog,
    *,
    identifier: str | None = None,
    identity: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The draft as it will be written: fields in the usual order, the identifier forced when
    one is given (and every field of `identity`: `plan draft --from`), and `requires_servers`
    naming the MCP servers whose tools it calls."""
    out = _ordered(doc, PLAN_FIELDS)
    forced = {**({"identifier": identifier} if identifier else {}), **(identity or {})}
    if forced:
        out.update(forced)
        out = _ordered(out, PLAN_FIELDS)
    steps = out.get("steps")
    if isinstance(steps, list):
        out["steps"] = [_ordered(s, STEP_FIELDS) if isinstance(s, Mapping) else s for s in steps]
        servers = _servers_called(out["steps"], catalog)
        declared = out.get("requires_servers")
        if servers and (declared is None or isinstance(declared, list)):
            merged = [*(declared or []), *(s for s in servers if s not in (declared or []))]
            out["requires_servers"] = merged
            out = _ordered(out, PLAN_FIELDS)
    return out


def _servers_called(steps: list[Any], catalog: Catalog) -> list[str]:
    found: list[str] = []

    def visit(value: Any) -> None:
        if isinstance(value, Mapping):
            tool = value.get("tool_name") or value.get("toolName")
            spec = catalog.get(tool) if isinstance(tool, str) else None
            if spec is not None and spec.source.startswith("mcp:"):
                server = spec.source[4:]
                if server not in found:
                    found.append(server)
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    visit(steps)
    return found


def plan_yaml(doc: Mapping[str, Any], *, header: str | None = None) -> str:
    """The plan document as a plan file (block style, keys in the given order)."""
    import yaml

    class _Dumper(yaml12_dumper()):  # type: ignore[misc]
        pass

    def text(dumper: Any, value: str) -> Any:
        style = "|" if "\n" in value and not value.endswith((" ", "\t")) else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, text)
    body = yaml.dump(dict(doc), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)
    if header:
        comment = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
        return comment + body
    return body


def check_document(
    text: str, catalog: Catalog, settings: Settings, *, plans: Mapping[str, Plan] | None = None
) -> tuple[Plan | None, list[str]]:
    """A plan file's text checked as `plan validate` checks a plan: load, catalog resolution and
    data flow — every problem of every tier at once, so one retry can fix them all."""
    if plans is None:
        plans = workspace_plans(settings)
    servers = known_servers(catalog, settings.catalog_dir / "servers.yaml")
    shapes = learned_shapes(settings.catalog_dir / "shapes")
    try:
        plan = load_plan_text(text, SOURCE)
    except PlanLoadError as err:
        # every tier at once: what did load is checked against the catalog and the data flow too
        later = partial_problems(err, catalog, servers=servers, plans=plans, shapes=shapes)
        return None, relative_problems(err) + later
    problems = validate_against_catalog(plan, catalog, servers=servers, plans=plans, shapes=shapes)
    return (None, problems) if problems else (plan, [])


# --- the drafting loop --------------------------------------------------------------------------


@dataclass
class DraftResult:
    """`plan_doc` is the valid plan document (None when every attempt failed); `problems` are
    the last attempt's. `yaml` is the document as a plan file, `plan` as loaded."""

    plan_doc: dict[str, Any] | None
    attempts: int
    problems: list[str] = field(default_factory=list)
    plan: Plan | None = None
    yaml: str | None = None
    usage: Usage | None = None
    last_doc: dict[str, Any] | None = None  # the last draft that parsed (what `salvage` cuts)

    @property
    def ok(self) -> bool:
        return self.plan_doc is not None


@dataclass
class Salvage:
    """The valid prefix of a draft that never validated (graph's salvage): the first `kept` of
    its `of` top-level steps, `dropped` its finish (output or solver) when that did not
    validate without the later steps."""

    doc: dict[str, Any]
    yaml: str
    kept: int
    of: int
    dropped: list[str]


def salvage(
    doc: Mapping[str, Any],
    catalog: Catalog,
    settings: Settings,
    *,
    header: str | None = None,
    plans: Mapping[str, Plan] | None = None,
) -> Salvage | None:
    """The longest prefix of `doc`'s steps that validates as a plan — with its finish, else
    without it — or None when not even its first step does."""
    steps = doc.get("steps")
    if not isinstance(steps, list) or not steps:
        return None
    if plans is None:
        plans = workspace_plans(settings)
    finish = [k for k in ("output", "solver") if k in doc]
    for kept in range(len(steps), 0, -1):
        for dropped in ([], finish) if finish else ([],):
            candidate = {k: v for k, v in doc.items() if k not in dropped}
            candidate["steps"] = list(steps[:kept])
            text = plan_yaml(candidate, header=header)
            plan, problems = check_document(text, catalog, settings, plans=plans)
            if plan is not None and not problems:
                return Salvage(candidate, text, kept, len(steps), list(dropped))
    return None


OnAttempt = Callable[[int, list[str]], None]


async def draft_plan(
    goal: str,
    *,
    llm: ModelClient,
    catalog: Catalog,
    settings: Settings,
    context: Context = None,
    attempts: int = 3,
    feedback: str | Sequence[str] | None = None,
    identifier: str | None = None,
    identity: Mapping[str, Any] | None = None,
    header: str | None = None,
    check: Callable[[Plan], list[str]] | None = None,
    on_attempt: OnAttempt | None = None,
) -> DraftResult:
    """Ask the planner for a plan for `goal`, validating every draft; up to `attempts` calls.

    `context`: extra sections for the planner ({title: text}, or one text), e.g. the thread or
    plan to start from, or for a replan the failing step, the error and the available keys.
    `feedback`: points to take into account from the first attempt on. `identifier` forces
    the plan's identifier; `header` is a comment put at the top of the YAML. `check(plan)` adds
    the host's own problems of a loaded draft (e.g. an identifier already taken), sent back like
    the validator's. `on_attempt(n, problems)` is told each attempt's outcome. `identity`:
    fields every draft keeps as given (`plan draft --from`: name, description, input_schema).
    Model errors raise GraphchatError; a draft that never validates is a result, not an error.
    """
    plans = workspace_plans(settings)
    digest = catalog_digest(catalog, settings, plans=plans)

    system = builtin_prompt(settings, "planner", PLANNER_SYSTEM)
    messages = planner_messages(
        goal, digest, context=context, feedback=feedback, identifier=identifier, system=system
    )
    before = llm.usage
    problems: list[str] = []
    attempt = 0
    last: dict[str, Any] | None = None
    for attempt in range(1, max(1, attempts) + 1):
        if attempt > 1:
            messages.append(retry_message(problems))
        completion = await llm.complete_with_schema(
            messages, PLAN_DOCUMENT_SCHEMA, site="planner", name="plan"
        )
        messages.append({"role": "assistant", "content": completion.content})
        try:
            doc = normalise_document(
                read_plan_reply(completion.content), catalog, identifier=identifier, identity=identity
            )
        except ValueError as exc:
            problems = [str(exc)]
        else:
            last = doc
            text = plan_yaml(doc, header=header)
            plan, problems = check_document(text, catalog, settings, plans=plans)
            if plan is not None and check is not None:
                problems = check(plan)
            if plan is not None and not problems:
                if on_attempt is not None:
                    on_attempt(attempt, [])
                return DraftResult(doc, attempt, [], plan=plan, yaml=text, usage=llm.usage - before)
        if on_attempt is not None:
            on_attempt(attempt, problems)
    return DraftResult(None, attempt, problems, usage=llm.usage - before, last_doc=last)
