"""First come, first served: waiters are granted in arrival order, with no barging."""

from __future__ import annotations

import asyncio
import itertools

import pytest

import tenure

from .support import spawn, wait_for_waiters, waiters, within

WAITERS = 32

pytestmark = pytest.mark.requires(tenure.Capability.FIFO, tenure.Capability.FENCING_TOKENS)


async def test_32_waiters_on_a_mutex_are_served_in_arrival_order(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    # One session per waiter, alternating between the two clients.
    sessions = [await (client, client2)[i % 2].session(node) for i in range(WAITERS)]
    first = await holder.mutex("job").lock()
    grants: list[tuple[int, int]] = []  # (arrival index, token) in grant order
    inside = 0

    async def wait_and_work(i: int) -> None:
        nonlocal inside
        async with sessions[i].mutex("job") as lock:
            inside += 1
            assert inside == 1, "two sessions held the mutex at once"
            grants.append((i, lock.token))
            await asyncio.sleep(0)  # let everyone else try to barge in
            inside -= 1

    tasks = []
    for i in range(WAITERS):
        tasks.append(spawn(wait_and_work(i)))
        await wait_for_waiters(holder, "job", i + 1)  # i is queued before i + 1 arrives
    assert await waiters(holder, "job") == [s.id for s in sessions]
    assert grants == []

    await first.release()
    await within(asyncio.gather(*tasks), "all 32 grants")

    order = [i for i, _ in grants]
    assert order == list(range(WAITERS))  # grant order is arrival order, exactly
    overtakes = sum(1 for a, b in itertools.pairwise(order) if b < a)
    assert overtakes == 0
    tokens = [first.token] + [token for _, token in grants]
    assert all(a < b for a, b in itertools.pairwise(tokens))
    assert await waiters(holder, "job") == []


async def test_a_large_request_at_the_head_blocks_smaller_ones_behind_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a, big, small1, small2, late = [
        await cl.session(node) for cl in (client, client2, client, client2, client)
    ]
    await a.semaphore("pool").create(limit=10)
    held = await a.semaphore("pool").acquire(count=6)

    wants_8 = spawn(big.semaphore("pool").acquire(count=8))  # 6 + 8 > 10: waits
    await wait_for_waiters(a, "pool", 1)
    wants_3 = spawn(small1.semaphore("pool").acquire(count=3))  # 6 + 3 fits, but queues
    await wait_for_waiters(a, "pool", 2)
    wants_1 = spawn(small2.semaphore("pool").acquire(count=1))
    await wait_for_waiters(a, "pool", 3)

    assert await waiters(a, "pool") == [big.id, small1.id, small2.id]
    assert (await a.semaphore("pool").describe()).count == 6  # nobody barged
    assert await late.semaphore("pool").try_acquire(count=1) is None  # nor may a try

    await held.release()  # the head fits now: 8; then 8 + 3 > 10 blocks both smalls

    lease_8 = await within(wants_8)
    assert lease_8.count == 8
    assert await waiters(a, "pool") == [small1.id, small2.id]
    assert (await a.semaphore("pool").describe()).count == 8
    assert not wants_3.done()
    assert not wants_1.done()

    await lease_8.release()  # both smalls fit, granted in order

    lease_3 = await within(wants_3)
    lease_1 = await within(wants_1)
    assert held.token < lease_8.token < lease_3.token < lease_1.token
    description = await a.semaphore("pool").describe(owners=True)
    assert [(o.session_id, o.count) for o in description.owners] == [(small1.id, 3), (small2.id, 1)]


async def test_grants_follow_the_queue_past_a_cancelled_waiter(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """A waiter that leaves the queue (cancelled) lets the next in, in order."""
    holder = await client.session(node)
    sessions = [await (client, client2)[i % 2].session(node) for i in range(4)]
    first = await holder.mutex("job").lock()
    tasks = []
    for i, session in enumerate(sessions):
        tasks.append(spawn(session.mutex("job").lock()))
        await wait_for_waiters(holder, "job", i + 1)

    tasks[1].cancel()
    await asyncio.gather(tasks[1], return_exceptions=True)
    assert await waiters(holder, "job") == [sessions[0].id, sessions[2].id, sessions[3].id]

    tokens = []
    previous = first
    for i in (0, 2, 3):
        await previous.release()
        previous = await within(tasks[i])
        tokens.append(previous.token)
    assert tokens == sorted(tokens)
    await previous.release()
