"""Test-only helpers for plan executor tests: an in-memory tool source and a runner."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import yaml

from graphchat.asks import Asker
from graphchat.catalog.base import CallContext, Catalog, ToolResult, ToolSource, ToolSpec
from graphchat.events import EventSink
from graphchat.plans.executor import PlanOutcome, run_plan
from graphchat.plans.loader import load_plan_data
from graphchat.plans.model import Plan
from graphchat.plans.runtime import LLMFactory

Tool = Callable[[dict[str, Any]], Awaitable[Any]]


class FakeTools(ToolSource):
    """Native-like tools for tests: `t__echo`, `t__double`, `t__slow`, `t__fail`, `t__list`, `t__add`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.active = 0
        self.peak = 0
        self.tools: dict[str, tuple[Tool, str]] = {
            "t__echo": (self._echo, "read"),
            "t__double": (self._double, "read"),
            "t__slow": (self._slow, "read"),
            "t__fail": (self._fail, "write"),
            "t__list": (self._list, "read"),
            "t__add": (self._add, "read"),
        }

    def add(self, name: str, fn: Tool, family: str = "read") -> None:
        self.tools[name] = (fn, family)

    async def _echo(self, args: dict[str, Any]) -> Any:
        return args

    async def _double(self, args: dict[str, Any]) -> Any:
        return {"value": args["n"] * 2}

    async def _slow(self, args: dict[str, Any]) -> Any:
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(float(args.get("seconds", 0.05)))
        finally:
            self.active -= 1
        if args.get("fail"):
            raise RuntimeError(f"item {args.get('n')} broke")
        return {"n": args.get("n")}

    async def _fail(self, args: dict[str, Any]) -> Any:
        raise RuntimeError(args.get("message", "boom"))

    async def _add(self, args: dict[str, Any]) -> Any:
        return {"total": args["total"] + args["item"], "seen": args.get("seen")}

    async def _list(self, args: dict[str, Any]) -> Any:
        return {"items": args.get("items", [])}

    def specs(self) -> list[ToolSpec]:
        return [
            ToolSpec(name=name, description=name, input_schema={}, source="native", family=family)
            for name, (_, family) in self.tools.items()
        ]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        self.calls.append((spec.name, arguments))
        fn, _ = self.tools[spec.name]
        try:
            return ToolResult(await fn(arguments))
        except Exception as exc:
            return ToolResult.error(str(exc))

    async def aclose(self) -> None:
        pass


class Recorder(EventSink):
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def emit(self, event: str, **fields: Any) -> None:
        self.events.append((event, fields))


def plan_from_yaml(text: str) -> Plan:
    from graphchat.yamlfile import yaml12_loader

    return load_plan_data(yaml.load(text, Loader=yaml12_loader()), "<test>")  # noqa: S506


async def run_yaml(
    text: str,
    inputs: Any = None,
    *,
    tools: FakeTools | None = None,
    asker: Asker | None = None,
    llm_factory: LLMFactory | None = None,
    events: EventSink | None = None,
    catalog: Catalog | None = None,
) -> PlanOutcome:
    plan = plan_from_yaml(text)
    if catalog is None:
        catalog = Catalog([tools or FakeTools()])
    return await run_plan(
        plan, inputs, catalog=catalog, ctx=CallContext(asker=asker), llm_factory=llm_factory, events=events
    )
