"""`graphchat mcp serve`: the workspace's plans as MCP tools over stdio.

Every loadable plan is published as `plan_<identifier>` (one underscore over serve) with its
input schema, description (+ exemplars) and a read-only hint when its family is `read`. The
list is rebuilt per request, so plan edits show up without a restart. A call goes through the
catalog's `plan__<identifier>` tool — `Catalog.call`, the one call path (validation, approvals,
events) — and comes back as structured content plus a JSON text block; a failure is an
`is_error` result carrying the message, never a JSON-RPC error.

Questions a plan asks (`ask` steps, approvals) reach the client through MCP elicitation, via
`ElicitationAsker` (a host of the one asker):
- a 2025-11-25 (legacy) session: an `elicitation/create` request pushed mid-call;
- a 2026-07-28 session, where a server may not push requests: the plan keeps running in a
  background task and the call returns an `InputRequiredResult` carrying the question; the
  client's retry (with `input_responses` and our `request_state` token) resumes it.
No elicitation capability → unavailable, and a question no `when_unanswered: default` settles
parks the run (`parking`): the call returns `{parked: true, requests}`, and the
`graphchat_requests`/`graphchat_answer` tools list and answer it, from any later connection;
accept → the answer; decline/cancel → declined; a client error or timeout → unavailable.

stdout is the JSON-RPC wire: events go to stderr (or JSONL on stderr), nothing else is printed.

Modules: `server` (the handlers over one catalog, the entry point `serve`), `asker` (the elicitation
asker, a host of the one asker beside the terminal's and the chat's), `runs` (a plan call
spanning several requests), `parking` (plans that wait for a person, and their two tools), `convert` (public names and results as the client sees them).
"""
