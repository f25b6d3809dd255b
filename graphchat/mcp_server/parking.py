"""Plans of `mcp serve` that wait for a person (issue 19, build 5).

A client that cannot elicit gets a parked plan instead of a failed one: the run's record and
its requests are written as `plan run` writes them (`requests/`, `requests/runs/`), marked as
started by `mcp serve`, and the call's result says the run waits — `{parked: true, requests}`
plus one line of text. `graphchat_requests` lists the open requests of those runs (the shape of
`requests --json`); `graphchat_answer {id, value}` answers one of their questions and resumes
the run in this server, which may be a later process than the one that parked it: everything
is on disk. Approvals are never settled here — the client's model must not approve its own
call: a person does, with `graphchat permit`.

The parking, answering and resuming are the ones `plan run` and `graphchat answer` use; this
module calls each through one function (`fresh`, `settle`, `resumed`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from graphchat.display import safe
from graphchat.errors import GraphchatError
from graphchat.runs import answers
from graphchat.runs.parked import PlanParking, RunRecord
from graphchat.runs.plan import RunFlags, parking_for
from graphchat.runs.requests import AlreadySettled, RequestStore, read_answer

if TYPE_CHECKING:
    from graphchat.catalog.base import ToolResult
    from graphchat.events import EventSink
    from graphchat.workspace import Settings

ORIGIN = "mcp serve"  # the mark on a run record this server's runs write
REQUESTS_TOOL = "graphchat_requests"
ANSWER_TOOL = "graphchat_answer"


def tools() -> list[Any]:
    """The two tools every `mcp serve` offers beside the plans."""
    from mcp.types import Tool, ToolAnnotations

    return [
        Tool(
            name=REQUESTS_TOOL,
            description="The open questions that plans this server started wait on (a plan call "
            "that returned {parked: true}). Answer one with graphchat_answer. Approvals are listed "
            "too, but only a person settles them (graphchat permit ID).",
            input_schema={"type": "object", "properties": {}},
            annotations=ToolAnnotations(read_only_hint=True),
        ),
        Tool(
            name=ANSWER_TOOL,
            description="Answer a question a parked plan waits on and resume the plan: the result is "
            "the plan's result, or {parked: true, requests} when it waits again. `value`: the "
            "answer — an option's text or number, free text, or for a form an object of its fields.",
            input_schema={
                "type": "object",
                "properties": {"id": {"type": "string"}, "value": {}},
                "required": ["id", "value"],
            },
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False),
        ),
    ]


def _store(settings: Settings) -> Any:
    return RequestStore(settings.workspace)


class ServedParking:
    """The parking of one plan call of `mcp serve` (`plan run`'s, wrapped): it remembers whether
    the run parked, and the record carries the server's mark."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.did_park = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def parked(self, *args: Any, **kwargs: Any) -> None:
        self.inner.record.data["origin"] = ORIGIN
        self.inner.parked(*args, **kwargs)
        self.did_park = True


def fresh(settings: Settings, plan: Any, inputs: Any, events: EventSink | None) -> ServedParking:
    """The parking of a fresh plan call (its record is written only if the run parks)."""
    flags = RunFlags(home=str(settings.workspace))  # `graphchat answer` may resume it too
    return ServedParking(parking_for(settings, plan, inputs, flags, events))


def parked_result(requests: list[dict[str, Any]]) -> Any:
    """The tool result of a run that waits: not an error; structured `{parked, requests}` and one
    line naming each request and its question."""
    from mcp.types import CallToolResult, TextContent

    asked = "; ".join(f"request {r['id']}: {r['question']}" for r in requests)
    line = safe(
        f"the plan waits for a person: {asked} (answer with {ANSWER_TOOL} {{id, value}})", newlines=False
    )
    return CallToolResult(
        content=[TextContent(type="text", text=line)],
        structured_content={"parked": True, "requests": requests},
        is_error=False,
    )


def finish(parking: ServedParking, result: ToolResult) -> Any:
    """After a plan call with parking: the parked result, or the run ends (finished or failed)."""
    if parking.did_park and isinstance(result.value, dict):
        return parked_result(list(result.value.get("requests") or []))
    parking.inner.finished(1 if result.is_error else 0, result.error_message if result.is_error else None)
    return None


# --- graphchat_requests ----------------------------------------------------------------------


def served(store: Any, request: Any) -> Any:
    """The run record of `request` when a `mcp serve` started its run, else None."""
    record = RunRecord.load(store, request.run) if request.run else None
    return record if record is not None and record.data.get("origin") == ORIGIN else None


def list_requests(settings: Settings) -> dict[str, Any]:
    """`requests --json`'s shape, over the open requests of runs this workspace's server started."""
    store = _store(settings)
    found = [r.public() for r in store.all() if served(store, r) is not None]
    return {"requests": found, "count": len(found)}


# --- graphchat_answer ------------------------------------------------------------------------


def settle(settings: Settings, arguments: dict[str, Any]) -> tuple[Any, Any, Any]:
    """Check and record an answer: (store, request, record). A GraphchatError says why not, and
    the request stays open."""
    request_id, value = arguments.get("id"), arguments.get("value")
    if not isinstance(request_id, str) or not request_id:
        raise GraphchatError(f"{ANSWER_TOOL}: `id` must be a request id (a string)")
    store = _store(settings)
    request = store.get(request_id)
    if request.state != "open":
        raise AlreadySettled(f"request {request_id} was already {request.state}")
    record = served(store, request)
    if record is None:
        raise GraphchatError(f"request {request_id} is not one of a plan this server started")
    if request.kind == "approval":
        raise GraphchatError(
            f"request {request_id} is an approval: only a person settles it (graphchat permit {request_id})"
        )
    text = value if isinstance(value, str) else json.dumps(value)
    try:
        answer = read_answer(request, text)
    except ValueError as exc:
        raise GraphchatError(f"answer refused: {exc} (request {request_id} stays open)") from None
    # the one way an answer arrives: a plan changed since it parked cannot resume (refused), a
    # refused write is a GraphchatError — the request stays open either way
    answers.settle(store, request_id, "answered", answer)
    return store, store.get(request_id), record


def still_waiting(store: Any, record: Any) -> list[dict[str, Any]]:
    """The requests of `record` still open (its run resumes once there are none)."""
    waiting = []
    for request_id in record.data.get("requests") or []:
        request = store.find(request_id)
        if request is not None and request.state == "open":
            waiting.append(request.public())
    return waiting


def resumed(store: Any, record: Any, events: EventSink | None, request_id: str) -> ServedParking:
    """The parking of a parked run resumed in this server (held by this process meanwhile)."""
    record.lock(request_id)
    return ServedParking(PlanParking(store, record, events, resumed=True))


def release(parking: ServedParking) -> None:
    """A server lives on after a resume: the run's lock is given back (a process that ends
    releases it by itself)."""
    parking.inner.record.unlock()
