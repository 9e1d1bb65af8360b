"""Sessions: opening and closing, recovery windows, expiry and re-attach."""

from __future__ import annotations

import pytest

import tenure
from tenure.errors import SessionClosedError, SessionExpiredError
from tenure.testing import FakeClock

from .harness import Expire, Network
from .support import owners, spawn, wait_for_waiters, waiters, within


async def test_async_with_opens_and_closes_a_session(client: tenure.Client, node: str) -> None:
    async with client.session(node, recovery_window=15.0, description="w1") as session:
        assert isinstance(session.id, int)
        assert (session.node, session.recovery_window, session.description) == (node, 15.0, "w1")
        assert not session.closed
        assert session.lost_reason is None

    assert session.closed
    assert session.lost_reason is None  # closed on purpose: no loss
    assert await session.lost is None
    assert (await client.describe_node(node)).sessions == 0


async def test_a_session_reports_the_recovery_window_in_force(
    client: tenure.Client, node: str
) -> None:
    await client.alter_node(node, recovery_window=7.0)
    async with client.session(node) as session:  # the node's default
        assert session.recovery_window == 7.0
    async with client.session(node, recovery_window=2.5) as session:
        # Never less than asked; a backend that rounds (etcd://: whole seconds, 2 at
        # least) says what it keeps, within a second of what was asked.
        window = session.recovery_window
        assert window is not None
        assert 2.5 <= window < 3.5


async def test_awaitable_session_and_idempotent_close(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    assert (await client.describe_node(node)).sessions == 1

    await session.close()
    await session.close()

    assert session.closed
    assert (await client.describe_node(node)).sessions == 0


async def test_sessions_of_every_client_have_distinct_ids(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    sessions = [await c.session(node) for c in (client, client2, client, client2)]

    assert len({s.id for s in sessions}) == 4
    assert (await client.describe_node(node)).sessions == 4


async def test_a_closed_session_refuses_work_but_keeps_its_id(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    session_id = session.id
    await session.close()

    assert session.id == session_id
    assert str(session_id) in repr(session)
    with pytest.raises(SessionClosedError):
        await session.mutex("job").lock()
    with pytest.raises(SessionClosedError):
        await session.semaphore("pool").create(limit=1)
    with pytest.raises(SessionClosedError):
        await session.election("primary").leader()


async def test_closing_a_session_releases_all_it_holds(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.semaphore("pool").create(limit=1)
    lock = await session.mutex("job").lock()
    lease = await session.semaphore("pool").acquire()

    await session.close()

    assert isinstance(lock.lost_reason, SessionClosedError)
    assert isinstance(lease.lost_reason, SessionClosedError)
    assert await other.mutex("job").try_lock() is not None
    assert await other.semaphore("pool").try_acquire() is not None


async def test_closing_a_session_cancels_its_waits(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    holder = await client.session(node)
    waiter = await client2.session(node)
    await holder.mutex("job").lock()
    waiting = spawn(waiter.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)

    await waiter.close()

    with pytest.raises(SessionClosedError):
        await within(waiting)
    assert await waiters(holder, "job") == []


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_expiry_releases_holds_and_tells_the_holder(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    session = await client.session(node, recovery_window=15.0)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    await expire(session)

    assert isinstance(session.lost_reason, SessionExpiredError)
    assert await session.lost is session.lost_reason
    assert isinstance(lock.lost_reason, SessionExpiredError)
    granted = await within(waiting)
    assert granted.token > lock.token
    assert await owners(other, "job") == [other.id]
    assert (await client.describe_node(node)).sessions == 1


async def test_expiry_cancels_the_sessions_own_waits(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    holder = await client.session(node)
    session = await client2.session(node, recovery_window=5.0)
    await holder.mutex("job").lock()
    waiting = spawn(session.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)

    await expire(session)

    with pytest.raises(SessionExpiredError):
        await within(waiting)
    assert await waiters(holder, "job") == []


@pytest.mark.requires(tenure.Capability.SESSION_RECOVERY)
async def test_reattach_within_the_window_keeps_everything(
    client: tenure.Client,
    client2: tenure.Client,
    node: str,
    clock: FakeClock,
    network: Network,
) -> None:
    session = await client.session(node, recovery_window=15.0)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()

    await network.disconnect(session)
    await clock.advance(10.0)  # within the window
    await network.reconnect(session)
    await clock.advance(30.0)  # attached again: the window no longer runs

    assert lock.held
    assert lock.lost_reason is None
    assert not session.closed
    assert await owners(other, "job") == [session.id]
    assert await other.mutex("job").try_lock() is None


@pytest.mark.requires(tenure.Capability.SESSION_RECOVERY)
async def test_the_window_restarts_at_each_disconnect(
    client: tenure.Client, node: str, clock: FakeClock, network: Network
) -> None:
    session = await client.session(node, recovery_window=15.0)
    for _ in range(3):
        await network.disconnect(session)
        await clock.advance(14.0)
        await network.reconnect(session)

    assert session.lost_reason is None
    await network.disconnect(session)
    await clock.advance(15.5)
    assert isinstance(session.lost_reason, SessionExpiredError)


@pytest.mark.requires(tenure.Capability.SESSION_RECOVERY)
async def test_the_node_decides_the_default_recovery_window(
    client: tenure.Client, node: str, clock: FakeClock, network: Network
) -> None:
    await client.alter_node(node, recovery_window=5.0)
    session = await client.session(node)  # no recovery_window: the node's

    await network.disconnect(session)
    await clock.advance(4.5)
    assert session.lost_reason is None
    await clock.advance(1.0)
    assert isinstance(session.lost_reason, SessionExpiredError)


async def test_an_attached_session_never_expires(
    client: tenure.Client, node: str, clock: FakeClock
) -> None:
    session = await client.session(node, recovery_window=1.0)
    lock = await session.mutex("job").lock()

    await clock.advance(3600.0)

    assert lock.held
    assert session.lost_reason is None
