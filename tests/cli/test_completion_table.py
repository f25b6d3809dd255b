"""Every entry of the completion table names an argument the parser has (a renamed argument
would silently lose its completion otherwise)."""

from __future__ import annotations

from graphchat.cli.completion import COMPLETERS, attach_completers
from graphchat.cli.main import GROUPS, build_parser


def test_every_completer_reaches_an_argument_of_the_parser() -> None:
    attached = set(attach_completers(build_parser()))
    for path, dest in COMPLETERS:
        if path == ("*",):
            assert any(d == dest for _, d in attached), dest
        else:
            assert (path, dest) in attached, (path, dest)
    # `-m/--model` completes model names wherever it is
    assert {p for p, d in attached if d == "model"} == {
        ("ask",),
        ("chat",),
        ("plan", "run"),
        ("plan", "go"),
        ("plan", "draft"),
        ("workbench", "plan"),
    }
    assert {"models", "completion"} <= set(GROUPS)
