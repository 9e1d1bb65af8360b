"""After a re-attach, client and server agree, even when every push was lost meanwhile.

A push is sent once: one written to a connection that then dies never arrives. Each
test here detaches a session with ``lose_pushes`` (everything the backend tells it
until it re-attaches is lost, the worst case), lets the backend act (grant, time
out, delete, fire, expire), re-attaches, and checks that the client learned it all
from the session's state (docs/protocol.md, sections 8 and 11). tenure:// runs the
same cases through a TCP proxy that throws away what the server sends, with and
without a ``kill -9`` (tests/backends/test_remote_lost_pushes.py).
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import LeaseLostError, NotFoundError, SessionExpiredError
from tenure.testing import FakeClock

from .harness import Network
from .support import owners, settle, spawn, wait_for_waiters, waiters, within

pytestmark = pytest.mark.requires(tenure.Capability.SESSION_RECOVERY)


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_grant_lost_while_away_is_found_on_re_attach(
    client: tenure.Client, client2: tenure.Client, node: str, network: Network
) -> None:
    holder = await client2.session(node)
    waiter = await client.session(node, recovery_window=30.0)
    first = await holder.mutex("job").lock()
    locking = spawn(waiter.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)

    await network.disconnect(waiter, lose_pushes=True)
    await first.release()  # granted to the waiter; the push is lost
    await settle()
    assert not locking.done()
    assert await owners(holder, "job") == [waiter.id]
    await network.reconnect(waiter)

    lock = await within(locking)
    assert lock.held
    assert lock.token > first.token
    await lock.release()
    assert await owners(holder, "job") == []


async def test_a_timeout_lost_while_away_is_raised_on_re_attach(
    client: tenure.Client,
    client2: tenure.Client,
    node: str,
    network: Network,
    clock: FakeClock,
) -> None:
    holder = await client2.session(node)
    waiter = await client.session(node, recovery_window=30.0)
    await holder.mutex("job").lock()
    locking = spawn(waiter.mutex("job").lock(timeout=5.0))
    await wait_for_waiters(holder, "job", 1)

    await network.disconnect(waiter, lose_pushes=True)
    await clock.advance(6.0)
    assert await waiters(holder, "job") == []
    assert not locking.done()
    await network.reconnect(waiter)

    with pytest.raises(TimeoutError, match="timed out waiting for 'job'"):
        await within(locking)
    assert not waiter.closed


async def test_a_deletion_lost_while_away_ends_holders_and_waiters(
    client: tenure.Client, client2: tenure.Client, node: str, network: Network
) -> None:
    other = await client2.session(node)
    session = await client.session(node, recovery_window=30.0)
    queued = await client.session(node, recovery_window=30.0)
    pool = session.semaphore("pool")
    await pool.create(limit=1)
    lease = await pool.acquire()
    waiting = spawn(queued.semaphore("pool").acquire())
    await wait_for_waiters(other, "pool", 1)

    async def body() -> None:
        async with lease:
            await asyncio.sleep(3600)

    running = spawn(body())
    await settle()
    await network.disconnect(session, lose_pushes=True)
    await network.disconnect(queued, lose_pushes=True)
    await other.semaphore("pool").delete(force=True)
    await settle()
    assert lease.held  # nobody told it yet
    await network.reconnect(session)
    await network.reconnect(queued)

    with pytest.raises(LeaseLostError, match="deleted"):
        await within(running)
    assert isinstance(lease.lost_reason, LeaseLostError)
    with pytest.raises(NotFoundError, match="deleted"):
        await within(waiting)
    assert not session.closed
    assert not queued.closed


async def test_a_grant_lost_with_its_lease_while_away_fails_the_acquire(
    client: tenure.Client, client2: tenure.Client, node: str, network: Network
) -> None:
    other = await client2.session(node)
    waiter = await client.session(node, recovery_window=30.0)
    await other.semaphore("pool").create(limit=1)
    first = await other.semaphore("pool").acquire()
    acquiring = spawn(waiter.semaphore("pool").acquire())
    await wait_for_waiters(other, "pool", 1)

    await network.disconnect(waiter, lose_pushes=True)
    await first.release()  # granted to the waiter...
    await other.semaphore("pool").delete(force=True)  # ...and lost at once
    await network.reconnect(waiter)

    with pytest.raises(LeaseLostError, match="deleted"):
        await within(acquiring)
    assert not waiter.closed


@pytest.mark.requires(tenure.Capability.WATCH)
async def test_a_watch_firing_lost_while_away_shows_the_latest_state(
    client: tenure.Client, client2: tenure.Client, node: str, network: Network
) -> None:
    writer = await client2.session(node)
    watcher = await client.session(node, recovery_window=30.0)
    await writer.semaphore("cfg").create(limit=1, data=b"v1")
    stream = watcher.semaphore("cfg").watch(data=True)
    assert (await within(anext(stream))).data == b"v1"

    await network.disconnect(watcher, lose_pushes=True)
    await writer.semaphore("cfg").update(b"v2")
    await writer.semaphore("cfg").update(b"v3")
    await network.reconnect(watcher)

    assert (await within(anext(stream))).data == b"v3"
    await writer.semaphore("cfg").update(b"v4")
    assert (await within(anext(stream))).data == b"v4"
    await stream.aclose()


async def test_an_expiry_lost_while_away_is_found_on_re_attach(
    client: tenure.Client,
    client2: tenure.Client,
    node: str,
    network: Network,
    clock: FakeClock,
) -> None:
    other = await client2.session(node)
    session = await client.session(node, recovery_window=5.0)
    lock = await session.mutex("job").lock()

    await network.disconnect(session, lose_pushes=True)
    await clock.advance(6.0)  # expired; its SessionEnded is lost
    assert await owners(other, "job") == []
    await network.reconnect(session)

    assert isinstance(session.lost_reason, SessionExpiredError)
    assert isinstance(lock.lost_reason, SessionExpiredError)


async def test_a_grant_lost_before_its_caller_took_it_fails_the_acquire(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """A grant and the loss of its lease can arrive before the waiting task runs again:
    the caller must not get a lease the server has already taken back."""
    other = await client2.session(node)
    waiter = await client.session(node)
    await other.semaphore("pool").create(limit=1)
    first = await other.semaphore("pool").acquire()
    acquiring = spawn(waiter.semaphore("pool").acquire())
    await wait_for_waiters(other, "pool", 1)

    await first.release()
    await other.semaphore("pool").delete(force=True)
    try:
        lease = await within(acquiring)
    except LeaseLostError:
        pass  # told at once (memory://: both effects arrive before the task runs)
    except NotFoundError:
        # A backend where a waiter commits its own grant (etcd://) may see the delete
        # before the grant: the acquire then ends as a deleted waiter's does. Either
        # way the caller holds nothing the backend took back.
        pass
    else:  # told right after (a network delivered them in two reads)
        assert isinstance(await within(lease.lost), LeaseLostError)
