"""What a model call returns (text, tool calls, usage: tokens and cost), and `ModelClient`, what
the agent loop and the plan executor ask of a model (`graphchat.llm.client.LLM`, or a test double)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON string, exactly as the model sent it

    def to_message(self) -> dict[str, Any]:
        """The OpenAI-format entry of an assistant message's `tool_calls`."""
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }

    def to_event(self) -> dict[str, Any]:
        """The thread-event form (docs/threads.md)."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass
class Usage:
    """Tokens and cost of one or more model calls. `cost_usd` is None when no price is known;
    `failed`: how many of the `calls` failed over to a fallback model (or failed with it)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    calls: int = 0
    failed: int = 0

    def __add__(self, other: Usage) -> Usage:
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            cost,
            self.calls + other.calls,
            self.failed + other.failed,
        )

    def __sub__(self, other: Usage) -> Usage:
        """What was spent since `other` (a snapshot of the same running total) was taken."""
        if self.cost_usd is None:
            cost = None
        else:
            cost = self.cost_usd - (other.cost_usd or 0.0)
        return Usage(
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            cost,
            self.calls - other.calls,
            self.failed - other.failed,
        )

    def to_dict(self) -> dict[str, Any]:
        """`{calls, failed?, input_tokens, output_tokens, cost_usd?}` (docs/cli.md)."""
        out: dict[str, Any] = {"calls": self.calls}
        if self.failed:
            out["failed"] = self.failed
        out["input_tokens"] = self.input_tokens
        out["output_tokens"] = self.output_tokens
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 8)
        return out


@dataclass
class Completion:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None

    def to_message(self) -> dict[str, Any]:
        """The assistant message to append to the history sent next."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content or None}
        if self.tool_calls:
            message["tool_calls"] = [call.to_message() for call in self.tool_calls]
        else:
            message["content"] = self.content
        return message


class ModelClient(Protocol):
    """A model the loop and the plan executor can call; `graphchat.llm.client.LLM` is the real one.

    `usage` is the running total of every call made through it.
    """

    usage: Usage

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        on_text: Callable[[str], None] | None = None,
        tool_choice: Any = None,
        response_format: Any = None,
        site: str = "chat",
        stream: bool = True,
    ) -> Completion:
        """One model call; text reaches `on_text` as it streams."""
        ...

    async def structured(
        self, messages: list[dict[str, Any]], schema: dict[str, Any], *, site: str, name: str = "output"
    ) -> dict[str, Any]:
        """A reply forced to `schema`, parsed and validated."""
        ...

    async def complete_with_schema(
        self, messages: list[dict[str, Any]], schema: dict[str, Any], *, site: str, name: str = "output"
    ) -> Completion:
        """One call asking for a reply of `schema`; the reply is neither parsed nor retried."""
        ...
