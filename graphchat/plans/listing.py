"""The catalog as graph's scripting contract shows it: `tools list --json`, `tools show --json`.

graph's keys come first and mean what they mean in graph (graph's
`crates/graph-cli/src/commands/listing.rs`); graphchat's own keys (`family`, `server`, `tool`,
`origin`, …) stay beside them. The control steps are listed and described here, as graph
lists them, under the source `(control)`: they are step vocabulary a plan author needs, never
offered to the model and never callable (they are in no `ToolSource`).
"""

from __future__ import annotations

from typing import Any

from graphchat.catalog.base import ToolSpec
from graphchat.plans.steps import CONTROL

CONTROL_SOURCE = "(control)"
CORE_SOURCE = "(core)"
# graph's order (graph_core::pipeline::control_step_defs).
CONTROL_ORDER = ("agent", "ask", "exit", "decide", "filter", "map", "reduce")


def is_control_step(name: str) -> bool:
    return name in CONTROL_ORDER


def source_of(name: str) -> str:
    """graph's source of a catalog name: the namespace before `__`; a bare name is `(core)`."""
    if is_control_step(name):
        return CONTROL_SOURCE
    head, sep, _ = name.partition("__")
    return head if sep else CORE_SOURCE


def read_only(spec: ToolSpec) -> bool:
    return spec.family == "read"


def _camel(field: str) -> str:
    first, *rest = field.split("_")
    return first + "".join(part.title() for part in rest)


def control_spec(name: str) -> dict[str, Any]:
    """A control step as a tool definition: its description and the fields of its `input`."""
    module = CONTROL[name]
    doc = (getattr(module, "__doc__", None) or f"`{name}`").strip()
    description = " ".join(doc.split())
    properties: dict[str, Any] = {}
    for field in module.FIELDS:
        entry: dict[str, Any] = {}
        if field in module.BODIES:
            entry = {"type": "array", "description": "a body: a list of steps"}
        properties[_camel(field)] = entry
    schema = {"type": "object", "properties": properties}
    return {"name": name, "description": description, "inputSchema": schema}


def control_entries() -> list[dict[str, Any]]:
    return [control_spec(name) for name in CONTROL_ORDER]


def _extras(spec: ToolSpec) -> dict[str, Any]:
    """graphchat's keys beside graph's: its own kind of source and the approval family."""
    extra: dict[str, Any] = {"origin": spec.source, "family": spec.family}
    if spec.meta.get("server"):
        extra["server"] = spec.meta["server"]
        extra["tool"] = spec.meta["tool"]
    return extra


def tool_listing(
    specs: list[ToolSpec], collisions: dict[str, list[str]] | None = None, *, controls: bool = True
) -> dict[str, Any]:
    """graph's `{tools, count, sources}`: the catalog in order, then the control steps (not in
    `mcp tools`: `controls=False`, as graph's listing of a server's tools)."""
    tools: list[dict[str, Any]] = []
    for spec in specs:
        row: dict[str, Any] = {
            "name": spec.name,
            "source": source_of(spec.name),
            "description": spec.description,
            "readOnly": read_only(spec),
            "hasOutputSchema": spec.output_schema is not None,
            **_extras(spec),
        }
        for contested, pairs in (collisions or {}).items():
            if f"{spec.meta.get('server')}/{spec.meta.get('tool')}" in pairs:
                row["collision"] = {"name": contested, "tools": pairs}
        tools.append(row)
    for control in control_entries() if controls else []:
        tools.append(
            {
                "name": control["name"],
                "source": CONTROL_SOURCE,
                "description": control["description"],
                "readOnly": None,
                "hasOutputSchema": False,
                "family": "control",
            }
        )
    counts: dict[str, int] = {}
    for row in tools:
        counts[row["source"]] = counts.get(row["source"], 0) + 1
    return {
        "tools": tools,
        "count": len(tools),
        "sources": [{"source": source, "count": count} for source, count in counts.items()],
    }


def control_show(name: str) -> dict[str, Any]:
    """graph's `tools show --json` of a control step: every key, null when absent."""
    control = control_spec(name)
    return {
        "name": name,
        "source": CONTROL_SOURCE,
        "description": control["description"],
        "readOnly": None,
        "inputSchema": control["inputSchema"],
        "outputSchema": None,
        "outputExample": None,
        "family": "control",
    }
