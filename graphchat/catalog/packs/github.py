"""The `github` pack: graph's `builtin__gh_*` tools over GitHub's REST (and GraphQL) API.

Where graph shells out to `gh` + `jq`, this calls the API with httpx; results match graph's
pack field for field. Configuration:

- token: `GITHUB_TOKEN` (else `GH_TOKEN`), sent as a bearer token. It is never put in a result
  or an error; thread files redact it (graphchat.threads.redact: `*_TOKEN` variables).
- API: `tools.github_api_url` in graphchat.yaml, else `$GITHUB_API_URL`, else
  https://api.github.com (GitHub Enterprise: `https://HOST/api/v3`; GraphQL is derived).
- repository: `$GITHUB_REPOSITORY` (`owner/name`, as GitHub Actions sets it), else the
  `origin` remote of the repository tools run in.

`gh_pr_comment`, `gh_pr_inline_comments` and `gh_pr_thread_sync` write (family `write`).

What it does not trust (docs/tools.md): an argument in a path is one quoted segment (`segment`,
`tag_name`); pages are followed only on the API's origin, redirects never (the token would go
along); gh_pr_ticket's `pattern` runs on RE2, off the event loop, within size and time limits.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from graphchat.catalog.base import CallContext, ToolResult, ToolSource, ToolSpec
from graphchat.catalog.packs.documents import pack_specs
from graphchat.catalog.process import run_dir, run_program, turn_environ
from graphchat.catalog.user_tools import apply_defaults
from graphchat.display import safe

if TYPE_CHECKING:
    import httpx

    from graphchat.workspace import Settings

DEFAULT_API = "https://api.github.com"
TIMEOUT_SECS = 30
_REMOTE = re.compile(r"[:/](?P<owner>[^/:]+)/(?P<name>[^/]+?)(?:\.git)?/?$")
_TICKET = re.compile(r"^([A-Z]+)[- ]?([0-9]+)$")
_FINDING_KEYS = ("label", "severity", "invariant", "file", "line", "finding")
DEFAULT_TICKET = r"\b[A-Za-z]{2,6}[- ][0-9]+\b"
# A user's regular expression (gh_pr_ticket's `pattern`) runs on RE2, linear in its text (no
# backtracking), in a worker thread, within these limits.
PATTERN_MAX_CHARS = 1000
TEXT_MAX_CHARS = 262_144  # of each text scanned (a PR body on GitHub is at most 65,536)
REGEX_SECONDS = 1.0
REGEX_MAX_MEM = 8 << 20  # RE2's budget for the compiled pattern and its DFA
MAX_PAGES = 1000  # of one paginated list (REST Link: rel=next, GraphQL cursors)
# What git refuses in a tag name (git check-ref-format), besides control characters.
_BAD_TAG = re.compile(r"\.\.|@\{|//|[ ~^:?*\[\\]|^[/.]|/\.|/$|\.$|\.lock(?:/|$)|^@$")

THREADS_QUERY = """query($owner:String!,$name:String!,$pr:Int!,$endCursor:String){
  repository(owner:$owner,name:$name){
    pullRequest(number:$pr){
      reviewThreads(first:100, after:$endCursor){
        pageInfo{hasNextPage endCursor}
        nodes{id isResolved isOutdated path line
          resolvedBy{login}
          comments(first:100){nodes{url body author{login}}}}}}}}"""
REPLY_MUTATION = """mutation($tid:ID!,$body:String!){
  addPullRequestReviewThreadReply(input:{pullRequestReviewThreadId:$tid,body:$body}){comment{id}}}"""
VIEWER_QUERY = "query{viewer{login}}"
RESOLVE_MUTATION = """mutation($tid:ID!){resolveReviewThread(input:{threadId:$tid}){thread{id}}}"""


class GithubFailed(Exception):
    """An API call (or the configuration) failed: the tool error's message (never the token)."""


def api_base(settings: Settings) -> str:
    url = getattr(settings, "github_api_url", None) or turn_environ().get("GITHUB_API_URL") or DEFAULT_API
    return url.rstrip("/")


def graphql_url(base: str) -> str:
    return base[: -len("/v3")] + "/graphql" if base.endswith("/api/v3") else base + "/graphql"


def token() -> str:
    environ = turn_environ()
    value = environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN")
    if not value:
        raise GithubFailed("GITHUB_TOKEN is not set (the github pack needs a token to call the GitHub API)")
    return value


class GithubPackSource(ToolSource):
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._repos: dict[tuple[str, str], tuple[str, str]] = {}  # by ($GITHUB_REPOSITORY, folder)

    def specs(self) -> list[ToolSpec]:
        return pack_specs("github")

    async def call(self, spec: ToolSpec, arguments: dict[str, Any], ctx: CallContext) -> ToolResult:
        import httpx

        handler = getattr(self, "_" + spec.name.removeprefix("builtin__"), None)
        if handler is None:
            return ToolResult.error(f"unknown github pack tool {spec.name}")
        try:
            headers = {
                "Authorization": f"Bearer {token()}",
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28",
                "User-Agent": "graphchat",
            }
            # Redirects are never followed: the token would go wherever a Location points.
            async with httpx.AsyncClient(
                headers=headers, timeout=TIMEOUT_SECS, follow_redirects=False
            ) as client:
                api = _Api(client, api_base(self.settings))
                return ToolResult(await handler(api, apply_defaults(spec.input_schema, arguments)))
        except GithubFailed as exc:
            return ToolResult.error(str(exc))
        except httpx.HTTPError as exc:
            return ToolResult.error(f"GitHub API unreachable ({type(exc).__name__}): {_no_secret(str(exc))}")

    async def repo(self) -> tuple[str, str]:
        """(owner, name) of the repository: $GITHUB_REPOSITORY, else the `origin` remote."""
        named = turn_environ().get("GITHUB_REPOSITORY", "")
        folder = run_dir(self.settings)
        key = (named, str(folder))  # a warm helper's turns differ in both
        if key not in self._repos:
            if named.count("/") == 1 and all(named.split("/")):
                owner, name = named.split("/")
            else:
                try:
                    done = await run_program(
                        ["git", "remote", "get-url", "origin"],
                        cwd=folder,
                        timeout=TIMEOUT_SECS,
                    )
                except Exception as exc:
                    raise GithubFailed(f"cannot tell the repository: {exc}") from None
                found = _REMOTE.search(done.out_text().strip()) if done.ok else None
                if found is None:
                    raise GithubFailed(
                        "cannot tell the GitHub repository: set GITHUB_REPOSITORY=owner/name "
                        "or run in a checkout whose origin remote points at it"
                    )
                owner, name = found["owner"], found["name"]
            self._repos[key] = (owner, name)
        return self._repos[key]

    async def _path(self, route: str, **values: object) -> str:
        """`/repos/{owner}/{name}/` + route, each `{value}` one URL-quoted path segment: a value
        holding `/` or `..` never reaches another path of the API."""
        owner, name = await self.repo()
        where = {"owner": owner, "name": name, **values}
        return ("/repos/{owner}/{name}/" + route).format(**{k: segment(v, k) for k, v in where.items()})

    # --- the tools ------------------------------------------------------------------------------

    async def _gh_pr_meta(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        pr = await api.get(await self._path("pulls/{pr}", pr=int(a["pr"])))
        return {
            "title": pr.get("title"),
            "body": pr.get("body") or "",
            "base_sha": (pr.get("base") or {}).get("sha"),
            "head_sha": (pr.get("head") or {}).get("sha"),
            "state": _pr_state(pr),
            "author": (pr.get("user") or {}).get("login"),
        }

    async def _gh_pr_comment(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        pr, body, marker = int(a["pr"]), str(a["body"]), str(a.get("marker") or "")
        comments_path = await self._path("issues/{pr}/comments", pr=pr)
        comments = await api.get_all(comments_path)
        if marker:
            tag = f"<!-- {marker} -->"
            body = f"{body}\n\n{tag}"
            target = next((c for c in comments if tag in str(c.get("body") or "")), None)
        else:  # graph: `gh pr comment --edit-last --create-if-none`
            login = (await api.graphql(VIEWER_QUERY, {})).get("viewer", {}).get("login")  # as gh does
            mine = [c for c in comments if (c.get("user") or {}).get("login") == login]
            target = mine[-1] if mine else None
        if target is not None:
            done = await api.send(
                "PATCH", await self._path("issues/comments/{id}", id=target["id"]), {"body": body}
            )
        else:
            done = await api.send("POST", comments_path, {"body": body})
        return {"text": str(done.get("html_url") or "")}

    async def _gh_pr_inline_comments(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        pr, tag = int(a["pr"]), f"<!-- {a['marker']} -->"
        await self._delete_tagged(api, pr, tag)
        out = []
        for entry in a.get("comments") or []:
            url = ""
            if entry.get("line") is not None:
                payload = _anchor(entry, str(a["head_sha"]), f"{entry.get('body', '')}\n\n{tag}")
                url = await self._post_review_comment(api, pr, payload)
            out.append({**entry, "url": url} if url else dict(entry))
        return {"comments": out}

    async def _gh_pr_review_threads(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        owner, name = await self.repo()
        marker = str(a["marker"])
        threads: list[dict[str, Any]] = []
        cursor = None
        seen: set[str] = set()
        while True:
            if len(seen) >= MAX_PAGES:
                raise GithubFailed(f"GitHub GraphQL reviewThreads: more than {MAX_PAGES} pages; stopped")
            data = await api.graphql(
                THREADS_QUERY, {"owner": owner, "name": name, "pr": int(a["pr"]), "endCursor": cursor}
            )
            page = (((data.get("repository") or {}).get("pullRequest") or {}).get("reviewThreads")) or {}
            threads.extend(page.get("nodes") or [])
            info = page.get("pageInfo") or {}
            if not info.get("hasNextPage") or not info.get("endCursor"):
                break
            cursor = str(info["endCursor"])
            if cursor in seen:
                raise GithubFailed("GitHub GraphQL reviewThreads: the next page's cursor repeats a page")
            seen.add(cursor)
        tagged = []
        for thread in threads:
            nodes = (thread.get("comments") or {}).get("nodes") or []
            payload = _payload(str(nodes[0].get("body") or ""), marker) if nodes else None
            if isinstance(payload, dict):
                tagged.append((thread, nodes, payload))
        findings = []
        for thread, nodes, payload in tagged:
            if any(key not in payload for key in _FINDING_KEYS):
                continue
            first = nodes[0]
            if thread.get("isResolved"):
                resolver = (thread.get("resolvedBy") or {}).get("login") or ""
                poster = (first.get("author") or {}).get("login") or "?"
                state = "resolved" if resolver == poster else "declined"
            else:
                state = "open"
            line = thread.get("line")
            findings.append(
                {
                    **payload,
                    "thread_id": thread.get("id"),
                    "state": state,
                    "path": thread.get("path"),
                    "line": line if line is not None and line is not False else payload.get("line"),
                    "is_outdated": thread.get("isOutdated"),
                    "url": first.get("url"),
                    "replies": [
                        {"author": (n.get("author") or {}).get("login") or "unknown", "body": n.get("body")}
                        for n in nodes[1:]
                    ],
                    "reply_count": len(nodes) - 1,
                }
            )
        return {
            "findings": findings,
            "count": len(findings),
            "open_count": sum(1 for f in findings if f["state"] == "open"),
            "skipped": len(tagged) - len(findings),
            "has_findings": bool(findings),
        }

    async def _gh_pr_thread_sync(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        pr, marker = int(a["pr"]), str(a["marker"])
        sweep = str(a.get("sweep_marker") or "")
        if sweep:
            await self._delete_tagged(api, pr, f"<!-- {sweep} -->")
        out_threads = []
        for entry in a.get("threads") or []:
            transition = entry.get("transition")
            applied = False
            if transition in ("resolve", "decline"):
                note = str(entry.get("note") or "")
                if not note:
                    note = (
                        "No longer detected at head — resolving."
                        if transition == "resolve"
                        else "Acknowledged — treating as declined; won't be re-raised."
                    )
                tid = str(entry.get("thread_id"))
                try:
                    await api.graphql(REPLY_MUTATION, {"tid": tid, "body": f"🤖 {note}"})
                except GithubFailed:
                    pass
                try:
                    await api.graphql(RESOLVE_MUTATION, {"tid": tid})
                    applied = True
                except GithubFailed:
                    applied = False
            out_threads.append(
                {**entry, "applied": applied, "transitioned": transition != "none" and applied}
            )
        out_creates = []
        for entry in a.get("creates") or []:
            url = ""
            if entry.get("line") is not None:
                hidden = json.dumps(entry.get("payload") or {}, ensure_ascii=False, separators=(",", ":"))
                body = f"{entry.get('body', '')}\n\n<!-- {marker} {hidden} -->"
                url = await self._post_review_comment(api, pr, _anchor(entry, str(a["head_sha"]), body))
            out_creates.append({**entry, "url": url} if url else dict(entry))
        return {
            "creates": out_creates,
            "threads": out_threads,
            "created_count": sum(1 for c in out_creates if c.get("url") is not None),
            "resolved_now_count": sum(
                1 for t in out_threads if t["transitioned"] and t.get("transition") == "resolve"
            ),
            "declined_now_count": sum(
                1 for t in out_threads if t["transitioned"] and t.get("transition") == "decline"
            ),
            "still_open_count": sum(
                1
                for t in out_threads
                if t.get("state") == "open" or (t.get("transition") != "none" and not t["applied"])
            ),
            "transitions_count": sum(1 for t in out_threads if t["transitioned"]),
            "has_creates": bool(out_creates),
            "has_transitions": any(t["transitioned"] for t in out_threads),
        }

    async def _gh_pr_ticket(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        pattern = str(a.get("pattern") or DEFAULT_TICKET)
        if len(pattern) > PATTERN_MAX_CHARS:
            raise GithubFailed(
                f"gh_pr_ticket: pattern is {len(pattern)} characters long, "
                f"more than the {PATTERN_MAX_CHARS} allowed"
            )
        compiled = await asyncio.to_thread(_compile_ticket, pattern)
        pr = await api.get(await self._path("pulls/{pr}", pr=int(a["pr"])))
        sources = [
            (source, str(text or "")[:TEXT_MAX_CHARS])
            for source, text in (
                ("branch", (pr.get("head") or {}).get("ref")),
                ("title", pr.get("title")),
                ("body", pr.get("body")),
            )
        ]
        stop = threading.Event()
        try:  # off the event loop, and given up on at the time limit
            return await asyncio.wait_for(
                asyncio.to_thread(_find_ticket, compiled, sources, stop), REGEX_SECONDS
            )
        except TimeoutError:
            stop.set()  # the worker stops at its next line (one RE2 search is linear in its line)
            raise GithubFailed(
                f"gh_pr_ticket: pattern {shown(pattern)} took more than {REGEX_SECONDS:g} s "
                "over the pull request's text; stopped"
            ) from None

    async def _gh_release(self, api: _Api, a: dict[str, Any]) -> dict[str, Any]:
        tag = str(a.get("tag") or "")
        if tag:
            meta = await api.get(await self._path("releases/tags/{tag}", tag=tag_name(tag)))
        else:
            meta = await api.get(await self._path("releases/latest"))
        listed = await api.get(await self._path("releases"), params={"per_page": 100})
        published = meta.get("published_at") or ""
        include_pre = a.get("include_prereleases") is True
        previous = None
        if published:
            earlier = [
                r
                for r in listed
                if not r.get("draft")
                and (include_pre or not r.get("prerelease"))
                and r.get("tag_name") != meta.get("tag_name")
                and r.get("published_at")
                and r["published_at"] < published
            ]
            if earlier:
                previous = max(earlier, key=lambda r: r["published_at"]).get("tag_name")
        return {
            "tag": meta.get("tag_name"),
            "name": meta.get("name") or "",
            "body": meta.get("body") or "",
            "url": meta.get("html_url"),
            "published_at": meta.get("published_at"),
            "author": (meta.get("author") or {}).get("login"),
            "is_prerelease": bool(meta.get("prerelease")),
            "is_draft": bool(meta.get("draft")),
            "target": meta.get("target_commitish"),
            "previous_tag": previous,
        }

    # --- shared steps ---------------------------------------------------------------------------

    async def _delete_tagged(self, api: _Api, pr: int, tag: str) -> None:
        """Delete this PR's review comments carrying `tag` (refresh in place); failures ignored."""
        try:
            comments = await api.get_all(await self._path("pulls/{pr}/comments", pr=pr))
        except GithubFailed:
            return
        for comment in comments:
            if tag in str(comment.get("body") or ""):
                try:
                    await api.send("DELETE", await self._path("pulls/comments/{id}", id=comment["id"]))
                except GithubFailed:
                    pass

    async def _post_review_comment(self, api: _Api, pr: int, payload: dict[str, Any]) -> str:
        """One anchored review comment; its url, or "" when the API refused it (e.g. 422)."""
        try:
            done = await api.send("POST", await self._path("pulls/{pr}/comments", pr=pr), payload)
        except GithubFailed:
            return ""
        return str(done.get("html_url") or "")


class _Api:
    """A few verbs over the API; any non-2xx answer is GithubFailed naming the call."""

    def __init__(self, client: httpx.AsyncClient, base: str) -> None:
        self.client = client
        self.base = base
        self.origin = origin(client.base_url.join(base))

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        response = await self.client.get(self.base + path, params=params)
        return _json(response, "GET", path)

    async def get_all(self, path: str) -> list[Any]:
        """Every page of a list (Link: rel=next), following only links on the API's own origin."""
        import httpx

        items: list[Any] = []
        url: httpx.URL | None = httpx.URL(self.base + path)
        params: dict[str, Any] | None = {"per_page": 100}
        seen: set[str] = set()
        while url is not None:
            if len(seen) >= MAX_PAGES:
                raise GithubFailed(f"GitHub API GET {path}: more than {MAX_PAGES} pages; stopped")
            seen.add(str(url))
            response = await self.client.get(url, params=params)
            page = _json(response, "GET", path)
            items.extend(page if isinstance(page, list) else [])
            link = response.links.get("next", {}).get("url")
            url, params = (response.url.join(link) if link else None), None
            if url is not None and origin(url) != self.origin:
                raise GithubFailed(
                    f"GitHub API GET {path}: the next page (Link: rel=next) is on {shown(origin(url))}, "
                    f"not on the API's origin {self.origin}; not followed"
                )
            if url is not None and str(url) in seen:
                raise GithubFailed(f"GitHub API GET {path}: the next page (Link: rel=next) repeats a page")
        return items

    async def send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        response = await self.client.request(method, self.base + path, json=body)
        return _json(response, method, path)

    async def graphql(self, query: str, variables: dict[str, Any]) -> dict[str, Any]:
        response = await self.client.post(
            graphql_url(self.base), json={"query": query, "variables": variables}
        )
        data = _json(response, "POST", "/graphql")
        if not isinstance(data, dict):
            raise GithubFailed("GitHub GraphQL: unexpected answer")
        if data.get("errors"):
            messages = "; ".join(str(e.get("message", e)) for e in data["errors"] if isinstance(e, dict))
            raise GithubFailed(f"GitHub GraphQL: {messages or data['errors']}")
        return data.get("data") or {}


def _json(response: httpx.Response, method: str, path: str) -> Any:
    if response.is_redirect or 300 <= response.status_code < 400:
        where = response.headers.get("Location")
        raise GithubFailed(
            f"GitHub API {method} {path}: HTTP {response.status_code} redirect"
            + (f" to {shown(_no_secret(where))}" if where else "")
            + ", not followed (the token goes only to the configured API)"
        )
    if response.status_code >= 400:
        try:
            message = response.json().get("message", "")
        except Exception:
            message = response.text[:200]
        raise GithubFailed(
            f"GitHub API {method} {path}: HTTP {response.status_code} {_no_secret(str(message))}".strip()
        )
    if response.status_code == 204 or not response.content:
        return {}
    try:
        return response.json()
    except ValueError:
        raise GithubFailed(f"GitHub API {method} {path}: the answer is not JSON") from None


def segment(value: object, what: str) -> str:
    """`value` as one segment of a URL path, quoted (`/` is `%2F`); empty, `.`, `..` and control
    characters are refused with an error naming `what`."""
    text = str(value)
    if text in ("", ".", "..") or not text.isprintable():
        raise GithubFailed(f"{what} {shown(text)} cannot be one segment of an API path")
    return quote(text, safe="")


def tag_name(tag: str) -> str:
    """`tag` when git could name a tag so (git check-ref-format), else an error naming `tag`."""
    bad = _BAD_TAG.search(tag)
    if bad is not None or not tag.isprintable():
        why = f"{bad.group(0)!r} is not allowed in one" if bad is not None else "it holds a control character"
        raise GithubFailed(f"gh_release: tag {shown(tag)} is not a tag name ({why})")
    return tag


def shown(text: str, limit: int = 80) -> str:
    """A value from outside, quoted for a one-line message: control characters escaped, cut."""
    cut = text if len(text) <= limit else text[:limit] + "…"
    return "'" + safe(cut, newlines=False) + "'"


def origin(url: httpx.URL) -> str:
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}"


def _compile_ticket(pattern: str) -> Any:
    """gh_pr_ticket's pattern on RE2 (POSIX leftmost-longest, as graph's `grep -oE`)."""
    import re2

    options = re2.Options()
    options.log_errors = False
    options.longest_match = True
    options.max_mem = REGEX_MAX_MEM
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0] if exc.args else exc
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise GithubFailed(
            f"gh_pr_ticket: pattern {shown(pattern)} is not a usable regular expression: {why}"
        ) from None


def _find_ticket(compiled: Any, sources: list[tuple[str, str]], stop: threading.Event) -> dict[str, Any]:
    """The first match of the first matching line (graph: `grep -oE … | head -1`), in order."""
    for source, text in sources:
        for line in text.split("\n"):
            if stop.is_set():  # the caller gave up at its time limit
                return {"found": False, "ticket": None, "source": None}
            found = compiled.search(line)
            if found and found.group(0):
                ticket = _TICKET.sub(r"\1-\2", found.group(0).upper())
                return {"found": True, "ticket": ticket, "source": source}
    return {"found": False, "ticket": None, "source": None}


def _no_secret(text: str) -> str:
    environ = turn_environ()
    secret = environ.get("GITHUB_TOKEN") or environ.get("GH_TOKEN")
    return text.replace(secret, "[redacted]") if secret else text


def _pr_state(pr: dict[str, Any]) -> str:
    """gh's state: OPEN, CLOSED or MERGED."""
    if pr.get("merged") or pr.get("merged_at"):
        return "MERGED"
    return str(pr.get("state") or "").upper()


def _anchor(entry: dict[str, Any], sha: str, body: str) -> dict[str, Any]:
    return {
        "commit_id": sha,
        "path": entry.get("path"),
        "line": entry.get("line"),
        "side": entry.get("side") or "RIGHT",
        "body": body,
    }


def _payload(body: str, marker: str) -> Any:
    """The JSON of `<!-- <marker> {json} -->` in a comment body, else None (graph's jq `payload`)."""
    parts = body.split(f"<!-- {marker} ")
    if len(parts) < 2:
        return None
    try:
        return json.loads(parts[1].split(" -->")[0])
    except ValueError:
        return None
