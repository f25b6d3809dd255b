"""`mcp serve`'s authoring tools: graph's `graph_plan_*` / `graph_tools_*`, so an agent in
another MCP client can list, read, check and edit plans and probe tools without a shell.

Every edit goes through the one authoring core (`graphchat.plans.authoring`), as the CLI verbs
do; the envelopes are the same. `graph_tools_test` calls only read tools: a client's model
must not get a way around approvals. (graph's `graph_plan_draft`, which costs inference, is
not offered: `plan draft` on the command line does that.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.plans import authoring
from graphchat.plans.discovery import discover, relative_problems
from graphchat.plans.listing import control_show, is_control_step, read_only, source_of, tool_listing
from graphchat.plans.loader import load_plan, plan_to_dict
from graphchat.plans.model import PlanLoadError

if TYPE_CHECKING:
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.workspace import Settings

_TARGET = {
    "type": "string",
    "description": "A plan identifier (as in graph_plan_list) or a path to a plan YAML file.",
}
_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def _schema(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "properties": properties}


TOOLS: dict[str, tuple[str, dict[str, Any]]] = {
    "graph_plan_list": (
        "List the plans of this workspace, plus plan files that failed to load (`skipped`). Start here "
        "to find out what already exists.",
        _OBJECT,
    ),
    "graph_plan_show": (
        "Read one plan's full definition: its steps, input schema and finish. Use it before editing a plan.",
        _schema(["target"], target=_TARGET),
    ),
    "graph_plan_validate": (
        "Check a plan: structure, template references, and whether its tools resolve here. `problems` "
        "make `ok` false; `notes` do not.",
        _schema(["target"], target=_TARGET),
    ),
    "graph_plan_new": (
        "Start an empty plan file. It is invalid until it has steps, so `ok` is true while "
        "`preExistingProblems` lists 'the plan has no steps'.",
        _schema(
            ["identifier"],
            identifier={
                "type": "string",
                "description": "Tool-name-safe id, also the file name: [a-zA-Z0-9_-].",
            },
            name={"type": "string", "description": "Display name. Defaults to the identifier."},
            description={"type": "string", "description": "What the plan does: what an agent routes on."},
        ),
    ),
    "graph_plan_set": (
        "Set one plan attribute. Refused, with the problems it would introduce, rather than leaving the "
        "plan broken. Changing `identifier` writes a NEW file and reports the old one as `renamedFrom`.",
        _schema(
            ["target", "attribute", "value"],
            target=_TARGET,
            attribute={"type": "string", "enum": list(authoring.PLAN_ATTRIBUTES)},
            value={
                "description": "A string for scalar attributes; an array of strings for `exemplars` and "
                "`requires_servers`; a JSON object for `input_schema`, `solver` and `output`."
            },
        ),
    ),
    "graph_plan_unset": (
        "Clear one optional plan attribute (`name`, `description` and `identifier` are required).",
        _schema(
            ["target", "attribute"],
            target=_TARGET,
            attribute={
                "type": "string",
                "enum": ["exemplars", "requires_servers", "input_schema", "solver", "output"],
            },
        ),
    ),
    "graph_plan_step_add": (
        "Add a step, appended or before/after a step id. Refused when it would reference something that "
        "is not `input` or an earlier step.",
        _schema(
            ["target", "id", "tool", "input"],
            target=_TARGET,
            id={"type": "string", "description": "Step id: later steps read it as {{<id>.field}}."},
            tool={"type": "string", "description": "A tool from graph_tools_list, or a control step."},
            input={"type": "object", "description": "The step's input object (templates allowed)."},
            reasoning={"type": "string"},
            before={"type": "string"},
            after={"type": "string"},
        ),
    ),
    "graph_plan_step_update": (
        "Change one attribute of one step (to rename a step use graph_plan_step_rename).",
        _schema(
            ["target", "id", "attribute", "value"],
            target=_TARGET,
            id={"type": "string"},
            attribute={"type": "string", "enum": list(authoring.STEP_ATTRIBUTES)},
            value={"description": "A string for `tool` and `reasoning`; a JSON object for `input`."},
        ),
    ),
    "graph_plan_step_rename": (
        "Rename a step, rewriting every downstream {{id.…}} reference to match.",
        _schema(["target", "id", "new_id"], target=_TARGET, id={"type": "string"}, new_id={"type": "string"}),
    ),
    "graph_plan_step_rm": (
        "Remove a step. Refused if a later step still references it.",
        _schema(["target", "id"], target=_TARGET, id={"type": "string"}),
    ),
    "graph_tools_list": (
        "List everything a plan step's `tool` may name here: tools under their namespaced name, plus the "
        "control steps under the `(control)` source. Use graph_tools_show for one entry's schemas.",
        _OBJECT,
    ),
    "graph_tools_show": (
        "One tool's description and schemas: `inputSchema` is what a step's input must satisfy. Every "
        "key is always present, null when absent.",
        _schema(["name"], name={"type": "string"}),
    ),
    "graph_tools_test": (
        "Call one READ tool directly and return what it produced ({tool, isError, result}), to learn its "
        "real output before writing a template against it. Tools that write are refused here.",
        _schema(["name"], name={"type": "string"}, input={"type": "object"}),
    ),
}
MUTATING = frozenset(
    {
        "graph_plan_new",
        "graph_plan_set",
        "graph_plan_unset",
        "graph_plan_step_add",
        "graph_plan_step_update",
        "graph_plan_step_rename",
        "graph_plan_step_rm",
    }
)


def tools() -> list[Any]:
    from mcp.types import Tool, ToolAnnotations

    out = []
    for name, (description, schema) in TOOLS.items():
        read_only = name not in MUTATING and name != "graph_tools_test"
        out.append(
            Tool(
                name=name,
                description=description,
                input_schema=schema,
                annotations=ToolAnnotations(read_only_hint=read_only, destructive_hint=False),
            )
        )
    return out


async def call(
    name: str, arguments: dict[str, Any], settings: Settings, catalog: Catalog, ctx: CallContext
) -> tuple[dict[str, Any], bool]:
    """(envelope, is_error) of one authoring tool."""
    try:
        if name in ("graph_tools_list", "graph_tools_show", "graph_tools_test"):
            return await _tools(name, arguments, catalog, ctx)
        return _plans(name, arguments, settings, catalog)
    except authoring.AuthoringError as exc:
        return {"ok": False, "error": str(exc)}, True
    except authoring.EditRefused as exc:
        return {"ok": False, "error": str(exc), **exc.details}, True
    except authoring.EditRejected as exc:
        return authoring.rejection(exc), True
    except KeyError as exc:
        return {"ok": False, "error": f"{name}: missing argument {exc}"}, True
    except OSError as exc:
        return {"ok": False, "error": f"{name}: cannot write: {exc.strerror or exc}"}, True


def _plans(name: str, a: dict[str, Any], settings: Settings, catalog: Catalog) -> tuple[dict[str, Any], bool]:
    plans_dir = settings.plans_dir
    if name == "graph_plan_list":
        index = discover(plans_dir)
        listed = [
            {"identifier": p.identifier, "name": p.name, "description": p.description, "steps": len(p.steps),
             "path": str(p.path)}
            for p in sorted(index.plans.values(), key=lambda p: p.identifier)
        ]  # fmt: skip
        skipped = [
            {"path": str(path), "problems": relative_problems(err)}
            for path, err in sorted(index.errors.items())
        ]
        return {"plans": listed, "count": len(listed), "skipped": skipped}, False
    if name == "graph_plan_new":
        ident = str(a["identifier"])
        done = authoring.new_plan(plans_dir / f"{ident}.yaml", ident, a.get("name"), a.get("description"))
        return authoring.envelope(done), False
    path = authoring.locate(plans_dir, str(a["target"]))
    if name == "graph_plan_show":
        try:
            return {"path": str(path), "plan": plan_to_dict(load_plan(path))}, False
        except PlanLoadError as err:
            return {"ok": False, "path": str(path), "problems": relative_problems(err)}, True
    if name == "graph_plan_validate":
        data = authoring.read_document(path)
        problems = authoring.static_problems(data)
        notes = [] if problems else authoring.catalog_notes(path, catalog, settings)
        steps = data.get("steps")
        report = {
            "plan": data.get("identifier"),
            "steps": len(steps) if isinstance(steps, list) else None,
            "ok": not problems and not notes,
            "problems": problems + notes,
            "notes": [],
        }
        return report, False
    renames: dict[str, str] | None = None
    if name == "graph_plan_set":
        value = a["value"]
        values = (
            list(value)
            if isinstance(value, list) and a["attribute"] in authoring.LIST_ATTRIBUTES
            else [value]
        )
        edit: Any = lambda d: authoring.set_attribute(d, str(a["attribute"]), values)  # noqa: E731
    elif name == "graph_plan_unset":
        edit = lambda d: authoring.unset_attribute(d, str(a["attribute"]))  # noqa: E731
    elif name == "graph_plan_step_add":
        edit = lambda d: authoring.add_step(  # noqa: E731
            d, str(a["id"]), str(a["tool"]), a["input"], reasoning=a.get("reasoning"), before=a.get("before"),
            after=a.get("after"),
        )  # fmt: skip
    elif name == "graph_plan_step_update":
        edit = lambda d: authoring.update_step(d, str(a["id"]), str(a["attribute"]), a["value"])  # noqa: E731
    elif name == "graph_plan_step_rename":
        renames = {str(a["id"]): str(a["new_id"])}
        edit = lambda d: authoring.rename_step(d, str(a["id"]), str(a["new_id"]))  # noqa: E731
    elif name == "graph_plan_step_rm":
        edit = lambda d: authoring.remove_step(d, str(a["id"]))  # noqa: E731
    else:
        return {"ok": False, "error": f"unknown tool: {name}"}, True
    done = authoring.apply_edit(Path(path), edit, renames=renames)
    return authoring.envelope(done, authoring.catalog_notes(done.path, catalog, settings)), False


async def _tools(
    name: str, a: dict[str, Any], catalog: Catalog, ctx: CallContext
) -> tuple[dict[str, Any], bool]:
    if name == "graph_tools_list":
        return tool_listing(catalog.list()), False  # graph's envelope, as `tools list --json` prints it
    tool = str(a["name"])
    spec = catalog.get(tool)
    if name == "graph_tools_show":
        if is_control_step(tool):
            return control_show(tool), False
        if spec is None:
            return {"ok": False, "error": f"unknown tool: {tool}"}, True
        return {
            "name": spec.name,
            "source": source_of(spec.name),
            "description": spec.description,
            "readOnly": read_only(spec),
            "inputSchema": spec.input_schema,
            "outputSchema": spec.output_schema,
            "outputExample": spec.meta.get("output_example"),
        }, False
    if spec is None:
        return {"ok": False, "error": f"unknown tool: {tool}"}, True
    if spec.family != "read":
        return {
            "ok": False,
            "error": f"{tool} is a {spec.family} tool: graph_tools_test calls only read tools (a client's "
            "model cannot approve its own call); run it in a plan or with `graphchat tools call`",
        }, True
    result = await catalog.call(tool, dict(a.get("input") or {}), ctx)
    return {"tool": tool, "isError": result.is_error, "result": result.value}, False
