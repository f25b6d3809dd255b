"""The `workbench__*` tools: what the workbench's chat agent edits, checks, runs and saves the
draft with. They live in the agent's catalog only — never in the catalog a plan is validated
or run against, so a plan can never call them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.llm.types import ToolCall
from graphchat.plans import authoring
from graphchat.workbench.draft import DraftError
from graphchat.workbench.research import ResearchError

if TYPE_CHECKING:
    from graphchat.workbench.bench import Bench

PREFIX = "workbench__"
_OBJ: dict[str, Any] = {"type": "object"}


def _schema(properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": properties or {}, "required": list(required)}


_STR = {"type": "string"}
TOOLS: dict[str, tuple[str, dict[str, Any], str]] = {
    "list_plans": (
        "The workspace's plans: identifier, name, file (the draft is untouched).",
        _schema(),
        "read",
    ),
    "show_plan": (
        "One plan's YAML by identifier or path, without touching the draft.",
        _schema({"plan": _STR}, ("plan",)),
        "read",
    ),
    "load_plan": (
        "Replace the draft with a plan (identifier or path). Fails when the draft has unsaved "
        "changes; pass overwrite_draft: true only after the person agreed to drop them.",
        _schema({"plan": _STR, "overwrite_draft": {"type": "boolean"}}, ("plan",)),
        "read",
    ),
    "draft_plan": (
        "Draft the whole plan from a goal with the planner (the same as `graphchat plan draft`), "
        "when there is no draft yet or the person asks to start over. Pass the request as a "
        "self-contained `goal`. fresh: true drafts a NEW plan; otherwise the draft keeps its "
        "identifier, name and description and its steps are drafted again. It ALWAYS replaces "
        "every step: to change a draft worth keeping use add_step / update_step / "
        "update_metadata. Like load_plan it fails when the draft has unsaved changes; pass "
        "overwrite_draft: true only after the person agreed. restore_draft undoes it.",
        _schema(
            {
                "goal": {"type": "string", "description": "what the plan should do, self-contained"},
                "fresh": {"type": "boolean", "description": "a new plan, not the current one again"},
                "overwrite_draft": {"type": "boolean"},
            },
            ("goal",),
        ),
        "read",
    ),
    "get_plan": ("The current draft's YAML, its problems and whether it is saved.", _schema(), "read"),
    "update_metadata": (
        "Patch the draft's identifier, name, description or exemplars.",
        _schema({"identifier": _STR, "name": _STR, "description": _STR, "exemplars": {"type": "array"}}),
        "read",
    ),
    "add_step": (
        "Add a step (appended, or before/after a step id). Rejected, draft untouched, when it "
        "would add a validation problem.",
        _schema(
            {"id": _STR, "tool": _STR, "input": _OBJ, "reasoning": _STR, "before": _STR, "after": _STR},
            ("id", "tool", "input"),
        ),
        "read",
    ),
    "update_step": (
        "Patch a step's tool, input or reasoning; new_id renames it and rewrites every reference.",
        _schema({"id": _STR, "tool": _STR, "input": _OBJ, "reasoning": _STR, "new_id": _STR}, ("id",)),
        "read",
    ),
    "delete_step": (
        "Delete a step. Rejected when another step still reads it.",
        _schema({"id": _STR}, ("id",)),
        "read",
    ),
    "restore_draft": ("Undo the last draft change (one level; again to redo).", _schema(), "read"),
    "validate_plan": ("Validate the draft: static problems and the catalog's.", _schema(), "read"),
    "run_plan": (
        "Run the draft in full through the plan executor (real tool calls) with `inputs`. "
        "debug: true starts a debug run: it pauses before calls for the person (not you) to "
        "step, continue, skip or abort on their screen.",
        _schema({"inputs": _OBJ, "debug": {"type": "boolean"}}),
        "read",  # each call the plan makes is approved on its own
    ),
    "save_plan": ("Save the draft to its plan file.", _schema(), "read"),
    # project research: read-only, inside the directory the workbench was started in
    "read_file": (
        "Read a text file of the project (the directory the workbench was started in; paths "
        "outside it and .gitignored files are refused). Pages with offset/limit.",
        _schema(
            {
                "path": {"type": "string", "description": "relative to the project directory"},
                "offset": {"type": "integer", "description": "1-based first line (default 1)"},
                "limit": {"type": "integer", "description": "lines to return (default 500, at most 2000)"},
            },
            ("path",),
        ),
        "read",
    ),
    "grep": (
        "Search the project's files with an RE2 regular expression, line by line (.gitignored "
        "files and binaries skipped). Returns path, line number and text of each match.",
        _schema(
            {
                "pattern": {"type": "string", "description": "RE2 regular expression"},
                "path": {"type": "string", "description": "file or directory to search (default: all)"},
                "glob": {"type": "string", "description": "only files matching, e.g. *.yaml or plans/**"},
                "case_insensitive": {"type": "boolean"},
                "max_matches": {"type": "integer", "description": "default 100, at most 500"},
            },
            ("pattern",),
        ),
        "read",
    ),
    "glob": (
        "Find the project's files by a glob, e.g. **/*.yaml (.gitignored files skipped); paths "
        "relative to the project directory, sorted.",
        _schema(
            {
                "pattern": {"type": "string", "description": "a glob; without / it matches file names"},
                "dir": {"type": "string", "description": "only under this directory"},
            },
            ("pattern",),
        ),
        "read",
    ),
}


EDITS = frozenset({"draft_plan", "update_metadata", "add_step", "update_step", "delete_step"})


def landed_edit(calls: list[ToolCall], results: list[ToolResult]) -> bool:
    """Whether a round of the agent's calls changed the draft (an edit tool that succeeded):
    the agent's iteration budget counts rounds without one."""
    return any(
        call.name.removeprefix(PREFIX) in EDITS and call.name.startswith(PREFIX) and not result.is_error
        for call, result in zip(calls, results, strict=True)
    )


class WorkbenchSource(ToolSource):
    """The workbench tools over one bench (its draft, its plan catalog)."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(
                name=PREFIX + name,
                description=description,
                input_schema=schema,
                source="workbench",
                family=family,
                meta={"not_in_plans": True},
            )
            for name, (description, schema, family) in TOOLS.items()
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        name = spec.name.removeprefix(PREFIX)
        try:
            value = await self.bench.tool(name, arguments)
        except authoring.EditRejected as exc:
            rejected = authoring.rejection(exc)
            rejected["error"] = (
                "edit rejected — it would introduce new validation problems (the draft is unchanged)"
            )
            return ToolResult(rejected, is_error=True)
        except authoring.EditRefused as exc:
            return ToolResult.error(str(exc), **exc.details)
        except DraftError as exc:
            return ToolResult.error(str(exc), **exc.details)
        except (authoring.AuthoringError, ResearchError) as exc:
            return ToolResult.error(str(exc))
        return ToolResult(value)
