"""The GitHub pack against a hostile (or merely wrong) API (issue 18, break 4): every case of
`corpus/github/` runs through the real command twice, against local fake APIs on loopback:

- `tools call` of the case's tool: a failing case is exit 1 with one `error:` line holding the
  case's `fails` text; any other case is exit 0 with the case's `returns` in its result;
- `ask`, where a scripted model calls the case's tool and, in the same round, `gh_pr_meta` of
  another pull request (answered after a short delay): that call succeeds whatever the case does
  (nothing blocks the event loop), and the model is sent the case's error or result.

Both times: "elsewhere", a second API on another port, gets no request (the token goes only to
the configured API); the API gets requests only on the case's `only` paths (prefixes of the
path and query); no token in the output; with `within` (seconds), the case's call ends within
it (plus some slack for a busy machine).

A case is one JSON file: `about`, `call` ({tool, arguments}), optional `api` (`pulls`,
`releases`, and `answers`: "METHOD /path" → {status, body, headers}, which the API gives instead
of its own answer), `fails` or `returns`, `only`, optional `within` and `alongside_first` (the
other call of the round ends before the case's call: the case's work is off the event loop).
`{api}`, `{api_origin}` and `{elsewhere}` stand for the fake API's base URL, its origin and the
other origin, anywhere in a case; `{"$text": {"repeat": "a", "times": 60, "then": "!"}}` and
`{"$text": {"random": "ab", "length": 262144, "seed": 1}}` stand for long texts.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.adversarial.support import CORPUS
from tests.conftest import GraphchatRunner
from tests.fake_github import FakeGithub
from tests.scripted_server import ScriptedModelServer

CASES = sorted((CORPUS / "github").glob("*.json"))
TOKEN = "ghp_corpusTokenForTests0123456789abcdef"
ALONGSIDE = {"number": 8, "title": "the other pull request", "body": "", "state": "open"}
ALONGSIDE_DELAY = 0.3  # seconds the API waits before answering the other call of the round
SLACK_MS = 1500  # a busy machine (2 cores, many test runs) on top of a case's `within`


@pytest.fixture
def apis() -> Iterator[tuple[FakeGithub, FakeGithub]]:
    api, elsewhere = FakeGithub().start(), FakeGithub().start()
    yield api, elsewhere
    api.stop()
    elsewhere.stop()


def expand(value: Any, names: dict[str, str]) -> Any:
    """A case's value with its placeholders and `$text` generators filled in."""
    if isinstance(value, str):
        for name, text in names.items():
            value = value.replace("{" + name + "}", text)
        return value
    if isinstance(value, list):
        return [expand(item, names) for item in value]
    if isinstance(value, dict):
        if set(value) == {"$text"}:
            spec = value["$text"]
            if "random" in spec:
                rng = random.Random(spec["seed"])
                return "".join(rng.choice(spec["random"]) for _ in range(spec["length"]))
            return spec["repeat"] * spec["times"] + spec.get("then", "")
        return {expand(key, names): expand(item, names) for key, item in value.items()}
    return value


def load(case: Path, api: FakeGithub, elsewhere: FakeGithub) -> dict[str, Any]:
    origin = api.url.removesuffix("/api/v3")
    names = {"api": api.url, "api_origin": origin, "elsewhere": elsewhere.url.removesuffix("/api/v3")}
    spec = expand(json.loads(case.read_text()), names)
    given = spec.get("api", {})
    api.pulls = {int(number): pr for number, pr in given.get("pulls", {}).items()}
    api.releases = given.get("releases", [])
    api.answers = {
        route: (answer["status"], answer.get("body"), answer.get("headers", {}))
        for route, answer in given.get("answers", {}).items()
    }
    return spec


def workspace_for(workspace: Path) -> None:
    (workspace / "graphchat.yaml").write_text("tools:\n  packs: [github]\n")


def env_for(api: FakeGithub) -> dict[str, str]:
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": api.url, "GITHUB_REPOSITORY": api.repo}


def check_requests(spec: dict[str, Any], api: FakeGithub, elsewhere: FakeGithub, also: str = "") -> None:
    assert elsewhere.requests == [], f"another origin was sent: {elsewhere.requests}"
    allowed = [*spec["only"], *([also] if also else [])]
    strays = [r["path"] for r in api.requests if not any(r["path"].startswith(p) for p in allowed)]
    assert strays == [], f"requests off the case's paths {allowed}: {strays}"


def check_quiet(text: str) -> None:
    assert "Traceback" not in text, text
    assert TOKEN not in text


@pytest.mark.parametrize("case", CASES, ids=[path.stem for path in CASES])
def test_tools_call(
    case: Path, workspace: Path, cli: GraphchatRunner, apis: tuple[FakeGithub, FakeGithub]
) -> None:
    api, elsewhere = apis
    spec = load(case, api, elsewhere)
    workspace_for(workspace)

    started = time.monotonic()
    done = cli(
        "tools", "call", "--yes", spec["call"]["tool"], json.dumps(spec["call"]["arguments"]),
        env=env_for(api), timeout=60,
    )  # fmt: skip
    took = time.monotonic() - started
    check_quiet(done.stdout + done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    if "fails" in spec:
        assert done.returncode == 1, done.stdout + done.stderr
        assert len(errors) == 1 and spec["fails"] in errors[0], done.stderr
    else:
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert {key: result.get(key) for key in spec["returns"]} == spec["returns"], result
    check_requests(spec, api, elsewhere)
    assert took < 30, f"the call took {took:.1f} s"


@pytest.mark.parametrize("case", CASES, ids=[path.stem for path in CASES])
def test_ask(
    case: Path,
    workspace: Path,
    cli: GraphchatRunner,
    apis: tuple[FakeGithub, FakeGithub],
    model_server: ScriptedModelServer,
) -> None:
    api, elsewhere = apis
    spec = load(case, api, elsewhere)
    workspace_for(workspace)
    api.pulls[8] = ALONGSIDE
    api.delays["GET /api/v3/repos/owner/repo/pulls/8"] = ALONGSIDE_DELAY
    call = spec["call"]
    model_server.push(
        {
            "tool_calls": [
                {"id": "case", "name": call["tool"], "arguments": call["arguments"]},
                {"id": "alongside", "name": "builtin__gh_pr_meta", "arguments": {"pr": 8}},
            ]
        },
        {"text": "Done."},
    )
    env = {**env_for(api), **model_server.env(), "GRAPHCHAT_EVENTS": "jsonl"}

    done = cli("ask", "--yes", "use the tools", env=env, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "Done."
    check_quiet(done.stdout + done.stderr)
    check_requests(spec, api, elsewhere, also="/api/v3/repos/owner/repo/pulls/8")

    sent = {
        m["tool_call_id"]: str(m["content"])
        for m in model_server.requests[1]["messages"]
        if m["role"] == "tool"
    }
    assert "the other pull request" in sent["alongside"], sent["alongside"]
    if "fails" in spec:
        assert spec["fails"] in sent["case"], sent["case"]
    else:
        assert {k: json.loads(sent["case"]).get(k) for k in spec["returns"]} == spec["returns"], sent["case"]

    events = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    args = {e["call"]: e.get("args") for e in events if e["event"] == "tool_started"}
    ms = {e["call"]: e["ms"] for e in events if e["event"] == "tool_finished" and "call" in e}
    (other,) = [c for c, given in args.items() if given == {"pr": 8}]
    (mine,) = [c for c in args if c != other]
    if "within" in spec:
        assert ms[mine] <= spec["within"] * 1000 + SLACK_MS, ms
    if spec.get("alongside_first"):
        assert ms[other] < ms[mine], ms
    assert ms[other] < ALONGSIDE_DELAY * 1000 + SLACK_MS, ms
