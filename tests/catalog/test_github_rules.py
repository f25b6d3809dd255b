"""The GitHub pack's rules for what it does not trust, as pure functions (the attacks themselves
run through the real command in tests/adversarial/test_github_api.py)."""

from __future__ import annotations

import threading
import time

import pytest

from graphchat.catalog.packs.github import (
    DEFAULT_TICKET,
    GithubFailed,
    _compile_ticket,
    _find_ticket,
    segment,
    tag_name,
)


@pytest.mark.parametrize(
    ("value", "sent"),
    [(7, "7"), ("v1.0", "v1.0"), ("release/1.0", "release%2F1.0"), ("a b?c#d%", "a%20b%3Fc%23d%25"),
     ("../x", "..%2Fx"), ("ünï", "%C3%BCn%C3%AF")],
)  # fmt: skip
def test_a_value_is_one_quoted_segment(value: object, sent: str) -> None:
    assert segment(value, "tag") == sent


@pytest.mark.parametrize("value", ["", ".", "..", "v1\n", "v1\x1b[2J", "\x00"])
def test_a_value_that_cannot_be_one_segment_is_refused_naming_it(value: str) -> None:
    with pytest.raises(GithubFailed, match=r"^tag '.*' cannot be one segment of an API path$"):
        segment(value, "tag")


@pytest.mark.parametrize("tag", ["v1.0", "v1.0.0-rc.1", "release/1.0", "2026-12-03", "v1+build", "@v1"])
def test_tags_git_allows_pass(tag: str) -> None:
    assert tag_name(tag) == tag


@pytest.mark.parametrize(
    "tag",
    ["../../../../repos/x/y/issues/1", "..", "a..b", "v1 ", "v~1", "v^1", "v:1", "v?", "v*", "v[1",
     "v\\1", "/v1", "v1/", "a//b", ".v1", "a/.b", "v1.", "v1.lock", "a.lock/b", "@", "v@{1}", "v1\t"],
)  # fmt: skip
def test_tags_git_refuses_are_an_error_naming_the_argument(tag: str) -> None:
    with pytest.raises(GithubFailed, match=r"^gh_release: tag '.*' is not a tag name \("):
        tag_name(tag)


def ticket(pattern: str, *texts: str) -> dict[str, object]:
    sources = list(zip(("branch", "title", "body"), texts, strict=False))
    return _find_ticket(_compile_ticket(pattern), sources, threading.Event())


def test_the_default_pattern_finds_graphs_tickets() -> None:
    assert ticket(DEFAULT_TICKET, "topic/arm64", "Fix utf8", "see\nLN 1234 and PROJ-9") == {
        "found": True,
        "ticket": "LN-1234",
        "source": "body",
    }
    assert ticket(DEFAULT_TICKET, "sha256", "", "")["found"] is False


def test_a_match_is_leftmost_longest_as_grep_e() -> None:
    assert ticket("LN|LN-[0-9]+", "", "LN-42 done", "")["ticket"] == "LN-42"


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", "(x+x+)+y", "(.*a){12}b"])
def test_backtracking_bombs_end_at_once(pattern: str) -> None:
    started = time.monotonic()
    assert ticket(pattern, "a" * 5000 + "!", "x" * 5000, "")["found"] is False
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(", "missing )"), ("(a)\\1", "invalid escape"), ("(?=a)", "invalid perl operator"),
     ("((a{100}){100}){100}", "invalid repetition size")],
)  # fmt: skip
def test_a_pattern_re2_refuses_is_an_error_naming_it(pattern: str, why: str) -> None:
    with pytest.raises(
        GithubFailed, match=r"^gh_pr_ticket: pattern '.*' is not a usable regular expression: "
    ):
        _compile_ticket(pattern)
    with pytest.raises(GithubFailed) as raised:
        _compile_ticket(pattern)
    assert why in str(raised.value) and "\n" not in str(raised.value)


def test_a_stopped_search_gives_up_at_its_next_line() -> None:
    stop = threading.Event()
    stop.set()
    sources = [("body", "LN-1\nLN-2")]
    assert _find_ticket(_compile_ticket(DEFAULT_TICKET), sources, stop)["found"] is False
