"""The `slack` pack: graph's `builtin__slack_post_message` over Slack's Web API.

Where graph's pack runs `curl` + `jq`, this calls the API with httpx; the result matches graph's
(`{channel, ts, permalink}`). Enabled with `tools: {packs: [slack]}` in graphchat.yaml.

- token: `SLACK_BOT_TOKEN` (a bot token with `chat:write`), sent as a bearer token, never in
  a result or an error; thread files redact it (graphchat.threads.redact: `*_TOKEN`).
- API: `$SLACK_API_URL`, else https://slack.com/api (tests point it at a loopback fake).
- Slack answers HTTP 200 even when it refuses a post (`{"ok": false, "error":
  "channel_not_found"}`): a refused post is an error, never read as delivered. The permalink is
  a best-effort second call: a lookup that does not answer is `null`, the post stands.
- A post reaches people and cannot be taken back: the tool is `destructive` (graph: "Side-
  effecting"), so it is asked about unless approved (`--yes`, `approvals.allow`). Redirects are
  never followed (the token would go along).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.packs.documents import pack_specs
from graphchat.catalog.process import turn_environ
from graphchat.catalog.user_tools import apply_defaults

if TYPE_CHECKING:
    import httpx

DEFAULT_API = "https://slack.com/api"
TIMEOUT_SECS = 20  # graph: curl --max-time 20


class SlackFailed(Exception):
    """The post failed: the tool error's message (never the token)."""


def api_base() -> str:
    return (turn_environ().get("SLACK_API_URL") or DEFAULT_API).rstrip("/")


def _no_secret(text: str) -> str:
    secret = turn_environ().get("SLACK_BOT_TOKEN")
    return text.replace(secret, "[redacted]") if secret else text


class SlackPackSource(ToolSource):
    def specs(self) -> list[ToolSpec]:
        from dataclasses import replace

        return [replace(spec, family="destructive") for spec in pack_specs("slack")]

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        import httpx

        if spec.name != "builtin__slack_post_message":
            return ToolResult.error(f"unknown slack pack tool {spec.name}")
        token = turn_environ().get("SLACK_BOT_TOKEN", "")
        if not token:
            return ToolResult.error("SLACK_BOT_TOKEN is not set (needs a token with chat:write)")
        headers = {"Authorization": f"Bearer {token}", "User-Agent": "graphchat"}
        try:
            async with httpx.AsyncClient(
                headers=headers, timeout=TIMEOUT_SECS, follow_redirects=False
            ) as client:
                return ToolResult(
                    await post_message(client, api_base(), apply_defaults(spec.input_schema, arguments))
                )
        except SlackFailed as exc:
            return ToolResult.error(str(exc))
        except httpx.HTTPError as exc:
            return ToolResult.error(f"Slack API unreachable ({type(exc).__name__}): {_no_secret(str(exc))}")


async def post_message(client: httpx.AsyncClient, base: str, a: dict[str, Any]) -> dict[str, Any]:
    """chat.postMessage, then (best effort) chat.getPermalink: graph's `{channel, ts, permalink}`."""
    payload: dict[str, Any] = {"channel": a["channel"], "text": a["text"]}
    if a.get("thread_ts"):
        payload["thread_ts"] = a["thread_ts"]
    response = await client.post(
        base + "/chat.postMessage",
        json=payload,
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    answer = _answer(response)
    if answer.get("ok") is not True:
        detail = answer.get("error") or response.text[:500]
        raise SlackFailed(f"chat.postMessage failed: {_no_secret(str(detail))}")
    channel, ts = str(answer.get("channel") or ""), str(answer.get("ts") or "")
    permalink = None
    try:
        found = await client.get(base + "/chat.getPermalink", params={"channel": channel, "message_ts": ts})
        link = _answer(found)
        if link.get("ok") is True and isinstance(link.get("permalink"), str) and link["permalink"]:
            permalink = link["permalink"]
    except Exception:  # noqa: BLE001 - the message is delivered; only the link is missing
        permalink = None
    return {"channel": channel, "ts": ts, "permalink": permalink}


def _answer(response: httpx.Response) -> dict[str, Any]:
    if 300 <= response.status_code < 400:
        raise SlackFailed(
            f"Slack API: HTTP {response.status_code} redirect, not followed (the token goes only to the API)"
        )
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise SlackFailed(
            f"chat.postMessage failed: HTTP {response.status_code} {_no_secret(response.text[:500])}"
        )
    return data
