"""Plans as tools: every loadable plan of the workspace is `plan__<identifier>`.

The tool's schema is the plan's `input_schema`; its description is the plan's description plus
its exemplars; its family is `read` only when every tool the plan can reach is `read`. A plan
whose `requires_servers` are not configured is hidden. Calling the tool runs the plan with the
caller's asker, so a question the plan asks reaches the same person (inline in a chat).
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.mcp.config import load_servers
from graphchat.errors import GraphchatError
from graphchat.plans.discovery import discover
from graphchat.plans.executor import llm_factory_for, run_plan
from graphchat.plans.inputs import unknown_input_keys
from graphchat.plans.model import PLAN_TOOL_PREFIX, plan_identifier
from graphchat.plans.steps import CONTROL

if TYPE_CHECKING:
    from graphchat.catalog.base import Catalog
    from graphchat.plans.model import Plan
    from graphchat.plans.runtime import LLMFactory

_SEVERITY = {"read": 0, "write": 1, "destructive": 2}
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def configured_servers(settings: Any) -> set[str]:
    """Names of the MCP servers of the workspace (a broken servers.yaml counts as none)."""
    try:
        return {server.name for server in load_servers(settings.catalog_dir, settings.workspace, warnings=[])}
    except GraphchatError:
        return set()


def tool_description(plan: Plan) -> str:
    text = plan.description.strip()
    if plan.exemplars:
        text += "\n\nExample requests:\n" + "\n".join(f"- {e}" for e in plan.exemplars)
    return text


class PlanSource(ToolSource):
    """The `plan__*` tools of a workspace's plans/ folder (or of a given list of plans)."""

    def __init__(
        self,
        settings: Any,
        catalog: Catalog,
        *,
        plans: list[Plan] | None = None,
        llm_factory: LLMFactory | None = None,
        servers: set[str] | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self._given = plans
        self._llm_factory = llm_factory
        self._servers = self._given_servers = servers
        self._plans: dict[str, Plan] | None = None

    # -- what exists --

    def plans(self) -> dict[str, Plan]:
        if self._plans is None:
            if self._given is not None:
                self._plans = {p.identifier: p for p in self._given}
            else:
                self._plans = dict(discover(self.settings.plans_dir).plans)
        return self._plans

    def reload(self) -> None:
        """Plans (and configured servers) are read again on the next lookup."""
        if self._given is None:
            self._plans = None
        self._servers = self._given_servers

    def servers(self) -> set[str]:
        if self._servers is None:
            self._servers = configured_servers(self.settings) if self.settings is not None else set()
        return self._servers

    def specs(self) -> list[ToolSpec]:
        plans = self.plans()
        visible = [p for p in plans.values() if not p.missing_servers(self.servers())]
        others = self._other_families()
        families = _Families(visible, others)
        specs = []
        for plan in visible:
            specs.append(
                ToolSpec(
                    name=plan.tool_name,
                    description=tool_description(plan),
                    input_schema=plan.input_schema or dict(EMPTY_SCHEMA),
                    source="plan",
                    family=families.of(plan.identifier),
                    meta={
                        "plan": plan.identifier,
                        "path": str(plan.path) if plan.path else None,
                        "title": plan.name or None,
                    },
                )
            )
        return specs

    def _other_families(self) -> dict[str, str]:
        """name → family of every tool of the other sources (their `specs` are cheap)."""
        found: dict[str, str] = {}
        for source in self.catalog.sources:
            if source is self:
                continue
            try:
                for spec in source.specs():
                    found.setdefault(spec.name, spec.family)
            except Exception:  # a broken source must not hide the plans
                continue
        return found

    # -- calling --

    def llm_factory(self) -> LLMFactory | None:
        if self._llm_factory is None and self.settings is not None:
            self._llm_factory = llm_factory_for(self.settings)
        return self._llm_factory

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        ident = spec.meta["plan"]
        plan = self.plans().get(ident)
        if plan is None:
            return ToolResult.error(f"unknown plan tool {spec.name}")
        missing = plan.missing_servers(self.servers())
        if missing:
            return ToolResult.error(
                f"plan '{ident}' needs MCP servers that are not configured: {', '.join(missing)}"
            )
        if ctx.events is not None and isinstance(arguments, dict):
            for key, close in unknown_input_keys(plan.input_schema, arguments):
                hint = f" (did you mean {close!r}?)" if close else ""
                # graph passes extra keys through; graphchat does too, and says so
                ctx.events.warning(
                    f"{spec.name}: {key!r} is not an input of plan '{ident}'{hint}; passed through"
                )
        outcome = await run_plan(
            plan,
            arguments,
            catalog=self.catalog,
            ctx=ctx,  # run_plan runs it as ctx.child(ident): same asker, chain extended
            llm_factory=self.llm_factory(),
            events=ctx.events,
            settings=self.settings,
            parking=ctx.parking,  # None but for a top-level call that may park (mcp serve)
        )
        if outcome.kind == "input":
            import orjson

            schema = orjson.dumps(plan.input_schema or EMPTY_SCHEMA).decode()
            return ToolResult.error(f"{outcome.error}\ninput schema: {schema}", problems=outcome.problems)
        if ctx.surface == "mcp" and not ctx.chain and outcome.kind in ("ok", "exit"):
            # `mcp serve`'s client called this plan: graph's result body (mcp_server/run.rs);
            # an exit with status error is an error result with its body intact
            errored = outcome.kind == "exit" and (outcome.exit or {}).get("status") != "success"
            return ToolResult(outcome.body(), is_error=errored)
        return outcome.tool_result()

    async def aclose(self) -> None:
        pass


class _Families:
    """The family of each plan: the most severe family of any tool it can reach (plans followed
    transitively; a tool the catalog does not know yet counts as destructive). A plan run
    starts the servers of the plans it calls before its first step (`executor.reachable_servers`), so
    on a fresh workspace the families are known by the time a plan tool is called."""

    def __init__(self, plans: list[Plan], others: dict[str, str]) -> None:
        self.plans = {p.identifier: p for p in plans}
        self.others = others
        self.memo: dict[str, str] = {}

    def of(self, ident: str, visiting: frozenset[str] = frozenset()) -> str:
        if ident in self.memo:
            return self.memo[ident]
        plan = self.plans.get(ident)
        if plan is None or ident in visiting:
            return "read" if ident in visiting else "destructive"  # a cycle fails at run time
        worst = 0
        for name in self.reachable(plan):
            worst = max(worst, _SEVERITY[self.family(name, visiting | {ident})])
            if worst == 2:
                break
        family = next(k for k, v in _SEVERITY.items() if v == worst)
        if not visiting:
            self.memo[ident] = family
        return family

    def family(self, name: str, visiting: frozenset[str]) -> str:
        ident = plan_identifier(name)
        if ident is not None:
            return self.of(ident, visiting)
        return self.others.get(name, "destructive")

    def reachable(self, plan: Plan) -> set[str]:
        names: set[str] = set()
        every = [*self.others, *(PLAN_TOOL_PREFIX + i for i in self.plans)]
        for step in plan.all_steps():
            tool = step.tool_name
            control = CONTROL.get(tool)
            if control is None:
                names.add(tool)
                continue
            patterns = control.tools(step)  # what the step's module says it may call
            if patterns is None:
                names.update(every)
            else:
                for pattern in patterns:
                    names.update(n for n in every if fnmatchcase(n, pattern))
        return names
