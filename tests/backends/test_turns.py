"""Turns.held: one client's joins of a semaphore's queue, one at a time, in order.

(The take/wait/give steps etcd:// uses directly are tested in
tests/backends/etcd/test_hot_path.py.)
"""

from __future__ import annotations

import asyncio

import pytest

from tenure.backends._turns import Turns


async def test_joins_of_one_semaphore_go_one_at_a_time_in_the_order_made() -> None:
    locks: Turns[tuple[str, str]] = Turns()
    order: list[int] = []
    inside = 0

    async def join(number: int) -> None:
        nonlocal inside
        async with locks.held(("node", "sem")):
            inside += 1
            assert inside == 1
            order.append(number)
            await asyncio.sleep(0)  # let the others try to come in meanwhile
            inside -= 1

    await asyncio.wait_for(asyncio.gather(*(join(n) for n in range(5))), timeout=5)
    assert order == [0, 1, 2, 3, 4]
    assert len(locks) == 0  # nobody joining: nothing kept


async def test_other_semaphores_and_nodes_do_not_wait() -> None:
    locks: Turns[tuple[str, str]] = Turns()
    async with locks.held(("node", "a")), locks.held(("node", "b")), locks.held(("other", "a")):
        assert len(locks) == 3
    assert len(locks) == 0


async def test_a_join_that_fails_or_is_cancelled_lets_the_next_in() -> None:
    locks: Turns[tuple[str, str]] = Turns()
    with pytest.raises(RuntimeError):
        async with locks.held(("node", "sem")):
            raise RuntimeError("the call failed")
    entered = asyncio.Event()
    release = asyncio.Event()

    async def holder() -> None:
        async with locks.held(("node", "sem")):
            entered.set()
            await release.wait()

    first = asyncio.ensure_future(holder())
    await asyncio.wait_for(entered.wait(), timeout=5)

    async def waiter() -> None:
        async with locks.held(("node", "sem")):
            pass  # pragma: no cover - cancelled before it gets the lock

    waiting = asyncio.ensure_future(waiter())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    release.set()
    await asyncio.wait_for(first, timeout=5)
    assert len(locks) == 0
    async with locks.held(("node", "sem")):
        assert len(locks) == 1
