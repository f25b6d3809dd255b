"""Run a coroutine per item with bounded concurrency; results in input order.

When an item fails, items already in flight finish, items not yet started are skipped, and
the lowest-index failure is raised (workers take items in index order, so every item before a
failed one has started, and the lowest failure is well defined).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")

_UNSET: Any = object()


async def run_pool(
    items: list[Any],
    work: Callable[[int, Any], Awaitable[T]],
    concurrency: int,
    on_done: Callable[[], None] | None = None,
) -> list[T]:
    n = len(items)
    if concurrency <= 1 or n <= 1:
        out: list[T] = []
        for index, item in enumerate(items):
            out.append(await work(index, item))
            if on_done is not None:
                on_done()
        return out
    results: list[Any] = [_UNSET] * n
    failures: dict[int, BaseException] = {}
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while not failures and next_index < n:
            index = next_index
            next_index += 1
            try:
                results[index] = await work(index, items[index])
            except Exception as exc:  # drain: the others finish what they started
                failures[index] = exc
            if on_done is not None:
                on_done()

    workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, n))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        raise
    if failures:
        raise failures[min(failures)]
    return results
