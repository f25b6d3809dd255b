"""A plan call that outlives one request: 2026-07-28 sessions, where a server may not push
requests. The plan keeps running in a background task; each question becomes an
InputRequiredResult, and the client's retry (with `input_responses` and our `request_state`
token) delivers the answer."""

from __future__ import annotations

import asyncio
from typing import Any


class Run:
    """One plan call on a 2026-07-28 session. Its task runs the plan; each question the asker
    sends becomes an InputRequiredResult, and the client's retry delivers the answer."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.outbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        self.answer: asyncio.Future[Any] | None = None
        self.key: str | None = None
        self.asked = 0
        self.task: asyncio.Task[Any] | None = None
        self.handler_waiting = False

    async def elicit(self, message: str, schema: dict[str, Any]) -> Any:
        from mcp.types import ElicitRequest, ElicitRequestFormParams

        self.asked += 1
        self.key = f"q{self.asked}"
        self.answer = asyncio.get_running_loop().create_future()
        request = ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))
        await self.outbox.put(("question", request))
        return await self.answer

    def deliver(self, responses: dict[str, Any] | None) -> None:
        """The client's retry: hand the answer (or the lack of one) to the waiting question."""
        from mcp.types import ElicitResult

        future = self.answer
        if future is None or future.done():
            return
        response = (responses or {}).get(self.key or "")
        if response is None:
            future.set_exception(RuntimeError("the client's retry carried no answer"))
            return
        if not isinstance(response, ElicitResult):
            try:
                response = ElicitResult.model_validate(response.model_dump(by_alias=True, exclude_none=True))
            except Exception as exc:
                future.set_exception(RuntimeError(f"the client's answer is not an elicitation result: {exc}"))
                return
        future.set_result(response)
