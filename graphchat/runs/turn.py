"""Run an `ask`/`chat` turn, park it, resume it (issue 19): the use cases behind `ask`, the
warm helper and a chat that answers a parked thread. Shown through a `Front`.

A parked turn resumes from its thread: the trailing tool calls without results are its
position; the run record keeps only which calls wait on which request and the results of the
calls that finished after them (`held`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.agent.loop import WaitingRound
from graphchat.asks import TURN_FRAMES, Parked
from graphchat.catalog.approvals import remember_allow
from graphchat.catalog.base import TURN_CALL_IDS, CallContext, ToolResult
from graphchat.errors import GraphchatError
from graphchat.host import load_settings, open_host
from graphchat.llm.types import ToolCall
from graphchat.requests_text import answer_command, answer_help
from graphchat.runs.frames import TurnFrames
from graphchat.runs.parked import ParkingAsker, RunRecord, SettledAsker, stored_answer, waiting_on
from graphchat.runs.requests import RequestStore
from graphchat.runs.retention import prune_now_and_then
from graphchat.threads import lines as ev

if TYPE_CHECKING:
    from graphchat.runs.front import Front


def open_turn_host(
    settings: Any, flags: dict[str, Any], front: Front, catalog: Any = None
) -> tuple[Any, Any]:
    """The host of `ask`; headless (nobody can answer here), its asker parks what it cannot
    answer (issue 9). Returns (host, the parking asker or None). `catalog`: a catalog kept by
    a warm helper (the host uses it and leaves it running)."""
    if not flags.get("park"):
        return open_host(
            settings, events=front.sink(), here=front.here, answers=flags.get("answers"), catalog=catalog
        ), None

    made: list[ParkingAsker] = []

    def here(sink: Any) -> Any:
        inner = front.here(sink)
        if inner.can_answer:
            return inner
        made.append(ParkingAsker(inner, RequestStore(settings.workspace), sink))
        return made[0]

    host = open_host(settings, events=front.sink(), answers=flags.get("answers"), here=here, catalog=catalog)
    return host, (made[0] if made else None)


def refuse_parked_thread(thread: Any, workspace: Any = None, home: str | None = None) -> None:
    """`ask --thread ID` / `ask -c` on a thread whose turn waits for a person: exit 1 naming the
    request, its question and the exact command that answers it (an answered one: the command
    that resumes it). A new message would leave the waiting call without its answer."""
    waiting = waiting_on(thread)
    if not waiting:
        return
    ids = ", ".join(waiting)
    request = None
    if workspace is not None:
        request = RequestStore(workspace).find(waiting[0])
    if request is None:
        hint = f"answer it first: graphchat answer {waiting[0]} VALUE (or permit/deny/decline it)"
        raise GraphchatError(f"thread {thread.id} waits on request {ids}", hint=hint)

    where = f" --home {home}" if home else ""
    if request.state == "open":
        lines = [f"answer it: {answer_command(request.public(), home)}"]
        lines += [f"  {line}" for line in answer_help(request.public(), home)]
        lines.append(f"(or in a chat: graphchat{where} chat --thread {thread.id})")
    else:
        lines = [f"it was {request.state}; resume the turn: graphchat{where} resume {request.id}"]
    raise GraphchatError(
        f"thread {thread.id} waits on request {ids}: {request.question}", hint="\n  ".join(lines)
    )


async def ask_turn(
    settings: Any,
    flags: dict[str, Any],
    message: str,
    thread_flag: str | None,
    front: Front,
    *,
    catalog: Any = None,
    cwd: str | None = None,
) -> int:
    """One `ask` turn on `settings`, shown through `front` (this terminal: TerminalFront; a
    warm helper's client: graphchat.warm.helper.RemoteFront). `catalog`: the helper's running
    catalog; `cwd`: the asking process's working directory (a helper never changes its own)."""
    import itertools

    TURN_CALL_IDS.set(itertools.count(1))  # this turn's tool calls: c1, c2, … (a helper runs many)
    frames = None
    host, parking = open_turn_host(settings, flags, front, catalog)
    try:
        thread = host.continued(thread_flag)
        if thread is None and thread_flag is not None:
            front.warn("there is no thread to continue yet: starting a new one")
        if thread is not None:
            refuse_parked_thread(thread, settings.workspace, flags.get("home"))
        session = host.session(thread, model_override=flags.get("model"), assume_yes=bool(flags.get("yes")))
        session.stream = not flags["no_stream"]
        session.wait_for_thread = flags.get("wait", True)
        frames = None
        if parking is not None:
            parking.thread_id = session.thread.id
            frames = keep_frames(settings, session.thread.id)
        await host.warm_up()
        if flags.get("attach"):  # the resources' contents go into the message (and the thread)
            # on `ask`'s path before it hands the turn to a warm helper: imported when used
            from graphchat.catalog.mcp.features import parse_attach, with_attachments

            refs = [parse_attach(ref) for ref in flags["attach"]]
            message = await with_attachments(host.catalog, message, refs, settings.max_tool_result_chars)
        return await run_turn(host, session, flags, lambda **kw: session.turn(message, **kw), front, cwd=cwd)
    finally:
        if frames is not None:
            TURN_FRAMES.reset(frames)
        await host.aclose()  # no server process is left behind, whatever happened


def keep_frames(settings: Any, thread_id: str) -> Any:
    """While this turn runs, a plan it calls keeps its frames (`runs/frames.py`); the token
    that gives the previous value back."""
    return TURN_FRAMES.set(TurnFrames(RequestStore(settings.workspace), thread_id))


async def run_turn(
    host: Any,
    session: Any,
    flags: dict[str, Any],
    start: Any,
    front: Front,
    record: Any = None,
    cwd: str | None = None,
) -> int:
    """Run (or resume) the turn and present it: the answer on stdout; a parked turn exit 5."""
    streaming = not (flags["json"] or flags["no_stream"])
    front.begin(streaming)
    try:
        result = await start(
            on_text=front.text if streaming else None,
            on_tools=front.narration if streaming else None,
        )
    except Parked as parked:
        front.finish()
        return park_turn(host, flags, parked, front, record, cwd=cwd)
    except BaseException as error:
        # on a terminal the error line must not start after a partial answer; elsewhere a
        # partial answer is not the deliverable: stdout stays empty (the thread keeps it)
        front.finish(complete=False)
        if record is not None and isinstance(error, GraphchatError):
            end_run(record, error.exit_code, error.message)  # the resumed turn failed
        raise
    if record is not None:
        end_run(record, 0)  # the resumed turn ended: kept as finished (`graphchat runs`)
    payload = None
    if flags["json"]:
        payload = {
            "content": result.content,
            "thread_id": result.thread_id,
            "tool_calls_made": result.tool_calls_made,
            "usage": result.usage,
        }
    front.answer(result.content, payload)
    host.events.usage_summary(result.usage)  # after the answer: on a terminal, its own line
    return 0


def end_run(record: Any, exit_code: int, error: str | None = None) -> None:
    """A resumed turn ended: its record is kept as finished or failed until pruned."""
    try:
        record.end(exit_code, error)
    except OSError:  # a full disk: it stays listed, and `resume` says the thread went on
        pass
    record.unlock()
    prune_now_and_then(RequestStore(Path(record.data["workspace"])))


def park_turn(
    host: Any,
    flags: dict[str, Any],
    parked: Any,
    front: Front,
    record: Any = None,
    *,
    cwd: str | None = None,
) -> int:
    """Keep a parked turn's position (the calls, which wait, the others' results) and report
    it (exit 5)."""
    store = RequestStore(host.settings.workspace)
    round = parked.round
    data = {
        "command": "ask",
        "flags": flags,
        "cwd": cwd or os.getcwd(),
        "workspace": str(host.settings.workspace),
        "thread": parked.thread_id,
        "calls": [call.to_event() for call in round.calls],
        "parked": {str(k): r["id"] for k, r in round.parked.items()},
        "held": {str(k): {"value": r.value, "is_error": r.is_error} for k, r in round.held.items()},
        "requests": [round.parked[k]["id"] for k in sorted(round.parked)],
        "started": (record.data.get("started") if record is not None else None) or time.time(),
    }
    if record is None:
        record = RunRecord.new(store, data)
    else:
        record.data = data
    record.save()
    record.unlock()  # parked again: the next answer may resume it, from this process too
    for request_id in data["requests"]:
        request = store.get(request_id)
        request.run = record.id
        store.save(request)
    requests = [store.get(i).public() for i in data["requests"]]
    return int(front.parked(requests, flags["json"], flags.get("home")))


async def resumed_results(host: Any, store: Any, record: Any, turn: Any = None) -> list[dict[str, Any]]:
    """The results of the calls a parked turn waited on, in call order: an approved call runs
    now, a refused one is a refusal, an answered `ask_user` gets its answer as typed; a call
    whose server's own question parked it (sampling, elicitation) is made again, and the stored
    answer settles that question (the server's work before it repeats); a plan call that kept
    its frames is made again and resumes inside them (issue 19). A call that waits again parks
    the turn again (`asks.Parked`, its round: the calls still waiting and the results of the
    others). `turn`: the resumed turn's CallContext (the calls' usage counts in it)."""
    from dataclasses import replace

    data = record.data
    base = turn or CallContext(asker=host.asker, events=host.events, surface="agent")
    calls = data["calls"]
    parked = {int(k): v for k, v in data["parked"].items()}
    held = {int(k): v for k, v in data["held"].items()}
    frames = TURN_FRAMES.get()
    results: dict[int, ToolResult] = {}
    again: dict[int, dict[str, Any]] = {}
    for k in range(min([*parked, *held]), len(calls)):
        call = calls[k]
        name = call["name"]
        if k in held:
            results[k] = ToolResult(held[k]["value"], bool(held[k]["is_error"]))
            continue
        request = store.get(parked[k])
        framed = frames is not None and frames.record(call.get("id") or "") is not None
        keeps = frames is not None and frames.keeps(name)  # an approved plan call: made with frames
        ctx = base
        if framed:  # a plan call that parked inside its frames: it resumes there
            pass
        elif (request.source or {}).get("park_as"):  # the server's own question: made again
            asker = SettledAsker(host.asker, request.source["park_as"], stored_answer(request))
            # the call was running when its server asked: its own approval was given then
            ctx = replace(base, asker=asker, assume_yes=bool(data["flags"].get("yes")), permitted=name)
        elif request.kind == "approval" and request.state == "answered":
            if isinstance(request.answer, dict) and request.answer.get("always"):
                remember_allow(host.settings, name)
            ctx = replace(base, permitted=name)  # this call only: not a sampling inside it
        elif request.kind == "approval":
            why = f" ({request.reason})" if request.reason and request.reason != "denied" else ""
            results[k] = ToolResult.error(
                f"{name} was not run: the user refused it{why}. "
                "Do not retry it; continue without it or tell the user what you wanted to do."
            )
            continue
        else:
            if request.state == "answered":
                results[k] = ToolResult({"answer": request.answer, "answered": True})
            else:
                results[k] = ToolResult({"answered": False, "reason": request.state})
            continue
        try:
            results[k] = await made_again(host, frames if framed or keeps else None, call, ctx)
        except Parked as waiting:
            again[k] = waiting.request
    if again:
        round = WaitingRound(
            [ToolCall(c.get("id") or "", c["name"], c.get("arguments") or "") for c in calls],
            again,
            {k: r for k, r in results.items()},
        )
        raise Parked([again[k] for k in sorted(again)], round=round, thread_id=data["thread"])
    return [
        dict(ev.tool_result(calls[k].get("id") or "", calls[k]["name"], r.to_text(), is_error=r.is_error))
        for k, r in sorted(results.items())
    ]


async def made_again(host: Any, frames: Any, call: dict[str, Any], ctx: Any) -> Any:
    """A waiting call made now: through its frames when it kept them (a plan call)."""
    if frames is not None:
        return await frames.call(host.catalog, call.get("id") or "", call["name"], _arguments(call), ctx)
    return await host.catalog.call(call["name"], _arguments(call), ctx)


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    import json

    try:
        arguments = json.loads(call.get("arguments") or "{}")
    except ValueError:
        return {}
    return arguments if isinstance(arguments, dict) else {}


def resume_ask(store: Any, record: Any, front: Front) -> int:
    """Resume a parked `ask` turn in this process (issue 9)."""
    import asyncio

    flags = record.data["flags"]
    settings = load_settings(record.data["workspace"], model=flags.get("model"), needs="chat")

    async def go() -> int:
        host, parking = open_turn_host(settings, flags, front)
        try:
            thread = host.threads.open(record.data["thread"])
            session = host.session(
                thread, model_override=flags.get("model"), assume_yes=flags.get("yes", False)
            )
            session.stream = not flags.get("no_stream")
            frames = None
            if parking is not None:
                parking.thread_id = thread.id
                frames = keep_frames(settings, thread.id)
            await host.warm_up()

            async def results(ctx: Any) -> list[dict[str, Any]]:  # in the turn: its usage, its budget
                # a call that waits again raises `Parked`: the session marks the thread parked
                # and `run_turn` parks the turn again on the same record
                return await resumed_results(host, store, record, ctx)

            return await run_turn(
                host, session, flags, lambda **kw: session.resume(results, **kw), front, record
            )
        finally:
            if frames is not None:
                TURN_FRAMES.reset(frames)
            await host.aclose()

    return asyncio.run(go())
