"""The workbench without its screen: the draft, the chat agent over the chat's catalog plus the
`workbench__*` tools, validation and full runs. The app (`app.py`) only shows it and maps keys
to it, so everything here runs (and is tested) the same with or without a screen.

The agent is the chat's loop (`agent.loop.run_loop`) against the configured chat model; its
conversation is scratch (kept in memory as thread events, replayed the chat's way, never
written as a thread). Plans are validated and run against the plan catalog — the chat's
catalog *without* the workbench tools, so those are never plan tools.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.agent.loop import IterationsExhausted, run_loop
from graphchat.catalog.base import CallContext, Catalog
from graphchat.errors import GraphchatError
from graphchat.fsutil import describe_failure
from graphchat.llm.client import LLM
from graphchat.plans import authoring as a
from graphchat.plans.authoring import plain
from graphchat.plans.discovery import discover
from graphchat.plans.draft import draft_plan, output_shape, salvage, workspace_plans
from graphchat.plans.model import Plan
from graphchat.plans.steps import CONTROL
from graphchat.plans.validate import known_servers, validate_against_catalog
from graphchat.runs.freeze import freeze_to_workspace
from graphchat.shapes import ShapeStore
from graphchat.threads import lines as ev
from graphchat.threads.repair import to_model_messages
from graphchat.workbench.draft import Draft, DraftError
from graphchat.workbench.lines import LineSink
from graphchat.workbench.research import Project
from graphchat.workbench.runs import run_draft
from graphchat.workbench.tools import WorkbenchSource, landed_edit

if TYPE_CHECKING:
    from graphchat.asks import Asker
    from graphchat.llm.client import LLM
    from graphchat.workbench.debug import Debugger, Pause
    from graphchat.workspace import Settings

SYSTEM_PROMPT = """You are graphchat's plan workbench assistant. A person and you edit one plan \
draft together; the draft is on their screen and changes there as soon as an edit is accepted.

- Edit the draft only with the workbench__* tools: update_metadata, add_step, update_step, \
delete_step. Each edit is validated at once; a rejected edit leaves the draft unchanged and its \
result says which problems it would have introduced — fix those, do not retry blindly.
- A step is {id, tool, input}: `tool` is a tool of the catalog (not a workbench__ tool), `input` \
its arguments, where {{input.x}} reads a plan input and {{E0.field}} an earlier step's result.
- draft_plan has the planner draft the whole plan from a goal (a new plan, or starting over); \
for changes to a draft worth keeping use the editing tools instead.
- load_plan and draft_plan replace the draft: when one says there are unsaved changes, ask the \
person before passing overwrite_draft: true. restore_draft undoes the last change (one level).
- validate_plan checks the draft against the catalog; run_plan runs it for real (side effects \
included); save_plan writes it to its file. read_file, grep and glob look at the project's \
files (read-only, inside the directory the workbench was started in). Answer briefly.

The current draft:
"""


DRAFT_ATTEMPTS = 3  # the planner's calls for one draft_plan, as `plan draft`


class Bench:
    """One workbench session. `notify` is told (with no argument) whenever what a pane shows
    may have changed: the draft, the validation state, the chat, the run transcript."""

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        *,
        asker: Asker | None = None,
        project: Path | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog  # the plan catalog: what plans validate and run against
        self.asker = asker
        self.draft = Draft(settings.plans_dir)
        self.project = Project(project or Path.cwd())  # what the research tools may read
        self.agent_catalog = Catalog(approver=catalog.approver, record_shape=catalog.record_shape)
        self.agent_catalog.sources = [*catalog.sources, WorkbenchSource(self)]
        # a source's tools changed: both catalogs look again (until `close` gives them back)
        self._hooks = [(source, source.on_change) for source in catalog.sources]
        for source in catalog.sources:
            source.on_change = self._invalidate
        self.events: list[dict[str, Any]] = []  # the scratch conversation, as thread events
        self.chat_lines: list[str] = []
        self.run_lines: list[str] = []
        self.validation: list[str] | None = None  # None: not validated since the last change
        self.notify: Callable[[], None] = lambda: None
        self._llm: LLM | None = None
        self.draft.on_change.append(self._draft_changed)
        # runs (graphchat.workbench.runs): the breakpoints (top-level step ids), the last run's
        # step status, the debugger of the debug run going on; `show_pause` is the screen's
        self.breakpoints: set[str] = set()
        self.step_status: dict[str, str] = {}
        self.running = False
        self.debugger: Debugger | None = None
        self.show_pause: Callable[[Pause], None] = lambda pause: None

    def close(self) -> None:
        """Hand the sources back to the catalog they came from (chat's `/workbench` goes on)."""
        for source, hook in self._hooks:
            source.on_change = hook
        self.catalog.invalidate()

    def _invalidate(self) -> None:
        self.catalog.invalidate()
        self.agent_catalog.invalidate()

    def _draft_changed(self) -> None:
        self.validation = None
        self.notify()

    def say(self, line: str) -> None:
        self.chat_lines.append(line)
        self.notify()

    def log_run(self, line: str) -> None:
        self.run_lines.append(line)
        self.notify()

    # -- the agent ----------------------------------------------------------------------------

    def llm(self) -> LLM:
        if self._llm is None:
            self._llm = LLM(self.settings.model_for("chat"), events=LineSink(self.say))
        return self._llm

    def system_prompt(self) -> str:
        problems = "\n".join(f"- {p}" for p in self.draft.problems) or "(none)"
        base = self.settings.prompts.get("workbench", SYSTEM_PROMPT)  # prompts.workbench replaces it
        return f"{base}\n{self.draft.text}\nStatic problems:\n{problems}\n"

    async def turn(self, message: str) -> str:
        """One chat turn: the person's message, the agent's rounds, its answer."""
        self.say(f"you> {message}")
        self.events.append(dict(ev.user(message)))
        messages = [{"role": "system", "content": self.system_prompt()}, *to_model_messages(self.events)]
        ctx = CallContext(asker=self.asker, events=LineSink(self.say), surface="agent")
        before = self.llm().usage
        try:
            result = await run_loop(
                llm=self.llm(),
                catalog=self.agent_catalog,
                messages=messages,
                ctx=ctx,
                max_iterations=self.settings.max_agent_iterations,
                record=self.events.append,
                stream=False,
                progress=landed_edit,  # the budget counts rounds without a successful edit
            )
        except IterationsExhausted:
            # the turn is kept (its edits are in the draft; its open calls replay as interrupted),
            # so "continue" goes on from where it stopped
            spent = (self.llm().usage - before).to_dict()
            self.events.append(dict(ev.turn_end(spent, self.llm().config.model)))
            self.say(
                f"✗ the agent stopped: {self.settings.max_agent_iterations} rounds in a row without a "
                "successful edit. The edits it made are in the draft; send “continue” to let it go on."
            )
            return ""
        except Exception as exc:
            self.events.append(dict(ev.turn_failed(describe_failure(exc))))
            self.say(f"✗ {describe_failure(exc)}")
            return ""
        spent = result.usage.to_dict()
        self.events.append(dict(ev.turn_end(spent, self.llm().config.model)))
        self.say(f"model> {result.content}")
        self.say(f"  (spent: {json.dumps(spent)})")
        return result.content

    # -- the workbench__* tools --------------------------------------------------------------

    async def tool(self, name: str, arguments: dict[str, Any]) -> Any:
        draft = self.draft
        if name == "list_plans":
            index = discover(self.settings.plans_dir)
            return {
                "plans": [
                    {"identifier": pid, "name": plan.name, "file": str(plan.path)}
                    for pid, plan in sorted(index.plans.items())
                ]
            }
        if name == "show_plan":
            path = a.locate(self.settings.plans_dir, str(arguments["plan"]))
            return {"file": str(path), "yaml": path.read_text(encoding="utf-8")}
        if name == "load_plan":
            path = draft.load(str(arguments["plan"]), overwrite=bool(arguments.get("overwrite_draft")))
            return {"ok": True, "loaded": str(path), "problems": draft.problems}
        if name == "draft_plan":
            return await self.draft_plan(
                str(arguments.get("goal") or ""),
                fresh=bool(arguments.get("fresh")),
                overwrite=bool(arguments.get("overwrite_draft")),
            )
        if name == "get_plan":
            return {"yaml": draft.text, "problems": draft.problems, "unsaved": draft.dirty}
        if name == "update_metadata":
            fields = {
                k: v for k, v in arguments.items() if k in ("identifier", "name", "description", "exemplars")
            }
            if not fields:
                raise a.AuthoringError("update_metadata takes identifier, name, description or exemplars")

            def metadata(data: Any) -> dict[str, Any]:
                for key, value in fields.items():
                    a.set_attribute(data, key, value if isinstance(value, list) else [value])
                return {"updated": sorted(fields)}

            return draft.edit(metadata)
        if name == "add_step":
            return draft.edit(
                lambda data: a.add_step(
                    data,
                    str(arguments["id"]),
                    str(arguments["tool"]),
                    arguments["input"],
                    reasoning=arguments.get("reasoning"),
                    before=arguments.get("before"),
                    after=arguments.get("after"),
                )
            )
        if name == "update_step":
            step_id = str(arguments["id"])
            new_id = arguments.get("new_id")

            def update(data: Any) -> dict[str, Any]:
                out: dict[str, Any] = {"id": step_id}
                for attribute in ("tool", "input", "reasoning"):
                    if attribute in arguments:
                        a.update_step(data, step_id, attribute, arguments[attribute])
                if new_id:
                    out = a.rename_step(data, step_id, str(new_id))
                return out

            return draft.edit(update, renames={step_id: str(new_id)} if new_id else None)
        if name == "delete_step":
            return draft.edit(lambda data: a.remove_step(data, str(arguments["id"])))
        if name == "restore_draft":
            draft.undo()
            return {"ok": True, "yaml": draft.text, "unsaved": draft.dirty}
        if name == "validate_plan":
            problems = self.validate()
            return {"ok": not problems, "problems": problems}
        if name == "run_plan":  # a debug run's pauses are the person's to answer, on the screen
            return await self.run(arguments.get("inputs") or {}, debug=bool(arguments.get("debug")))
        if name == "save_plan":
            return {"ok": True, "savedTo": str(self.save())}
        if name == "read_file":  # the research tools touch the disk: off the event loop
            return await asyncio.to_thread(self.project.read_file, arguments)
        if name == "glob":
            return await asyncio.to_thread(self.project.glob, arguments)
        if name == "grep":
            return await self.project.grep(arguments)
        raise DraftError(f"unknown workbench tool {name}")

    async def draft_plan(self, goal: str, *, fresh: bool = False, overwrite: bool = False) -> dict[str, Any]:
        """`workbench__draft_plan`: the planner (`plan draft`'s drafter, the `planner` model role)
        drafts the whole plan for `goal`, validated against the plan catalog; it replaces the
        draft (protected like `load_plan`, one undo away). Not fresh, the draft keeps its
        identity and the planner sees it. A draft that never validates publishes its valid first
        steps (graph's salvage) and says so as an error."""
        if not goal.strip():
            raise DraftError("draft_plan needs a goal: what the plan should do")
        draft = self.draft
        draft.guard(overwrite)  # before a model call is spent
        keep = not fresh and not draft.empty
        identity: dict[str, Any] | None = None
        context: dict[str, str] | None = None
        if keep:
            kept_fields = ("name", "description", "input_schema")
            identity = {k: plain(draft.data[k]) for k in kept_fields if k in draft.data}
            context = {
                "The current draft: keep its identifier, name and description; draft every step "
                "again": draft.text
            }

        def check(plan: Plan) -> list[str]:
            """A new identifier taken by another plan would not save: back to the planner."""
            other = discover(self.settings.plans_dir).plans.get(plan.identifier)
            if other is None or other.path is None or (draft.path and other.path == draft.path):
                return []
            return [f"identifier: plan '{plan.identifier}' already exists in {other.path}: choose another"]

        def attempt(n: int, problems: list[str]) -> None:
            if problems:
                self.say(f"  ✗ draft {n}: {len(problems)} problem(s); sent back to the planner")

        header = f"Drafted in the workbench for: {' '.join(goal.split())}"
        try:
            result = await draft_plan(
                goal,
                llm=LLM(self.settings.model_for("planner"), events=LineSink(self.say)),
                catalog=self.catalog,
                settings=self.settings,
                context=context,
                attempts=DRAFT_ATTEMPTS,
                identifier=draft.identifier if keep else None,
                identity=identity,
                header=header,
                check=check,
                on_attempt=attempt,
            )
        except GraphchatError as exc:
            raise DraftError(f"the planner failed: {exc}") from None
        if result.ok and result.yaml is not None and result.plan is not None:
            draft.replace(result.yaml, "the planner's draft", overwrite=True)
            problems = self.validate()
            out: dict[str, Any] = {
                "ok": True,
                "identifier": result.plan.identifier,
                "steps": len(result.plan.steps),
                "attempts": result.attempts,
                "validation": problems or "ok",
                "unsaved": True,
            }
            return out
        kept = (
            salvage(result.last_doc, self.catalog, self.settings, header=header) if result.last_doc else None
        )
        if kept is None:
            raise DraftError(
                f"the planner's draft still does not validate after {result.attempts} attempts; "
                "the draft is unchanged",
                problems=result.problems,
            )
        draft.replace(kept.yaml, "the planner's partial draft", overwrite=True)
        self.validate()
        raise DraftError(
            f"the planner's draft did not validate after {result.attempts} attempts; its valid first "
            f"{kept.kept} of {kept.of} steps are now the draft",
            problems=result.problems,
            note="finish the plan with the editing tools (add_step, update_step) instead of redrafting",
        )

    def open_thread(self, thread: str | None) -> str:
        """Freeze a chat's thread (`plan freeze`'s deterministic freezer; the latest thread
        without an id) and open the plan as an unsaved draft. Returns the plan's identifier."""
        saved = freeze_to_workspace(self.settings, thread, write=False, warn=self.say)
        frozen = saved.frozen
        where = f"thread {thread}" if thread else "the latest thread"
        self.draft.start(frozen.text, where)
        self.say(
            f"opened {where}, frozen into plan '{frozen.identifier}' "
            f"({len(frozen.steps)} step(s), {frozen.finish} finish) — not saved yet (Ctrl-S saves)"
        )
        for item in frozen.dropped:
            self.say(f"  left out: {item}")
        return frozen.identifier

    def returns_text(self, tool: str) -> str:
        """What the plan tab says a step's tool returns: its declared output schema, else the
        shape learned from its earlier calls (the shape cache), else that it is not known yet —
        what the planner is shown too (`plans.draft.output_shape`). "" for a control step."""
        if tool in CONTROL:
            return ""
        spec = self.catalog.get(tool)
        if spec is None:
            return f"returns: unknown — {tool} is not in the catalog"
        plans = workspace_plans(self.settings) if spec.source == "plan" else None
        kind, shape = output_shape(spec, ShapeStore(self.settings.catalog_dir / "shapes"), plans)
        if kind == "declared":
            return "returns (declared output schema):\n  " + shape
        if kind == "observed":
            return "returns (learned from earlier calls, may vary):\n  " + shape
        return "returns: not known yet — run it once"

    # -- validate, run, save ----------------------------------------------------------------

    def validate(self) -> list[str]:
        """Static problems, else the catalog's (unknown tools, servers, the data flow)."""
        problems = list(self.draft.problems)
        plan = self.draft.plan() if not problems else None
        if plan is not None:
            problems = validate_against_catalog(
                plan,
                self.catalog,
                servers=known_servers(self.catalog, self.settings.catalog_dir / "servers.yaml"),
                plans=discover(self.settings.plans_dir).plans,
                soft_required_servers=True,
            )
        self.validation = problems
        self.notify()
        return problems

    async def run(self, inputs: dict[str, Any], *, debug: bool = False) -> dict[str, Any]:
        """A run of the draft (a debug run with `debug`), its transcript in the run tab."""
        return await run_draft(self, inputs, debug=debug)

    def save(self) -> str:
        path = self.draft.save()
        return str(path)
