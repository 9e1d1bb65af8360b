"""Count-down latches: every waiter goes when the count reaches zero, and not before."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import InvalidArgumentError, NotFoundError

from .harness import Expire
from .support import settle, spawn, within


async def test_waiters_go_together_when_the_count_reaches_zero(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    one, two = await client.session(node), await client2.session(node)
    assert await one.latch("warmup", 3).remaining() == 3  # the first use makes it
    assert await two.latch("warmup", 99).remaining() == 3  # later ones find it
    waiting = [spawn(one.latch("warmup", 3).wait()), spawn(two.latch("warmup", 3).wait())]
    assert await one.latch("warmup", 3).count_down() == 2
    assert await two.latch("warmup", 3).count_down() == 1
    await settle()
    assert not any(task.done() for task in waiting)
    assert await one.latch("warmup", 3).count_down() == 0
    await within(asyncio.gather(*waiting))
    # Open for good: more count-downs stay at zero, a wait returns at once.
    assert await two.latch("warmup", 3).count_down() == 0
    await within(two.latch("warmup", 3).wait(timeout=0))


async def test_concurrent_count_downs_are_each_counted_once(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client, client2)]
    left = await within(asyncio.gather(*(s.latch("jobs", 8).count_down() for s in sessions * 2)))
    assert sorted(left) == list(range(8))
    assert await sessions[0].latch("jobs", 8).remaining() == 0


async def test_a_wait_times_out_and_a_try_says_busy(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    latch = session.latch("gate", 1)
    with pytest.raises(TimeoutError):
        await latch.wait(timeout=0)
    with pytest.raises(TimeoutError):
        await within(latch.wait(timeout=0.05))
    assert await latch.remaining() == 1
    with pytest.raises(InvalidArgumentError):
        session.latch("gate", -1)


async def test_a_lost_session_ends_its_wait_with_the_loss_error(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    waiter = await client.session(node, recovery_window=15.0)
    waiting = spawn(waiter.latch("gate", 1).wait())
    await settle()
    await expire(waiter)
    with pytest.raises(tenure.errors.SessionExpiredError):
        await within(waiting)
    other = await client2.session(node)
    assert await other.latch("gate", 1).count_down() == 0  # the latch itself is unharmed


async def test_a_deleted_latch_ends_its_waits(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    latch = session.latch("gate", 2)
    assert await latch.remaining() == 2  # made: this object's wait will not make it again
    waiting = spawn(latch.wait())
    await settle()
    await session.semaphore("gate").delete()
    with pytest.raises(NotFoundError):  # (deleted while waited for, or before the wait began)
        await within(waiting)
