"""What the loop's micro-benchmarks share (``board``, ``steps``, ``ydb_resources``):
the longest time another task waited for its turn of the loop while some work ran.

Internals: none.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, NamedTuple, TypeVar

T = TypeVar("T")


class Turns(NamedTuple, Generic[T]):
    """What :func:`longest_turn` saw of one run of a work."""

    took: float
    """The work's whole time, in ms."""
    longest: float
    """The longest time another task waited for its turn meanwhile, in ms: the work's
    longest slice of the loop."""
    turns: int
    """How many turns that other task had meanwhile."""
    answer: T
    """What the work answered."""


async def longest_turn(work: Callable[[], Awaitable[T]]) -> Turns[T]:
    """Run ``work`` beside a task that only yields, timing each of its turns."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0)
            now = time.perf_counter()
            gaps.append((now - last) * 1000)
            last = now

    task = asyncio.ensure_future(ticker())
    await asyncio.sleep(0)
    start = time.perf_counter()
    answer = await work()
    took = (time.perf_counter() - start) * 1000
    done = True
    await task
    return Turns(took, max(gaps, default=0.0), len(gaps), answer)
