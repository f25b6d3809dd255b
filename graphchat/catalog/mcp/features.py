"""MCP beyond tools, as the client side: the roots graphchat declares, and a server's prompts
and resources as plain JSON values (for `mcp prompts/prompt/resources/read` and
`builtin__read_resource`), resources attached to a message (`ask --attach`, `@SERVER:URI` in
chat) and a prompt sent as a message (`/SERVER:NAME` in chat).

Pure shaping of what the SDK returns; the requests themselves go through one server's
`Connection.request` (via `McpSource.request`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSpec
from graphchat.catalog.mcp.connection import ServerUnavailable, describe
from graphchat.catalog.mcp.results import content_value, resource_contents
from graphchat.errors import EXIT_USAGE, GraphchatError
from graphchat.turn_context import WORKING_DIR

if TYPE_CHECKING:
    from graphchat.workspace import Settings

READ_RESOURCE = "builtin__read_resource"


def roots_of(settings: Settings, cwd: str | None = None) -> list[tuple[str, str]]:
    """(file:// URI, name) of each root: settings.mcp_roots (relative to the workspace), else the
    workspace and the folder graphchat runs in (`cwd`, else the turn's), when that is another one."""
    if settings.mcp_roots is not None:
        folders = [Path(p).expanduser() for p in settings.mcp_roots]
        folders = [p if p.is_absolute() else settings.workspace / p for p in folders]
        return [(_uri(p), p.name or str(p)) for p in folders]
    out = [(_uri(settings.workspace), "workspace")]
    here = Path(cwd or WORKING_DIR.get() or os.getcwd())
    if _uri(here) != out[0][0]:
        out.append((_uri(here), "current folder"))
    return out


def _uri(path: Path) -> str:
    return path.resolve().as_uri()


# --- prompts ------------------------------------------------------------------------------------


def prompt_rows(server: str, listed: Any) -> list[dict[str, Any]]:
    return [
        {
            "server": server,
            "name": p.name,
            "title": getattr(p, "title", None),
            "description": p.description,
            "arguments": [
                {"name": a.name, "description": a.description, "required": bool(a.required)}
                for a in (p.arguments or [])
            ],
        }
        for p in listed.prompts
    ]


def prompt_messages(result: Any) -> list[dict[str, Any]]:
    """A prompt's messages as {role, text} (other content kinds named by their type)."""
    out = []
    for message in result.messages:
        out.append({"role": message.role, "content": content_value(message.content)})
    return out


# --- resources ----------------------------------------------------------------------------------


def resource_rows(server: str, listed: Any, templates: Any) -> dict[str, Any]:
    resources = [
        {
            "server": server,
            "uri": str(r.uri),
            "name": r.name,
            "mime_type": r.mime_type,
            "description": r.description,
        }
        for r in listed.resources
    ]
    patterns = [
        {
            "server": server,
            "uri_template": t.uri_template,
            "name": t.name,
            "mime_type": t.mime_type,
            "description": t.description,
        }
        for t in templates.resource_templates
    ]
    return {"resources": resources, "templates": patterns}


# --- builtin__read_resource ------------------------------------------------------------------------


def read_resource_spec() -> ToolSpec:
    return ToolSpec(
        name=READ_RESOURCE,
        description="Read one resource of a configured MCP server by its URI (`graphchat mcp resources` lists "
        "them): text contents inline, binary contents as their type and size.",
        input_schema={
            "type": "object",
            "required": ["server", "uri"],
            "properties": {
                "server": {"type": "string", "description": "The MCP server's name (as in servers.yaml)"},
                "uri": {"type": "string", "description": "The resource's URI"},
            },
            "additionalProperties": False,
        },
        source="mcp",
        family="read",
        # approval and deny rules also see this call as `<server>__read_resource`
        meta={"rule_as": "read_resource"},
    )


async def read_resource(
    source: Any, arguments: dict[str, Any], ctx: CallContext, max_chars: int
) -> ToolResult:
    server, uri = str(arguments["server"]), str(arguments["uri"])
    try:
        result = await source.request(server, "read_resource", uri)
    except GraphchatError as exc:
        return ToolResult.error(exc.message)
    except ServerUnavailable as exc:
        return ToolResult.error(f"MCP server '{server}': {exc}")
    except Exception as exc:
        return ToolResult.error(f"MCP server '{server}': reading {uri} failed: {describe(exc)}")
    return ToolResult({"server": server, "contents": resource_contents(result.contents, max_chars)})


# --- attachments: `ask --attach SERVER:URI`, `@SERVER:URI` in chat -------------------------------


def parse_attach(ref: str) -> tuple[str, str]:
    """`SERVER:URI` → (server, uri); GraphchatError (a usage error) when it is not one."""
    server, sep, uri = ref.partition(":")
    if not sep or not server or not uri:
        raise GraphchatError(
            f"--attach {ref!r}: expected SERVER:URI (e.g. docs:file:///notes.md)",
            EXIT_USAGE,
            hint="`graphchat mcp resources` lists the servers' resources",
        )
    return server, uri


def attachment_text(server: str, uri: str, contents: list[dict[str, Any]]) -> str:
    """One attached resource as text for the message: text inline, binary as a note."""
    rows = []
    for item in contents:
        kind = item.get("mime_type") or "unknown type"
        head = f"Attached resource {server}:{item.get('uri') or uri}"
        if item.get("binary"):
            rows.append(f"{head}: binary content ({kind}, {item['bytes']:,} bytes; not shown)")
            continue
        note = f"; {item['truncated']}" if item.get("truncated") else ""
        rows.append(f"{head} ({kind}{note}):\n{item.get('text', '')}")
    return "\n\n".join(rows) if rows else f"Attached resource {server}:{uri}: (empty)"


async def with_attachments(catalog: Any, message: str, refs: list[tuple[str, str]], max_chars: int) -> str:
    """`message` followed by the contents of each (server, uri) resource, read concurrently:
    text inline (each cut at `max_chars`), binary as its type and size. A resource that cannot
    be read is a GraphchatError naming it (nothing is sent without it)."""
    import asyncio

    if not refs:
        return message
    source = catalog.mcp_source()

    async def one(server: str, uri: str) -> str:
        try:
            result = await source.request(server, "read_resource", uri)
        except GraphchatError:
            raise
        except ServerUnavailable as exc:
            raise GraphchatError(f"cannot attach {server}:{uri}: MCP server '{server}': {exc}") from None
        except Exception as exc:
            raise GraphchatError(f"cannot attach {server}:{uri}: {describe(exc)}") from None
        return attachment_text(server, uri, resource_contents(result.contents, max_chars))

    texts = await asyncio.gather(*(one(server, uri) for server, uri in refs))
    return "\n\n".join([message, *texts])


# --- chat: `@SERVER:URI` mentions and `/SERVER:PROMPT` -----------------------------------------

_MENTION = re.compile(r"(?<!\S)@([^\s:@]+):(\S+)")


def mentions(message: str, servers: list[str]) -> list[tuple[str, str]]:
    """The (server, uri) of each `@SERVER:URI` in a chat message: an `@` at the start of a word,
    before a configured server's name, up to the next whitespace (anything else is just text)."""
    known = set(servers)
    found = [(m[1], m[2]) for m in _MENTION.finditer(message) if m[1] in known]
    return list(dict.fromkeys(found))


def prompt_as_message(messages: list[dict[str, Any]]) -> str:
    """A prompt's messages as one message to send: their texts (labelled with their role when
    the prompt has other than user messages); an embedded resource's text inline; an image or
    audio as its type and size."""
    import orjson

    labelled = any(m["role"] != "user" for m in messages)
    parts = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            text = content
        elif isinstance(content, dict) and isinstance(content.get("text"), str):
            text = f"[resource {content.get('uri')}]\n{content['text']}"
        else:
            text = f"[{orjson.dumps(content, default=str).decode()}]"
        parts.append(f"{message['role']}: {text}" if labelled else text)
    return "\n\n".join(parts)


async def prompt_message(catalog: Any, server: str, name: str, arguments: dict[str, str]) -> str:
    """`/SERVER:NAME k=v …` in chat: the prompt's messages as one message (GraphchatError when
    the server cannot give it)."""
    source = catalog.mcp_source()
    try:
        result = await source.request(server, "get_prompt", name, arguments or None)
    except GraphchatError:
        raise
    except ServerUnavailable as exc:
        raise GraphchatError(f"MCP server '{server}': {exc}") from None
    except Exception as exc:
        raise GraphchatError(f"MCP server '{server}': prompt {name!r}: {describe(exc)}") from None
    return prompt_as_message(prompt_messages(result))


# --- chat: Tab completion of `/SERVER:PROMPT` and its argument values ----------------------------

COMPLETION_TIMEOUT_S = 10.0  # Tab waits at most this long for a server (its start included)


async def prompt_choices(catalog: Any, server: str) -> list[dict[str, Any]]:
    """`server`'s prompts as `prompt_rows` (starting the server if needed); [] when it cannot
    say within COMPLETION_TIMEOUT_S — completing a line must never fail the chat."""
    import asyncio

    try:
        listed = await asyncio.wait_for(
            catalog.mcp_source().request(server, "list_prompts"), COMPLETION_TIMEOUT_S
        )
    except Exception:  # noqa: BLE001 - no server, no prompts, a timeout: nothing to offer
        return []
    return prompt_rows(server, listed)


async def argument_values(
    catalog: Any, server: str, prompt: str, argument: str, typed: str, given: dict[str, str]
) -> list[str]:
    """The values `server`'s completion API (`completion/complete`) offers for `argument` of
    `prompt` starting with `typed`, the arguments already `given` as its context; [] when the
    server has none (or no completion capability, or does not answer in time)."""
    import asyncio

    from mcp.types import PromptReference

    ref = PromptReference(type="ref/prompt", name=prompt)
    try:
        result = await asyncio.wait_for(
            catalog.mcp_source().request(
                server, "complete", ref, {"name": argument, "value": typed}, given or None
            ),
            COMPLETION_TIMEOUT_S,
        )
    except Exception:  # noqa: BLE001 - as above
        return []
    return [v for v in result.completion.values if isinstance(v, str)]
