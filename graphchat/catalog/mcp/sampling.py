"""A server's sampling request (`sampling/createMessage`), served by the person's model.

- It belongs to the tool call in flight on that server (the connection finds it; a request
  with no call, or with calls of several turns in flight, is refused: nobody can say whose
  budget it would spend).
- It is always an approval (family `sampling`, `PolicyApprover.approve_sampling`): the person
  is asked with the server's name, the prompt and the token cap; --yes or the exact entry
  `sampling:SERVER` in approvals.allow approves it; nobody to answer is a refusal.
- The model is role `sampling` (falling back to `default`), with the request's `maxTokens`,
  `systemPrompt`, `temperature` and `stopSequences`; model preferences are not used (the
  person's configuration says which model serves). Its tokens and cost go to the call's
  `on_usage`, and its `llm_call` event has the role `sampling`.
- A refusal or a failed model call is an error to the server, which decides what its tool does.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from graphchat.catalog.mcp.results import content_value
from graphchat.errors import GraphchatError
from graphchat.llm.client import LLM

if TYPE_CHECKING:
    from graphchat.catalog.approvals import PolicyApprover
    from graphchat.catalog.base import CallContext
    from graphchat.workspace import Settings

ROLE = "sampling"
USER_REJECTED = -1  # the MCP specification's code for a sampling request the user rejected
_STOP_REASONS = {"length": "maxTokens", "stop": "endTurn", "tool_calls": "toolUse"}


def _blocks(content: Any) -> list[Any]:
    return list(content) if isinstance(content, list | tuple) else [content]


def _block_text(block: Any) -> str:
    """A content block as text: its text, or a note naming what it is."""
    kind = getattr(block, "type", None)
    if kind == "text":
        return str(block.text)
    if kind in ("image", "audio"):
        value = content_value(block)
        return f"[{kind}: {value.get('mime_type')}, {value.get('bytes'):,} bytes]"
    return f"[{kind or 'content'}]"


def prompt_text(params: Any) -> str:
    """What the person is shown to approve: the system prompt and every message, in full."""
    rows = []
    if params.system_prompt:
        rows.append(f"system: {params.system_prompt}")
    for message in params.messages:
        text = "\n".join(_block_text(b) for b in _blocks(message.content))
        rows.append(f"{message.role}: {text}")
    return "\n".join(rows)


def model_messages(params: Any) -> list[dict[str, Any]]:
    """The request as OpenAI-format messages (litellm's): text as text, an image as an image
    part, anything else as a note naming it."""
    out: list[dict[str, Any]] = []
    if params.system_prompt:
        out.append({"role": "system", "content": params.system_prompt})
    for message in params.messages:
        parts: list[dict[str, Any]] = []
        for block in _blocks(message.content):
            if getattr(block, "type", None) == "image" and message.role == "user":
                url = f"data:{block.mime_type};base64,{block.data}"
                parts.append({"type": "image_url", "image_url": {"url": url}})
            else:
                parts.append({"type": "text", "text": _block_text(block)})
        if all(p["type"] == "text" for p in parts):
            out.append({"role": message.role, "content": "\n".join(p["text"] for p in parts)})
        else:
            out.append({"role": message.role, "content": parts})
    return out


async def serve_sampling(
    server: str, params: Any, ctx: CallContext | None, *, settings: Settings, policy: PolicyApprover
) -> Any:
    """The CreateMessageResult of `server`'s sampling request, or the ErrorData telling it why not."""
    from mcp.types import INTERNAL_ERROR, INVALID_REQUEST, CreateMessageResult, ErrorData, TextContent

    if ctx is None:
        return ErrorData(
            code=INVALID_REQUEST,
            message="graphchat serves sampling only during a call of one of this server's tools, "
            "for the one conversation that made it",
        )
    refusal = await policy.approve_sampling(server, prompt_text(params), params.max_tokens, ctx)
    if refusal is not None:
        if ctx.events is not None:
            ctx.events.info(f"sampling request of MCP server '{server}' refused: {refusal}")
        return ErrorData(
            code=USER_REJECTED,
            message=f"graphchat refused the sampling request of MCP server '{server}': {refusal}",
        )
    try:
        config = settings.model_for(ROLE)
    except GraphchatError as exc:
        return ErrorData(code=INTERNAL_ERROR, message=f"graphchat has no model for sampling: {exc.message}")
    extra = {**config.extra, "max_tokens": params.max_tokens}
    if params.stop_sequences:
        extra["stop"] = list(params.stop_sequences)
    temperature = params.temperature if params.temperature is not None else config.temperature
    config = replace(config, extra=extra, temperature=temperature)

    llm = LLM(config, events=ctx.events)
    try:
        completion = await llm.complete(model_messages(params), site=f"sampling:{server}", stream=False)
    except GraphchatError as exc:
        return ErrorData(code=INTERNAL_ERROR, message=f"the model call failed: {exc.message}")
    finally:
        if ctx.on_usage is not None and llm.usage.calls:
            ctx.on_usage(llm.usage)
    return CreateMessageResult(
        role="assistant",
        content=TextContent(type="text", text=completion.content),
        model=config.model,
        stop_reason=_STOP_REASONS.get(completion.finish_reason or "stop", "endTurn"),
    )
