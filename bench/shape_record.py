"""Bench: recording the shape of a ~1 MB tool result (budget: 50 ms, off the round's path).

Prints the median wall time of ShapeStore.record (infer + merge with the stored shape + bounded
example + atomic write) for a list of records and for an id-keyed map, plus genson alone on the
same values for comparison. Figures only; never asserts on time.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from graphchat.shapes import ShapeStore, infer_schema

RUNS = 21


def record(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "uuid": str(uuid.UUID(int=i * 2654435761)),
        "title": f"Issue {i}: something broke in module {i % 17}",
        "state": "open" if i % 3 else "closed",
        "score": round(i * 0.37, 2),
        "labels": [{"name": "bug", "color": "d73a4a"}] * (i % 3),
        "author": {"login": f"user{i % 97}", "id": 1000 + i % 97, "site_admin": False},
        "body": "Lorem ipsum dolor sit amet. " * (i % 7),
        "closed_at": None if i % 3 else "2024-05-01T12:00:00Z",
    }


def build(target: int = 1_000_000) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    size = 0
    while size < target:
        r = record(len(rows))
        rows.append(r)
        size += len(json.dumps(r))
    return rows, {r["uuid"]: r for r in rows}


def median_ms(fn: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> int:
    rows, by_id = build()
    cases = {"records": {"total": len(rows), "items": rows}, "id_map": by_id}
    try:
        from genson import SchemaBuilder
    except ImportError:  # optional comparison
        SchemaBuilder = None
    with tempfile.TemporaryDirectory() as tmp:
        store = ShapeStore(Path(tmp))
        print(
            f"{'case':<10} {'MB':>5} {'record ms':>10} {'infer ms':>9} {'file B':>7} {'genson ms':>10} {'genson B':>9}"
        )
        for name, value in cases.items():
            mb = len(json.dumps(value)) / 1e6
            rec = median_ms(partial(store.record, name, value))
            inf = median_ms(partial(infer_schema, value))
            size = store.path(name).stat().st_size
            g_ms = g_size = float("nan")
            if SchemaBuilder is not None:

                def run_genson(v: Any = value) -> str:
                    b = SchemaBuilder(schema_uri=None)
                    b.add_object(v)
                    return str(b.to_json())

                g_ms = median_ms(run_genson)
                g_size = len(run_genson())
            print(f"{name:<10} {mb:>5.2f} {rec:>10.2f} {inf:>9.2f} {size:>7} {g_ms:>10.1f} {g_size:>9.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
