"""Catalog names: provider-safe, at most 64 characters, reversible, collisions reported."""

from __future__ import annotations

import re

import pytest

from graphchat.naming import MAX_NAME, NameMap, sanitize, tool_name, valid_server_name

SAFE = re.compile(r"[A-Za-z0-9_-]+")


def test_short_name_is_server_sep_tool() -> None:
    assert tool_name("git", "git_status") == "git__git_status"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a.b/c d", "a_b_c_d"),
        ("ok-name_1", "ok-name_1"),
        ("émoji🙂", "_moji_"),
        ("", "_"),
        ("tab\tnew\nline", "tab_new_line"),
    ],
)
def test_sanitize_weird_chars(raw: str, expected: str) -> None:
    assert sanitize(raw) == expected


def test_long_name_keeps_head_and_tail_with_stable_hash() -> None:
    server = "analytics-warehouse"
    tool = "run_" + "very_long_middle_part_" * 5 + "and_export_to_csv"
    name = tool_name(server, tool)
    assert len(name) == MAX_NAME
    assert SAFE.fullmatch(name)
    assert name.startswith("analytics-warehouse__run_")
    assert name.endswith("and_export_to_csv")
    # Stable across calls, and it differs from a blind cut.
    assert name == tool_name(server, tool)
    assert name != f"{server}__{tool}"[:MAX_NAME]
    digest = name.split("_")
    assert any(re.fullmatch(r"[0-9a-f]{6}", part) for part in digest)


def test_long_names_differing_only_in_the_middle_stay_distinct() -> None:
    a = tool_name("srv", "x" * 40 + "A" + "y" * 40)
    b = tool_name("srv", "x" * 40 + "B" + "y" * 40)
    assert a != b
    assert len(a) == len(b) == MAX_NAME


def test_hash_is_of_the_real_pair_not_the_sanitized_one() -> None:
    long = "z" * 80
    assert tool_name("s", long + ".x") != tool_name("s", long + "/x")


def test_exactly_64_is_kept_whole() -> None:
    tool = "t" * (MAX_NAME - len("srv__"))
    assert tool_name("srv", tool) == f"srv__{tool}"


def test_reverse_map_restores_real_names() -> None:
    names = NameMap()
    weird = names.add("my-server", "do.thing/now")
    long = names.add("srv", "q" * 100)
    assert weird == "my-server__do_thing_now"
    assert names.resolve(weird) == ("my-server", "do.thing/now")
    assert names.resolve(long) == ("srv", "q" * 100)
    assert names.resolve("nope__nothing") is None
    assert names.add("srv", "q" * 100) == long  # idempotent
    assert len(names) == 2
    assert not names.collisions


def test_collision_is_reported_and_neither_tool_hidden() -> None:
    names = NameMap()
    first = names.add("fs", "read.file")
    second = names.add("fs", "read/file")
    third = names.add("fs", "read_file")
    assert first == "fs__read_file"
    assert len({first, second, third}) == 3
    for name in (second, third):
        assert name.startswith("fs__read_file_")
        assert SAFE.fullmatch(name) and len(name) <= MAX_NAME
    assert names.resolve(first) == ("fs", "read.file")
    assert names.resolve(second) == ("fs", "read/file")
    assert names.resolve(third) == ("fs", "read_file")
    assert names.collisions == [
        ("fs__read_file", [("fs", "read.file"), ("fs", "read/file"), ("fs", "read_file")])
    ]
    assert names.name_of("fs", "read/file") == second


def test_collision_on_a_disambiguated_name_still_yields_unique_names() -> None:
    names = NameMap()
    names.add("s", "a.b")
    second = names.add("s", "a/b")  # -> s__a_b_<hash>
    tool = second.removeprefix("s__")
    third = names.add("s", tool)  # a real tool literally named like the disambiguated one
    assert third != second
    assert names.resolve(third) == ("s", tool)
    assert [name for name, _ in names.collisions] == ["s__a_b", second]


def test_long_names_that_sanitize_alike_stay_distinct() -> None:
    names = NameMap()
    base = "w" * 90
    a = names.add("srv", base + ".")
    b = names.add("srv", base + "/")
    assert a != b
    assert len(a) <= MAX_NAME and len(b) <= MAX_NAME
    assert names.resolve(a) == ("srv", base + ".")
    assert names.resolve(b) == ("srv", base + "/")


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("git", True),
        ("my-server-2", True),
        ("a__b", False),
        ("a_b", False),
        ("", False),
        ("has space", False),
        ("dot.ted", False),
        ("trailing\n", False),
        ("ünï", False),
    ],
)
def test_valid_server_name(name: str, ok: bool) -> None:
    assert valid_server_name(name) is ok
