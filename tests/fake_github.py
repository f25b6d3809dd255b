"""A fake GitHub API on 127.0.0.1 for the github pack's tests: REST + GraphQL, in memory.

It plays one repository (`owner/repo`) with pull requests, issue comments, review comments,
review threads and releases, and records every request it got (method, path, headers, body),
so a test can check what was sent — and that the token was — without any network.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote

from tests.scripted_server import LoopbackHTTPServer


class FakeGithub:
    def __init__(self, repo: str = "owner/repo", login: str = "graph-bot") -> None:
        self.repo = repo
        self.login = login
        self.pulls: dict[int, dict[str, Any]] = {}
        self.issue_comments: list[dict[str, Any]] = []
        self.review_comments: list[dict[str, Any]] = []
        self.threads: list[dict[str, Any]] = []
        self.releases: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self.reject_lines: set[int] = set()  # review-comment lines answered 422 (not in the diff)
        # "METHOD /path" → a fixed answer (status, body, headers): a redirect, a hostile Link header
        self.answers: dict[str, tuple[int, Any, dict[str, str]]] = {}
        self.delays: dict[str, float] = {}  # "METHOD /path" → seconds to wait before answering
        self._next_id = 100
        self.lock = threading.Lock()
        self.http = LoopbackHTTPServer(("127.0.0.1", 0), _handler(self))
        self.http.daemon_threads = True
        self.thread = threading.Thread(target=self.http.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http.server_address[1]}/api/v3"

    def start(self) -> FakeGithub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.http.shutdown()
        self.http.server_close()

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    # --- routing --------------------------------------------------------------------------------

    def handle(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        base = f"/api/v3/repos/{self.repo}/"
        if path == "/api/graphql":
            return self.graphql(body)
        if not path.startswith(base):
            return 404, {"message": "Not Found"}
        tail = path[len(base) :]
        if m := re.fullmatch(r"pulls/(\d+)", tail):
            pr = self.pulls.get(int(m[1]))
            return (200, pr) if pr else (404, {"message": "Not Found"})
        if m := re.fullmatch(r"issues/(\d+)/comments", tail):
            number = int(m[1])
            if method == "GET":
                return 200, [c for c in self.issue_comments if c["issue"] == number]
            comment = self._comment(body["body"], issue=number)
            self.issue_comments.append(comment)
            return 201, comment
        if m := re.fullmatch(r"issues/comments/(\d+)", tail):
            found = next((c for c in self.issue_comments if c["id"] == int(m[1])), None)
            if found is None:
                return 404, {"message": "Not Found"}
            found["body"] = body["body"]
            return 200, found
        if m := re.fullmatch(r"pulls/(\d+)/comments", tail):
            number = int(m[1])
            if method == "GET":
                return 200, [c for c in self.review_comments if c["pull"] == number]
            if body.get("line") in self.reject_lines:
                return 422, {"message": "Validation Failed: line must be part of the diff"}
            comment = self._comment(body["body"], pull=number)
            comment.update({k: body.get(k) for k in ("commit_id", "path", "line", "side")})
            self.review_comments.append(comment)
            return 201, comment
        if m := re.fullmatch(r"pulls/comments/(\d+)", tail):
            before = len(self.review_comments)
            self.review_comments = [c for c in self.review_comments if c["id"] != int(m[1])]
            return (204, None) if len(self.review_comments) < before else (404, {"message": "Not Found"})
        if tail == "releases/latest":
            latest = [r for r in self.releases if not r["draft"] and not r["prerelease"]]
            return (
                (200, max(latest, key=lambda r: r["published_at"]))
                if latest
                else (404, {"message": "Not Found"})
            )
        if m := re.fullmatch(r"releases/tags/([^/]+)", tail):  # a tag is one segment, quoted
            found = next((r for r in self.releases if r["tag_name"] == unquote(m[1])), None)
            return (200, found) if found else (404, {"message": "Not Found"})
        if tail == "releases":
            return 200, self.releases
        return 404, {"message": "Not Found"}

    def _comment(self, text: str, **where: Any) -> dict[str, Any]:
        cid = self.new_id()
        return {
            "id": cid,
            "body": text,
            "user": {"login": self.login},
            "html_url": f"https://github.test/{self.repo}/pull/comment-{cid}",
            **where,
        }

    def graphql(self, body: Any) -> tuple[int, Any]:
        query = body.get("query", "")
        variables = body.get("variables") or {}
        if query.strip() == "query{viewer{login}}":
            return 200, {"data": {"viewer": {"login": self.login}}}
        if "reviewThreads" in query:
            owner, name = self.repo.split("/")
            if (variables.get("owner"), variables.get("name")) != (owner, name):
                return 200, {"errors": [{"message": "Could not resolve to a Repository"}]}
            page = {"pageInfo": {"hasNextPage": False, "endCursor": None}, "nodes": self.threads}
            return 200, {"data": {"repository": {"pullRequest": {"reviewThreads": page}}}}
        if "resolveReviewThread" in query:
            for thread in self.threads:
                if thread["id"] == variables.get("tid"):
                    thread["isResolved"] = True
                    thread["resolvedBy"] = {"login": self.login}
                    return 200, {"data": {"resolveReviewThread": {"thread": {"id": thread["id"]}}}}
            return 200, {"errors": [{"message": "thread not found"}]}
        if "addPullRequestReviewThreadReply" in query:
            for thread in self.threads:
                if thread["id"] == variables.get("tid"):
                    thread["comments"]["nodes"].append(
                        {"url": "u", "body": variables["body"], "author": {"login": self.login}}
                    )
                    return 200, {"data": {"addPullRequestReviewThreadReply": {"comment": {"id": "c"}}}}
            return 200, {"errors": [{"message": "thread not found"}]}
        return 200, {"errors": [{"message": "unknown query"}]}


def _handler(fake: FakeGithub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            path = self.path.split("?", 1)[0]
            route = f"{self.command} {path}"
            time.sleep(fake.delays.get(route, 0))
            headers: dict[str, str] = {}
            with fake.lock:
                fake.requests.append(
                    {"method": self.command, "path": self.path, "headers": dict(self.headers), "body": body}
                )
                if route in fake.answers:
                    status, answer, headers = fake.answers[route]
                else:
                    status, answer = fake.handle(self.command, path, body)
            data = b"" if answer is None else json.dumps(answer).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

    return Handler
