"""`agent`: a bounded tool-calling loop (the same loop as `ask`/`chat`) whose last round
withdraws the tools and forces `output_schema`; `{output, iterations, tools_called, final}`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from graphchat.agent.loop import WaitingRound, run_loop
from graphchat.asks import TOOL_CALL, Parked
from graphchat.catalog.base import ToolResult
from graphchat.errors import GraphchatError
from graphchat.jsonschema_util import refusal
from graphchat.llm.types import ToolCall
from graphchat.plans.grammar import Results, Schema, Site, array_of, closed, yaml_kind
from graphchat.plans.model import Step
from graphchat.plans.runtime import PARKING_AT, Frame, StepFailed, StepRunner, prepare_servers, render_text

FIELDS = ("prompt", "output_schema", "tools", "max_iterations", "model", "system_prompt")
BODIES: tuple[str, ...] = ()
ONLY_IN: str | None = None
PER_ITEM: tuple[str, ...] = ()
PER_ITEM_FIELDS: tuple[str, ...] = ()
if TYPE_CHECKING:
    from graphchat.agent.loop import WaitingRound

TOOL_PATTERN_RE = re.compile(r"^[A-Za-z0-9_*.-]+$")


def result(step: Step, known: Results) -> Schema:
    """`{output, iterations, tools_called, final}`; `output` as declared by `output_schema`
    (`{}` when `final` is false)."""
    schema = step.input.get("output_schema")
    return closed(
        {
            "output": dict(schema) if isinstance(schema, Mapping) else {},
            "iterations": {"type": "integer"},
            "tools_called": array_of(closed({"tool": {"type": "string"}, "round": {"type": "integer"}})),
            "final": {"type": "boolean"},
        }
    )


def tools(step: Step) -> tuple[str, ...] | None:
    """The names and `*` globs of its `tools` (None: omitted, the whole catalog)."""
    patterns = step.input.get("tools")
    if patterns is None:
        return None
    return tuple(str(p) for p in patterns) if isinstance(patterns, list) else ()


AGENT_SYSTEM = (
    "You are carrying out one task inside an automated workflow. Use the tools you are given "
    "when they help, calling independent tools together in one turn, and finish in as few turns "
    "as you can. Your final answer must be a JSON object matching this schema:\n{schema}"
)


def sometimes(step: Step) -> tuple[str, ...]:
    """None: every field is rendered whenever the step runs."""
    return ()


def load(site: Site) -> None:
    """`prompt`, an object `output_schema`, optional `tools` (names or `*` globs),
    `max_iterations`, `model`, `system_prompt`."""
    spec, report = site.spec, site.report
    site.string("prompt", required=True)
    site.string("system_prompt", required=False)
    schema = spec.get("output_schema")
    if "output_schema" not in spec:
        report("output_schema", "required: a JSON Schema of type object")
    elif not isinstance(schema, Mapping):
        report("output_schema", f"must be a JSON Schema object (a mapping), got {yaml_kind(schema)}")
    elif schema.get("type") not in (None, "object"):
        report("output_schema", f'`type` must be "object", got {schema.get("type")!r}')
    elif schema.get("type") is None and not isinstance(schema.get("properties"), Mapping):
        report("output_schema", "must have `type: object` or declare `properties`")
    elif "properties" in schema and not isinstance(schema["properties"], Mapping):
        report("output_schema", "`properties` must be a mapping")
    else:
        if (why := refusal(schema)) is not None:  # issue 10: never fetched, so refused up front
            report("output_schema", why)
    if "tools" in spec:
        tools = spec["tools"]
        if not isinstance(tools, list):
            report("tools", f"must be a list of tool names or `*` globs, got {yaml_kind(tools)}")
        elif not tools:
            report("tools", "is empty: omit it for the whole catalog, or name at least one tool or pattern")
        else:
            for pattern in tools:
                if not isinstance(pattern, str) or not pattern:
                    report("tools", f"every entry must be a tool name or glob, got {yaml_kind(pattern)}")
                elif not TOOL_PATTERN_RE.match(pattern):
                    report(
                        "tools",
                        f"{pattern!r} is not a tool name or `*` glob (letters, digits, _ - * only)",
                    )
    site.positive_int("max_iterations")
    site.model()


def check_patterns(runner: StepRunner, step: Step, patterns: list[str]) -> None:
    """A pattern that matches no tool is an error naming it (a typo must not shrink the set)."""
    names = [spec.name for spec in runner.catalog.list()]
    for pattern in patterns:
        if not any(fnmatchcase(name, pattern) for name in names):
            raise StepFailed(
                step.label, "agent", f"`tools` pattern {pattern!r} matches no tool in the catalog"
            )


async def prepare_agent_servers(runner: StepRunner, patterns: list[str] | None) -> None:
    """Servers whose tools the agent may see must have a known tool list before it starts."""
    servers = runner.catalog.groups()
    if patterns is None:
        wanted = set(servers)
    else:
        wanted = {s for s in servers for p in patterns if fnmatchcase(f"{s}__x", p.split("__", 1)[0] + "__x")}
    await prepare_servers(runner.catalog, wanted)


async def run(runner: StepRunner, step: Step, scope: dict[str, Any], frame: Frame) -> Any:
    import orjson

    data = step.input
    prompt = render_text(step, data.get("prompt"), scope)
    schema = data.get("output_schema") or {"type": "object"}
    system = AGENT_SYSTEM.format(schema=orjson.dumps(schema).decode())
    if data.get("system_prompt"):
        system += "\n\n" + render_text(step, data["system_prompt"], scope)
    patterns = data.get("tools")
    await prepare_agent_servers(runner, patterns)
    if patterns is not None:
        check_patterns(runner, step, list(patterns))
    model = data.get("model")
    if isinstance(model, str):
        model = render_text(step, model, scope) or None
    max_iterations = int(data.get("max_iterations") or 8)
    llm = runner.llm("chat", model)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": prompt},
    ]
    ctx = frame.ctx or runner.ctx
    kept = agent_frame(runner)
    try:
        journal = None
        if kept is not None:
            found, saved = kept[0].remembered(kept[1])
            if found:  # a resumed run: the agent goes on where it parked, not from the start
                messages = await resumed_messages(runner, ctx, saved)
            journal = RoundJournal(kept[0], kept[1], messages)
        outcome = await run_loop(
            llm=llm,
            catalog=runner.catalog,
            messages=messages,
            ctx=ctx,
            max_iterations=max_iterations,
            tools=runner.catalog.model_tools(patterns, in_plan=True),
            output_schema=schema,
            record=journal,
        )
    except Parked as waiting:
        if kept is not None and isinstance(waiting.round, WaitingRound):
            kept[0].remember(kept[1], parked_frame(waiting.round))
        raise
    except StepFailed:
        raise
    except Exception as exc:
        if isinstance(exc, GraphchatError) and exc.exit_code == 2:
            raise
        raise StepFailed(step.label, "agent", str(exc) or type(exc).__name__) from None
    output = outcome.output
    final = isinstance(output, dict)  # the spec's shape: `{}` when there is no object answer
    # graph counts an agent's inner tool calls in steps_executed (pipeline/agent.rs)
    runner.steps_executed += len(outcome.tool_calls_made)
    return {
        "output": output if final else {},
        "iterations": outcome.rounds,
        "tools_called": outcome.tool_calls_made,
        "final": final,
    }


# --- the agent's frame in a run that may park (issue 19) ---------------------------------------


def agent_frame(runner: StepRunner) -> tuple[Any, str] | None:
    """(the run's parking, `<agent step's address>#agent`) when the run may park, else None."""
    at = PARKING_AT.get()
    if runner.parking is None or at is None:
        return None
    return at[0], f"{at[1]}#agent"


class RoundJournal:
    """The agent's frame kept as it goes (the loop's `record`): at each round, its messages up
    to the round's assistant message and the round's calls; as each call finishes, its result.
    A run killed mid-round resumes the agent there: its finished calls are not made again, the
    one in flight is (issue 19)."""

    def __init__(self, parking: Any, key: str, messages: list[dict[str, Any]]) -> None:
        self.parking = parking
        self.key = key
        self.messages = list(messages)
        self.frame: dict[str, Any] | None = None

    def __call__(self, event: dict[str, Any]) -> None:
        if event.get("kind") == "assistant" and event.get("tool_calls"):
            calls = [ToolCall(c["id"], c["name"], c.get("arguments") or "") for c in event["tool_calls"]]
            message: dict[str, Any] = {
                "role": "assistant",
                "content": event.get("content") or None,
                "tool_calls": [call.to_message() for call in calls],
            }
            self.messages.append(message)
            self.frame = {"messages": list(self.messages), "calls": list(event["tool_calls"]), "finished": {}}
        elif event.get("kind") == "tool_result" and self.frame is not None:
            ids = [c.get("id") for c in self.frame["calls"]]
            if event.get("tool_call_id") not in ids:
                return
            k = ids.index(event["tool_call_id"])
            content = event.get("content") or ""
            self.frame["finished"][str(k)] = {"value": content, "is_error": bool(event.get("is_error"))}
            self.messages.append({"role": "tool", "tool_call_id": event["tool_call_id"], "content": content})
        else:
            return
        self.parking.remember(self.key, self.frame)


def parked_frame(waiting: WaitingRound) -> dict[str, Any]:
    """What the agent keeps when a call of its round parks: its messages so far (up to the
    round's assistant message), the round's calls and the results of those that finished."""
    return {
        "messages": waiting.history,
        "calls": [call.to_event() for call in waiting.calls],
        "finished": {str(k): {"value": r.value, "is_error": r.is_error} for k, r in waiting.finished.items()},
    }


async def resumed_messages(runner: StepRunner, ctx: Any, saved: dict[str, Any]) -> list[dict[str, Any]]:
    """The agent's messages at the park, with the round's results: a finished call's kept
    result, the waiting ones made now (an approval takes the person's permit or deny — a deny is
    a refusal the agent sees and goes on from; a question its answer)."""
    import orjson

    messages = list(saved["messages"])
    finished = saved.get("finished") or {}
    for k, call in enumerate(saved["calls"]):
        if str(k) in finished:
            result = ToolResult(finished[str(k)]["value"], bool(finished[str(k)]["is_error"]))
        else:
            try:
                arguments = orjson.loads(call.get("arguments") or "{}")
            except orjson.JSONDecodeError:
                arguments = {}
            token = TOOL_CALL.set(call.get("id") or None)  # its request is kept under its call id
            try:
                result = await runner.catalog.call(call["name"], arguments, ctx)
            finally:
                TOOL_CALL.reset(token)
        messages.append({"role": "tool", "tool_call_id": call.get("id") or "", "content": result.to_text()})
    return messages
