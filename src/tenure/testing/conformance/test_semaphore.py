"""Counting semaphores: create, acquire in both forms, describe, update, delete, ephemeral."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import (
    AlreadyExistsError,
    LeaseLostError,
    NotFoundError,
    PreconditionFailedError,
)
from tenure.testing import FakeClock

from .support import exists, owners, spawn, wait_for_waiters, waiters, within


async def test_create_and_describe(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=10, data=b"cfg")

    other = await client2.session(node)
    description = await other.semaphore("pool").describe()

    assert description.name == "pool"
    assert (description.limit, description.count, description.data) == (10, 0, b"cfg")
    assert description.exists
    assert not description.ephemeral
    assert (description.owners, description.waiters) == ((), ())


async def test_create_exist_ok_accepts_the_same_limit_only(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    pool = session.semaphore("pool")
    await pool.create(limit=3, data=b"first")
    with pytest.raises(AlreadyExistsError):
        await pool.create(limit=3)

    await pool.create(limit=3, data=b"second", exist_ok=True)
    with pytest.raises(PreconditionFailedError, match="limit 3, not 4"):
        await pool.create(limit=4, exist_ok=True)

    assert (await pool.describe()).data == b"first"  # untouched


async def test_async_with_acquire_holds_tokens_for_the_block(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    sem = session.semaphore("pool")
    await sem.create(limit=10)

    async with sem.acquire(count=2, data=b"me", timeout=5.0) as lease:
        assert isinstance(lease, tenure.Lease)
        assert (lease.count, lease.data, lease.name) == (2, b"me", "pool")
        assert lease.held
        assert (await sem.describe()).count == 2

    assert not lease.held
    assert lease.lost_reason is None
    description = await sem.describe()
    assert description.count == 0
    assert description.exists  # a created semaphore stays when idle


async def test_awaitable_acquire_and_release(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    sem = session.semaphore("pool")
    await sem.create(limit=3)

    lease = await sem.acquire(count=3)
    assert (await sem.describe()).count == 3
    await lease.release()
    await lease.release()

    assert (await sem.describe()).count == 0
    assert await lease.lost is None


async def test_try_acquire_returns_none_when_full(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client, client2)]
    await sessions[0].semaphore("pool").create(limit=3)
    leases = []
    for session in sessions[:3]:
        lease = await session.semaphore("pool").try_acquire()
        assert lease is not None
        leases.append(lease)

    assert await sessions[3].semaphore("pool").try_acquire() is None
    assert await waiters(sessions[0], "pool") == []

    await leases[1].release()
    assert await sessions[3].semaphore("pool").try_acquire(data=b"late") is not None
    assert (await sessions[0].semaphore("pool").describe()).count == 3


async def test_acquire_with_timeout_zero_only_tries(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    other = await client.session(node)
    await session.semaphore("pool").create(limit=2)
    await session.semaphore("pool").acquire(count=2, timeout=0)

    with pytest.raises(TimeoutError):
        await other.semaphore("pool").acquire(timeout=0)


@pytest.mark.requires(tenure.Capability.FIFO)
async def test_describe_lists_owners_in_grant_order_and_waiters_in_service_order(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a, b, c, d = [await cl.session(node) for cl in (client, client2, client, client2)]
    await a.semaphore("pool").create(limit=4)
    lease_a = await a.semaphore("pool").acquire(count=1, data=b"a")
    lease_b = await b.semaphore("pool").acquire(count=2, data=b"b")
    waiting_c = spawn(c.semaphore("pool").acquire(count=3, data=b"c"))
    await wait_for_waiters(a, "pool", 1)
    waiting_d = spawn(d.semaphore("pool").acquire(count=1, data=b"d"))
    await wait_for_waiters(a, "pool", 2)

    description = await a.semaphore("pool").describe(owners=True, waiters=True)

    assert description.count == 3
    # (Who each one is, and since when, is test_listing.py's.)
    assert [(o.session_id, o.count, o.data, o.token) for o in description.owners] == [
        (a.id, 1, b"a", lease_a.token),
        (b.id, 2, b"b", lease_b.token),
    ]
    assert [(w.session_id, w.count, w.data) for w in description.waiters] == [
        (c.id, 3, b"c"),
        (d.id, 1, b"d"),
    ]
    bare = await a.semaphore("pool").describe()
    assert (bare.owners, bare.waiters) == ((), ())
    for task in (waiting_c, waiting_d):
        task.cancel()
    await asyncio.gather(waiting_c, waiting_d, return_exceptions=True)


async def test_update_replaces_the_data(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=1, data=b"old")

    await session.semaphore("pool").update(b"new data")

    other = await client2.session(node)
    assert (await other.semaphore("pool").describe()).data == b"new data"


async def test_delete_an_idle_semaphore(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=1)

    await session.semaphore("pool").delete()

    assert not await exists(session, "pool")
    await session.semaphore("pool").create(limit=2)  # the name is free again
    assert (await session.semaphore("pool").describe()).limit == 2


async def test_delete_with_force_takes_the_leases_and_cancels_the_body(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    waiter = await client2.session(node)
    await holder.semaphore("pool").create(limit=1)
    entered = asyncio.Event()
    reached_the_end = False
    leases: list[tenure.Lease] = []

    async def hold() -> None:
        nonlocal reached_the_end
        async with holder.semaphore("pool").acquire() as lease:
            leases.append(lease)
            entered.set()
            await asyncio.Event().wait()
            reached_the_end = True

    holding = spawn(hold())
    await within(entered.wait())
    waiting = spawn(waiter.semaphore("pool").acquire())
    await wait_for_waiters(holder, "pool", 1)

    await waiter.semaphore("pool").delete(force=True)

    with pytest.raises(LeaseLostError):
        await within(holding)
    assert not reached_the_end
    assert isinstance(leases[0].lost_reason, LeaseLostError)
    assert await leases[0].lost is leases[0].lost_reason
    with pytest.raises(NotFoundError):
        await within(waiting)  # the waiter's semaphore is gone
    assert not await exists(holder, "pool")


async def test_ephemeral_semaphore_appears_with_its_first_owner_and_vanishes_with_its_last(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    assert not await exists(a, "endpoints")

    lease_a = await a.semaphore("endpoints").acquire(count=1, ephemeral=True, data=b"host-a")
    lease_b = await b.semaphore("endpoints").acquire(count=1, ephemeral=True, data=b"host-b")

    description = await a.semaphore("endpoints").describe(owners=True)
    assert description.ephemeral
    assert description.limit == tenure.MAX_COUNT
    assert [(o.session_id, o.data) for o in description.owners] == [
        (a.id, b"host-a"),
        (b.id, b"host-b"),
    ]
    await lease_a.release()
    assert await owners(b, "endpoints") == [b.id]
    await b.close()  # the last owner leaves with its session
    assert not await exists(a, "endpoints")
    assert isinstance(lease_b.lost_reason, tenure.errors.SessionClosedError)


async def test_ephemeral_acquire_of_a_created_semaphore_obeys_its_limit(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client.session(node)
    await session.semaphore("pool").create(limit=1)

    lease = await session.semaphore("pool").acquire(ephemeral=True)
    assert await other.semaphore("pool").try_acquire(ephemeral=True) is None
    await lease.release()

    assert await exists(session, "pool")  # created, so not ephemeral: it stays
    assert not (await session.semaphore("pool").describe()).ephemeral


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_waiter_is_granted_when_tokens_are_released(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    await a.semaphore("pool").create(limit=5)
    first = await a.semaphore("pool").acquire(count=4)
    waiting = spawn(b.semaphore("pool").acquire(count=3))
    await wait_for_waiters(a, "pool", 1)

    await first.release()

    lease = await within(waiting)
    assert (lease.count, lease.token > first.token) == (3, True)
    assert await owners(a, "pool") == [b.id]


async def test_acquire_timeout_is_decided_by_the_backend_clock(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    a = await client.session(node)
    b = await client2.session(node)
    await a.semaphore("pool").create(limit=2)
    await a.semaphore("pool").acquire(count=2)

    waiting = spawn(b.semaphore("pool").acquire(count=1, timeout=30.0))
    await wait_for_waiters(a, "pool", 1)
    await clock.advance(29.0)
    assert await waiters(a, "pool") == [b.id]
    await clock.advance(1.5)

    with pytest.raises(TimeoutError):
        await within(waiting)
    assert await waiters(a, "pool") == []
    assert (await a.semaphore("pool").describe()).count == 2


async def test_any_bytes_like_data_is_stored_as_bytes(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    sem = session.semaphore("pool")
    await sem.create(limit=2, data=bytearray(b"cfg"))
    lease = await sem.acquire(data=memoryview(b"me"))
    await sem.update(bytearray(b"v2"))
    description = await sem.describe(owners=True)
    assert description.data == b"v2"
    assert type(description.data) is bytes
    assert description.owners[0].data == b"me"
    assert type(lease.data) is bytes
