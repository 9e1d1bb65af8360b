"""A cancelled acquire never leaves a hold behind: the one cancel policy, on every backend.

Every backend's sessions share one policy (``docs/backends.md``, "Cancellation"):

* when the CancelledError of a cancelled acquire reaches its caller, its request is
  withdrawn already (while the backend answers: the caller waits for that, a round
  trip);
* a grant that raced the cancellation is released: nobody holds it;
* a restate whose upgrade raced the cancellation keeps the hold (the lease stays
  held, and releasing it frees the semaphore);
* the session's next acquire of the same semaphore works as if nothing happened.

The races are made by cancelling at a range of moments after the release that
grants the waiter is sent: from the same turn of the event loop (the cancel wins)
to a few round trips later (the grant wins), the moments between racing.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

import tenure

from .support import owners, settle, spawn, wait_for_waiters, waiters, within

#: The moments, after the release that grants the waiter is sent, at which the waiter
#: is cancelled: loop turns (no time passes), then short sleeps (a round trip or so).
MOMENTS = [0, 1, 2, 5, 20, 50, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01]


async def _after(moment: float) -> None:
    if isinstance(moment, int):
        await settle(moment)
    else:
        await asyncio.sleep(moment)


async def _outcome(task: asyncio.Task[tenure.Lock]) -> tenure.Lock | None:
    """The waiter's lock, or None if its cancellation won."""
    try:
        return await within(task, "the cancelled acquire")
    except asyncio.CancelledError:
        return None


async def test_a_cancelled_waiter_is_gone_when_its_cancellation_returns(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    waiter = await client2.session(node)
    held = await holder.mutex("job").lock()
    task = spawn(waiter.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)

    task.cancel()
    assert await _outcome(task) is None
    assert await waiters(holder, "job") == []  # withdrawn before the caller went on
    await held.release()
    assert await waiter.mutex("job").try_lock() is not None  # its hold number is free


@pytest.mark.parametrize("moment", MOMENTS)
async def test_a_grant_that_races_a_cancellation_is_released(
    client: tenure.Client, client2: tenure.Client, node: str, moment: float
) -> None:
    holder = await client.session(node)
    waiter = await client2.session(node)
    held = await holder.mutex("job").lock()
    task = spawn(waiter.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)

    releasing = spawn(held.release())  # grants the waiter: the grant and the cancel race
    await _after(moment)
    task.cancel()
    won = await _outcome(task)
    await within(releasing)
    if won is not None:  # the grant came first: it is the caller's, and held
        assert won.held
        assert await owners(holder, "job") == [waiter.id]
        await won.release()
    assert await owners(holder, "job") == []  # nobody holds a grant nobody has
    assert await waiters(holder, "job") == []
    again = await holder.mutex("job").try_lock()
    assert again is not None
    await again.release()
    assert await waiter.mutex("job").try_lock() is not None  # the session goes on


@pytest.mark.parametrize("moment", MOMENTS[::2])
async def test_an_upgrade_that_races_a_cancellation_keeps_the_hold(
    client: tenure.Client, client2: tenure.Client, node: str, moment: float
) -> None:
    upgrading = await client.session(node)
    other = await client2.session(node)
    await upgrading.semaphore("pool").create(limit=2)
    lease = await upgrading.semaphore("pool").acquire(count=1)
    blocker = await other.semaphore("pool").acquire(count=1)
    task = spawn(lease.restate(count=2))
    await wait_for_waiters(other, "pool", 1)

    releasing = spawn(blocker.release())  # grants the upgrade: the grant and the cancel race
    await _after(moment)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await within(task, "the cancelled restate")
    await within(releasing)
    assert lease.held  # upgraded or not, the hold stays
    assert await owners(other, "pool") == [upgrading.id]
    assert await waiters(other, "pool") == []
    await lease.release()
    assert await owners(other, "pool") == []
    full = await other.semaphore("pool").try_acquire(count=2)
    assert full is not None  # nothing of the upgrade was left behind
    await full.release()
