"""Shape cache: merged schemas, map collapse, sampling, bounded examples, atomic store."""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphchat import fsutil, shapes
from graphchat.shapes import (
    MAX_DEPTH,
    ShapeStore,
    bounded_example,
    infer_schema,
    merge_schemas,
    record_async,
)


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """`schema`, checked against the 2020-12 meta-schema (the costly part: once per schema)."""
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def validates(value: Any, schema: dict[str, Any]) -> bool:
    return validator(schema).is_valid(value)


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def records(n: int, *, text: int = 120) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "name": f"user {i}",
            "score": i * 0.5 if i % 2 else i,
            "tags": ["a", "b"][: i % 3],
            "bio": "x" * text,
            "manager": None if i % 5 else {"id": i - 1, "name": f"user {i - 1}"},
        }
        for i in range(n)
    ]


# --------------------------------------------------------------------------- inference


def test_scalars_and_records() -> None:
    assert infer_schema(None) == {"type": "null"}
    assert infer_schema(True) == {"type": "boolean"}
    assert infer_schema(3) == {"type": "integer"}
    assert infer_schema(3.5) == {"type": "number"}
    assert infer_schema("s") == {"type": "string"}
    assert infer_schema({}) == {"type": "object"}
    assert infer_schema([]) == {"type": "array"}
    assert infer_schema({"a": 1, "b": "x"}) == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a", "b"],
    }


def test_array_elements_are_merged_not_first_only() -> None:
    schema = infer_schema([{"id": 1, "name": "a"}, {"id": 2.5, "extra": True}, None])
    assert schema == {
        "type": "array",
        "items": {
            "type": ["object", "null"],
            "properties": {
                "id": {"type": "number"},
                "name": {"type": "string"},
                "extra": {"type": "boolean"},
            },
            "required": ["id"],
        },
    }


def test_merged_schema_of_two_differently_shaped_results() -> None:
    first = {"id": 1, "name": "a", "tags": ["x"], "meta": {"k": 1}}
    second = {"id": "2", "name": None, "extra": True, "meta": [1, 2], "tags": []}
    merged = merge_schemas(infer_schema(first), infer_schema(second))
    props = merged["properties"]
    assert merged["type"] == "object"
    assert merged["required"] == ["id", "name", "tags", "meta"]
    assert set(props) == {"id", "name", "tags", "meta", "extra"}
    assert props["id"] == {"type": ["integer", "string"]}
    assert props["name"] == {"type": ["null", "string"]}
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert props["meta"] == {
        "anyOf": [
            {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
            {"type": "array", "items": {"type": "integer"}},
        ]
    }
    assert validates(first, merged) and validates(second, merged)
    # A third call without "name" drops it from required; integer + number widen to number.
    third = merge_schemas(merged, infer_schema({"id": 2.5, "tags": [], "meta": None}))
    assert third["required"] == ["id", "tags", "meta"]
    assert third["properties"]["id"] == {"type": ["number", "string"]}


def test_merge_mixed_scalars_and_containers_use_anyof() -> None:
    merged = merge_schemas(infer_schema("a"), infer_schema({"k": 1}))
    assert merged == {
        "anyOf": [
            {"type": "object", "properties": {"k": {"type": "integer"}}, "required": ["k"]},
            {"type": "string"},
        ]
    }
    again = merge_schemas(merged, infer_schema([1]))
    assert [b["type"] for b in again["anyOf"]] == ["object", "array", "string"]
    assert merge_schemas(again, {}) == {}  # "anything" absorbs


@pytest.mark.parametrize(
    "keys",
    [
        [str(uuid.UUID(int=i * 7919 + 1)) for i in range(5)],
        [str(1000 + i) for i in range(5)],
        [f"user_{i:04d}" for i in range(5)],
        ["2024-01-01", "2024-01-02", "2024-01-03"],
    ],
    ids=["uuid", "numeric", "prefixed", "dates"],
)
def test_id_keyed_maps_collapse(keys: list[str]) -> None:
    value = {"items": {k: {"title": f"t{i}", "done": bool(i % 2)} for i, k in enumerate(keys)}}
    schema = infer_schema(value)
    items = schema["properties"]["items"]
    assert items == {
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "done": {"type": "boolean"}},
            "required": ["title", "done"],
        },
    }
    assert validates(value, schema)


def test_many_keys_with_uniform_values_collapse_but_records_do_not() -> None:
    env = {f"VAR_{chr(65 + i)}NAME": f"value {i}" for i in range(20)}
    assert infer_schema(env) == {"type": "object", "additionalProperties": {"type": "string"}}
    record = {"id": 1, "name": "n", "email": "e", "active": True, "tags": []}
    assert "properties" in infer_schema(record)
    few_strings = {f"field{chr(97 + i)}": "v" for i in range(5)}
    assert "properties" in infer_schema(few_strings)


def test_huge_id_map_gives_small_schema() -> None:
    value = {str(uuid.UUID(int=i)): {"n": i, "label": f"l{i}"} for i in range(5000)}
    schema = infer_schema(value)
    assert len(json.dumps(schema)) < 300


def test_map_and_record_sightings_merge_into_a_map() -> None:
    small = infer_schema({"a": {"n": 1}})  # one key: looks like a record
    big = infer_schema({"1": {"n": 2.5}, "2": {"n": 3}, "3": {"n": 4}})
    assert "properties" in small and "additionalProperties" in big
    merged = merge_schemas(small, big)
    assert merged == {
        "type": "object",
        "additionalProperties": {
            "type": "object",
            "properties": {"n": {"type": "number"}},
            "required": ["n"],
        },
    }


def test_large_arrays_are_sampled_head_spread_and_last() -> None:
    value: list[Any] = list(range(10_000))
    value[75] = "not sampled"  # after the head, between the evenly spaced picks
    value[-1] = None  # the last one is always looked at
    assert infer_schema(value) == {"type": "array", "items": {"type": ["null", "integer"]}}
    value[10] = "in the head"
    assert infer_schema(value)["items"] == {"type": ["null", "integer", "string"]}


def test_depth_is_bounded_and_deep_nesting_never_raises(tmp_path: Path) -> None:
    value: Any = "leaf"
    for _ in range(2000):
        value = {"a": [value]}  # 4000 levels
    schema = infer_schema(value)
    node = schema
    levels = 0
    while node:
        node = node.get("properties", {}).get("a") or node.get("items") or {}
        levels += 1
    assert levels == MAX_DEPTH  # MAX_DEPTH described levels, then {}
    assert depth_of(bounded_example(value)) <= 7
    store = ShapeStore(tmp_path)
    store.record("deep", value)
    store.record("deep", value)
    assert store.get("deep")["seen_count"] == 2  # type: ignore[index]


# --------------------------------------------------------------------------- examples


def test_bounded_example_cuts_strings_arrays_and_maps_but_keeps_record_keys() -> None:
    value = {
        "text": "y" * 1000,
        "list": list(range(50)),
        "by_id": {str(i): {"v": i} for i in range(40)},
        "record": {f"k{chr(97 + i)}": i for i in range(10)},
    }
    ex = bounded_example(value)
    assert ex["text"].startswith("y" * 200) and "…" in ex["text"] and len(ex["text"]) < 230
    assert ex["list"] == [0, 1, 2]
    assert ex["by_id"] == {"0": {"v": 0}, "1": {"v": 1}, "2": {"v": 2}}
    assert ex["record"] == value["record"]
    assert validates(ex, infer_schema(value))
    assert bounded_example([[[["deep"]]]], max_depth=2) == [[[]]]


# --------------------------------------------------------------------------- property tests

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
id_keys = st.from_regex(r"[0-9]{1,6}", fullmatch=True) | st.uuids().map(str)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=6)
        | st.dictionaries(st.text(max_size=8), children, max_size=6)
        | st.dictionaries(id_keys, children, max_size=5)
    ),
    max_leaves=40,
)


@settings(max_examples=150, deadline=None)
@given(json_values)
def test_inferred_schema_accepts_its_value_and_example(value: Any) -> None:
    schema = validator(infer_schema(value))
    assert schema.is_valid(value)
    assert schema.is_valid(bounded_example(value, max_depth=MAX_DEPTH + 2))
    if depth_of(value) <= 6:
        assert schema.is_valid(bounded_example(value))


@settings(max_examples=150, deadline=None)
@given(json_values, json_values)
def test_merged_schema_accepts_both_values(a: Any, b: Any) -> None:
    merged = merge_schemas(infer_schema(a), infer_schema(b))
    schema = validator(merged)
    assert schema.is_valid(a)
    assert schema.is_valid(b)
    assert merge_schemas(merged, infer_schema(a)) == merged  # merging is idempotent


# --------------------------------------------------------------------------- store


def test_store_merges_counts_and_lists(tmp_path: Path) -> None:
    store = ShapeStore(tmp_path / "catalog" / "shapes")
    assert store.get("git__log") is None and store.list() == []
    store.record("git__log", [{"sha": "a1", "msg": "m"}])
    store.record("git__log", [{"sha": "b2", "files": 3}])
    doc = store.get("git__log")
    assert doc is not None
    assert doc["tool"] == "git__log" and doc["seen_count"] == 2 and doc["source"] == "observed"
    assert doc["schema"]["items"]["required"] == ["sha"]
    assert doc["example"] == [{"sha": "b2", "files": 3}]
    assert "observed_schema" not in doc
    assert (tmp_path / "catalog" / "shapes" / "git__log.json").exists()
    [summary] = store.list()
    assert summary == {
        "tool": "git__log",
        "seen_count": 2,
        "updated_at": doc["updated_at"],
        "source": "observed",
    }
    assert doc["updated_at"].endswith("Z")


def test_declared_schema_takes_priority(tmp_path: Path) -> None:
    store = ShapeStore(tmp_path)
    store.record("t", {"a": 1})
    declared = {"type": "object", "properties": {"a": {"type": "number"}}}
    store.record("t", {"a": 2, "b": "x"}, declared)
    doc = store.get("t")
    assert doc is not None
    assert doc["source"] == "declared" and doc["schema"] == declared
    assert doc["observed_schema"]["required"] == ["a"]  # learned across both calls
    assert set(doc["observed_schema"]["properties"]) == {"a", "b"}


def test_unsafe_tool_names_stay_inside_the_directory(tmp_path: Path) -> None:
    store = ShapeStore(tmp_path / "shapes")
    store.record("../../etc/passwd", 1)
    assert [p.name for p in (tmp_path / "shapes").iterdir()] == ["______etc_passwd.json"]
    assert store.get("../../etc/passwd")["tool"] == "../../etc/passwd"  # type: ignore[index]


def test_one_megabyte_result_gives_a_small_file(tmp_path: Path) -> None:
    value = {"total": 5000, "rows": records(5000, text=2000)}
    assert len(json.dumps(value)) > 1_000_000
    store = ShapeStore(tmp_path)
    store.record("db__query", value)
    size = store.path("db__query").stat().st_size
    assert size < 4096
    doc = store.get("db__query")
    assert doc is not None and len(doc["example"]["rows"]) <= 3


def test_one_megabyte_id_map_gives_a_small_file(tmp_path: Path) -> None:
    value = {str(uuid.UUID(int=i)): r for i, r in enumerate(records(5000, text=150))}
    assert len(json.dumps(value)) > 1_000_000
    store = ShapeStore(tmp_path)
    store.record("kv__dump", value)
    assert store.path("kv__dump").stat().st_size < 4096


def test_many_wide_records_still_give_a_bounded_example(tmp_path: Path) -> None:
    wide = [{f"field_{chr(97 + i)}{chr(97 + j)}": "z" * 500 for i in range(4) for j in range(5)}] * 10
    store = ShapeStore(tmp_path)
    store.record("wide", wide)
    doc = store.get("wide")
    assert doc is not None
    assert len(json.dumps(doc["example"])) <= shapes.EXAMPLE_BUDGET


def test_atomic_write_leaves_no_temp_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ShapeStore(tmp_path)
    for i in range(5):
        store.record("t", {"i": i})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
    before = store.path("t").read_bytes()

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(fsutil.os, "replace", broken_replace)
    with pytest.raises(OSError):
        store.record("t", {"i": "new"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.json"]
    assert store.path("t").read_bytes() == before


def test_corrupt_file_reads_as_absent_and_is_replaced(tmp_path: Path) -> None:
    store = ShapeStore(tmp_path)
    store.path("t").write_text("{not json")
    assert store.get("t") is None and store.list() == []
    store.record("t", 1)
    assert store.get("t")["seen_count"] == 1  # type: ignore[index]


def test_concurrent_records_from_threads_lose_no_update(tmp_path: Path) -> None:
    store = ShapeStore(tmp_path)
    start = threading.Barrier(8)

    def work(n: int) -> None:
        start.wait()
        for i in range(25):
            store.record("shared", {"k": i, f"only{n}": True})

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    doc = store.get("shared")
    assert doc is not None
    assert doc["seen_count"] == 200
    assert len(doc["schema"]["properties"]) == 9  # k plus every thread's own key
    assert doc["schema"]["required"] == ["k"]
    assert [p.name for p in tmp_path.iterdir()] == ["shared.json"]


async def test_record_async_runs_off_loop_and_drains(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ShapeStore(tmp_path)
    loop_thread = threading.get_ident()
    seen_threads: list[int] = []
    real_record = store.record

    def spying_record(*args: Any) -> None:
        seen_threads.append(threading.get_ident())
        real_record(*args)

    monkeypatch.setattr(store, "record", spying_record)
    tasks = [record_async(store, "a", {"i": i}) for i in range(5)]
    tasks.append(store.record_async("b", [1], {"type": "array"}))
    await store.drain()
    assert all(t.done() for t in tasks)
    assert store.get("a")["seen_count"] == 5  # type: ignore[index]
    assert store.get("b")["source"] == "declared"  # type: ignore[index]
    assert loop_thread not in seen_threads


async def test_record_async_failure_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    store = ShapeStore(blocker / "shapes")  # cannot create a directory under a file
    with caplog.at_level(logging.WARNING, logger="graphchat.shapes"):
        task = store.record_async("t", 1)
        await store.drain()
    assert task.done() and task.exception() is None
    assert "could not record the shape of t" in caplog.text
    assert not os.path.exists(blocker / "shapes")
