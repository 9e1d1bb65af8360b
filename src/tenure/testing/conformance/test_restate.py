"""The public primitive ``Session.acquire`` and restating a held lease (``Lease.restate``)."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    PreconditionFailedError,
)

from .support import describe, spawn, wait_for_waiters, within


class Ticket(tenure.Lease):
    """A recipe's own lease type: what ``kind=`` returns."""


async def test_the_primitive_returns_the_kind_asked_for(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    ticket = await session.acquire("gate", 3, data=b"t", ephemeral=True, kind=Ticket)
    assert isinstance(ticket, Ticket)
    assert (ticket.name, ticket.count, ticket.data) == ("gate", 3, b"t")
    async with session.acquire("other", ephemeral=True) as lease:
        assert type(lease) is tenure.Lease
        assert lease.held
    assert not lease.held


async def test_the_primitive_only_tries_with_timeout_zero(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.acquire("gate", tenure.MAX_COUNT, ephemeral=True)
    with pytest.raises(TimeoutError, match="busy"):
        await within(other.acquire("gate", ephemeral=True, timeout=0))


async def test_shrinking_and_new_data_keep_the_token(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=5)
    lease = await session.semaphore("pool").acquire(4, data=b"a")

    await lease.restate(2)
    assert (lease.count, lease.data) == (2, b"a")
    await lease.restate(data=b"b")
    assert (lease.count, lease.data) == (2, b"b")

    found = await describe(session, "pool")
    assert found is not None
    assert [(o.count, o.data, o.token) for o in found.owners] == [(2, b"b", lease.token)]
    assert found.count == 2


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS, tenure.Capability.FIFO)
async def test_an_upgrade_waits_its_turn_and_gets_a_new_token(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.semaphore("pool").create(limit=3)
    mine = await session.semaphore("pool").acquire(1)
    theirs = await other.semaphore("pool").acquire(2)
    first_token = mine.token

    upgrade = spawn(mine.restate(3))
    await wait_for_waiters(session, "pool", 1)
    assert mine.held  # the old hold stays while the upgrade waits
    assert mine.count == 1

    await theirs.release()
    await within(upgrade)
    assert mine.count == 3
    assert mine.token > theirs.token > first_token
    found = await describe(session, "pool")
    assert found is not None
    assert [(o.session_id, o.count, o.token) for o in found.owners] == [(session.id, 3, mine.token)]


async def test_an_upgrade_that_fails_or_is_cancelled_keeps_the_old_hold(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.semaphore("pool").create(limit=2)
    mine = await session.semaphore("pool").acquire(1, data=b"x")
    await other.semaphore("pool").acquire(1)

    with pytest.raises(TimeoutError):
        await within(mine.restate(2, timeout=0))
    upgrade = spawn(mine.restate(2, data=b"y"))
    await wait_for_waiters(session, "pool", 1)
    upgrade.cancel()
    with pytest.raises(asyncio.CancelledError):
        await upgrade
    await wait_for_waiters(session, "pool", 0)

    assert (mine.held, mine.count, mine.data) == (True, 1, b"x")
    found = await describe(session, "pool")
    assert found is not None
    mine_now = [(o.count, o.data) for o in found.owners if o.session_id == session.id]
    assert mine_now == [(1, b"x")]


async def test_restating_beyond_the_limit_or_after_release_is_refused(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    await session.semaphore("pool").create(limit=2)
    lease = await session.semaphore("pool").acquire(1)
    with pytest.raises(LimitExceededError):
        await lease.restate(3)
    with pytest.raises(InvalidArgumentError, match="count"):
        await lease.restate(-1)
    with pytest.raises(InvalidArgumentError, match="timeout"):
        await lease.restate(2, timeout=-1.0)
    with pytest.raises(InvalidArgumentError, match="data"):
        await lease.restate(data="text")  # type: ignore[arg-type]
    assert lease.held
    assert lease.count == 1
    await lease.release()
    with pytest.raises(PreconditionFailedError, match="released"):
        await lease.restate(1)


async def test_restating_a_lost_lease_raises_its_loss(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.semaphore("pool").create(limit=2)
    lease = await session.semaphore("pool").acquire(1)
    await other.semaphore("pool").delete(force=True)
    await within(lease.lost)
    with pytest.raises(LeaseLostError):
        await lease.restate(data=b"late")


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS, tenure.Capability.FIFO)
async def test_a_recipe_over_the_primitive_alone(client: tenure.Client, node: str) -> None:
    """A read-write lock from public names only: readers take 1 token, a writer all."""
    session = await client.session(node)
    readers = 3
    await session.semaphore("rw").create(limit=readers)

    a = await session.acquire("rw", 1)
    other = await client.session(node)
    b = await other.acquire("rw", 1)
    writer_session = await client.session(node)
    writer = spawn(writer_session.acquire("rw", readers, timeout=None))
    await wait_for_waiters(session, "rw", 1)
    late_reader = spawn((await client.session(node)).acquire("rw", 1))
    await wait_for_waiters(session, "rw", 2)  # FIFO: no reader overtakes the writer

    await a.release()
    await b.release()
    write = await within(writer)
    assert write.count == readers
    assert not late_reader.done()
    await write.release()
    assert (await within(late_reader)).token > write.token
