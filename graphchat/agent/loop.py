"""The tool-calling loop: rounds of model call → all tool calls at once → results in call order.

Used by `ask`, `chat` and the plan `agent` step alike. Tools are reached only through
`Catalog.call`. Each result is recorded in the thread the moment its call finishes (a process
killed mid-round loses only the calls still running); cancellation (Ctrl-C, SIGTERM) cancels the
model call and the in-flight tools and records those as cancelled. The replay pairs results with
their calls by call id (graphchat.threads.repair).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graphchat.asks import TOOL_CALL, TURN_FRAMES, Parked
from graphchat.catalog.base import ToolResult
from graphchat.errors import GraphchatError
from graphchat.fsutil import describe_failure
from graphchat.jsonschema_util import first_error
from graphchat.llm.budget import current as current_budget
from graphchat.llm.jsonreply import parse_json_reply
from graphchat.llm.types import ToolCall, Usage
from graphchat.llm.vision import accepts_images
from graphchat.media import image_message, model_text
from graphchat.threads import lines as ev
from graphchat.threads.repair import shorten_tool_result

if TYPE_CHECKING:
    from graphchat.catalog.base import CallContext, Catalog
    from graphchat.llm.types import ModelClient

Record = Callable[[dict[str, Any]], None]
CANCELLED_MESSAGE = "cancelled before it finished (the turn was interrupted: Ctrl-C or a signal)"


class IterationsExhausted(GraphchatError):
    """The loop used its rounds without a final answer (with `progress`: without progress)."""


@dataclass
class LoopResult:
    content: str
    output: Any = None  # the parsed object when an output_schema was given
    rounds: int = 0
    tool_calls_made: list[dict[str, Any]] = field(default_factory=list)  # [{tool, round}]
    usage: Usage = field(default_factory=Usage)


def parse_arguments(call: ToolCall) -> tuple[Any, str | None]:
    """The call's arguments as JSON, or an error message the model can act on."""
    text = call.arguments.strip() if call.arguments else ""
    if not text:
        return {}, None
    try:
        return json.loads(text), None
    except ValueError as exc:
        return None, (
            f"the arguments of {call.name} are not valid JSON ({exc}); "
            "call the tool again with a JSON object as arguments"
        )


async def _call_one(catalog: Catalog, call: ToolCall, ctx: CallContext) -> ToolResult:
    arguments, problem = parse_arguments(call)
    if problem is not None:
        if ctx.events is not None:
            ctx.events.tool_finished(call.name, 0.0, True, problem)
        return ToolResult.error(problem)

    TOOL_CALL.set(call.id or None)  # this call's own task: a question it parks is keyed by it
    frames = TURN_FRAMES.get()
    try:
        if frames is not None and frames.keeps(call.name):  # a plan the turn calls keeps its frames
            return await frames.call(catalog, call.id, call.name, arguments, ctx)  # type: ignore[no-any-return]
        return await catalog.call(call.name, arguments, ctx)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # Catalog.call should not raise; a bug there must not sink the round
        return ToolResult.error(f"{call.name}: {describe_failure(exc)}")


def _result_event(call: ToolCall, result: ToolResult) -> dict[str, Any]:
    return dict(
        ev.tool_result(call.id, call.name, result.to_text(), is_error=result.is_error, ms=round(result.ms, 1))
    )


@dataclass
class WaitingRound:
    """A round whose calls wait for a person (issue 9), carried by `asks.Parked.round`:
    `parked` maps a call's position to its request; `held` are the results of the calls after
    the first parked one (recorded once the parked ones have theirs, so results stay paired
    with calls by position)."""

    calls: list[ToolCall]
    parked: dict[int, dict[str, Any]]
    held: dict[int, ToolResult]
    # what an `agent` step keeps to resume where it was (issue 19): the loop's messages up to
    # this round's assistant message, and every finished call's result in the round
    history: list[dict[str, Any]] = field(default_factory=list)
    finished: dict[int, ToolResult] = field(default_factory=dict)


async def run_tool_round(
    catalog: Catalog, calls: list[ToolCall], ctx: CallContext, record: Record | None = None
) -> list[ToolResult]:
    """Run every call at once (one task each); record each result as soon as it finishes.

    One failing call never cancels the others. Returns the results in call order. On
    cancellation the in-flight calls are cancelled, and each call not yet recorded is recorded:
    its result if it completed meanwhile, else a "cancelled" error. A call whose question was
    opened as a request (`asks.Parked`) waits, unrecorded: the others finish and are recorded
    (replay pairs results with calls by id), and the round raises `Parked` carrying a `WaitingRound`.
    """
    import time

    started = time.perf_counter()
    tasks = [asyncio.create_task(_call_one(catalog, call, ctx), name=f"tool:{call.name}") for call in calls]
    position = {task: k for k, task in enumerate(tasks)}
    results: dict[int, ToolResult] = {}
    parked: dict[int, dict[str, Any]] = {}
    try:
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=position.__getitem__):
                k = position[task]
                try:
                    results[k] = task.result()
                except Parked as waiting:
                    parked[k] = waiting.request
                    results[k] = ToolResult.error("waiting for a person")
                    continue
                if record is not None:
                    record(_result_event(calls[k], results[k]))
    except BaseException:
        for task in tasks:
            if not task.done():
                task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if record is not None:
            budget = current_budget()
            why = (
                f"cancelled before it finished ({budget.deadline_message()})"
                if budget is not None and budget.timed_out
                else CANCELLED_MESSAGE
            )
            for k, (call, task) in enumerate(zip(calls, tasks, strict=True)):
                if k in results:
                    continue
                if task.cancelled() or task.exception() is not None:
                    result = ToolResult.error(why)
                    result.ms = (time.perf_counter() - started) * 1000  # the time it ran, not 0
                else:
                    result = task.result()
                record(_result_event(call, result))
        raise
    if parked:
        finished = {k: r for k, r in results.items() if k not in parked}
        raise Parked(
            [parked[k] for k in sorted(parked)], round=WaitingRound(calls, parked, {}, finished=finished)
        )
    return [results[k] for k in range(len(calls))]


def _assistant_event(content: str, calls: list[ToolCall]) -> dict[str, Any]:
    return dict(ev.assistant(content or None, [call.to_event() for call in calls]))  # type: ignore[misc]


async def run_loop(
    *,
    llm: ModelClient,
    catalog: Catalog,
    messages: list[dict[str, Any]],
    ctx: CallContext,
    max_iterations: int,
    on_text: Callable[[str], None] | None = None,
    tools: list[dict[str, Any]] | None = None,
    output_schema: dict[str, Any] | None = None,
    record: Record | None = None,
    max_tool_result_chars: int = 20000,
    site: str = "chat",
    stream: bool = True,
    on_tools: Callable[[str], None] | None = None,
    progress: Callable[[list[ToolCall], list[ToolResult]], bool] | None = None,
) -> LoopResult:
    """Run rounds until the model answers in text (see module doc); `messages` is not modified.

    With `output_schema`, the answer must be a JSON object of that schema: the last allowed round
    withdraws the tools and forces it; `output` is the parsed object. `on_tools(text)` is told,
    before a round's tools run, that the text streamed in that round was narration, not the
    answer (the host shows it apart); without it, rounds' texts are separated by a blank line.

    `max_iterations` bounds the rounds of the turn; with `progress`, it bounds the rounds in a
    row without progress instead (their calls run, the last included): a round whose calls
    `progress` accepts (the workbench: an edit that landed) starts the count again.
    """
    history = list(messages)
    tool_list = catalog.model_tools() if tools is None else tools
    result = LoopResult(content="")
    usage_before = llm.usage

    def finish(content: str, output: Any = None) -> LoopResult:
        result.content = content
        result.output = output
        result.usage = llm.usage - usage_before
        return result

    streamed: list[str] = []  # this round's text so far, kept if the round is cancelled

    shown_before = [False]  # whether an earlier round already streamed text

    def forward(text: str) -> None:
        if on_text is not None:
            if not streamed and shown_before[0] and on_tools is None:
                on_text("\n\n")  # keep the rounds' texts apart on the terminal
            on_text(text)
        streamed.append(text)
        shown_before[0] = True

    idle = 0  # rounds since the last one that made progress (without `progress`: all of them)
    round_no = 0
    while True:
        round_no += 1
        idle += 1
        last = idle >= max_iterations
        result.rounds = round_no
        if ctx.events is not None:
            ctx.events.agent_round(round_no)
        if output_schema is not None and last:
            output = await llm.structured(history, output_schema, site=site)
            content = json.dumps(output, ensure_ascii=False)
            if record is not None:
                record(_assistant_event(content, []))
            return finish(content, output)
        streamed.clear()
        try:
            completion = await llm.complete(
                history, tools=tool_list or None, on_text=forward, site=site, stream=stream
            )
        except asyncio.CancelledError:
            if streamed and record is not None:  # what the person already saw stays in the thread
                record(_assistant_event("".join(streamed), []))
            raise
        calls = completion.tool_calls
        if record is not None:
            record(_assistant_event(completion.content, calls))
        if not calls:
            if output_schema is None:
                return finish(completion.content)
            output = await _final_output(llm, history, completion.content, output_schema, site)
            return finish(completion.content, output)
        if last and progress is None:
            raise IterationsExhausted(
                f"the agent stopped after {max_iterations} rounds of tool calls without a final answer",
                hint="raise settings.max_agent_iterations in graphchat.yaml, or ask for less at once",
            )
        history.append(completion.to_message())
        if on_tools is not None:
            on_tools("".join(streamed))
        result.tool_calls_made.extend({"tool": call.name, "round": round_no} for call in calls)

        try:
            tool_results = await run_tool_round(catalog, calls, ctx, record)
        except Parked as waiting:
            if isinstance(waiting.round, WaitingRound):
                waiting.round.history = list(history)  # where an agent step resumes
            raise
        images: list[tuple[str, dict[str, Any]]] = []
        for call, tool_result in zip(calls, tool_results, strict=True):
            text, media = model_text(tool_result)  # images described, never base64 text
            images += [(call.name, entry) for entry in media if entry.get("type") == "image"]
            if len(text) > max_tool_result_chars and ctx.events is not None:  # say it where it shows
                ctx.events.info(
                    f"  {call.name}: result cut to {max_tool_result_chars:,} of {len(text):,} characters "
                    "for the model (settings.max_tool_result_chars)"
                )
            history.append(
                {
                    "role": "tool",
                    "tool_call_id": call.id,
                    "content": shorten_tool_result(text, max_tool_result_chars),
                }
            )
        if images and _accepts_images(llm):  # tool messages take only text: the images follow them
            history.append(image_message(images))
        if progress is not None:
            if progress(calls, tool_results):
                idle = 0
            elif last:
                raise IterationsExhausted(
                    f"the agent stopped after {max_iterations} rounds of tool calls in a row without progress"
                )


def _accepts_images(llm: ModelClient) -> bool:
    config = getattr(llm, "config", None)
    if config is None:
        return False

    return accepts_images(config)


async def _final_output(
    llm: ModelClient, history: list[dict[str, Any]], content: str, schema: dict[str, Any], site: str
) -> Any:
    """The text answer as the schema's object: parsed directly when it fits, else one structured call."""
    try:
        value = parse_json_reply(content)
    except ValueError:
        value = None
    else:
        if first_error(schema, value) is None:
            return value
    return await llm.structured([*history, {"role": "assistant", "content": content}], schema, site=site)
