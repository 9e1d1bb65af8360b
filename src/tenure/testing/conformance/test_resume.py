"""Resuming a session by its ticket: a restarted process takes back all it held.

``ticket = session.ticket()`` in the process that crashes; ``client.session(node,
resume=ticket)`` in the one that restarts (here: another client on the same state).
The resumed session keeps its holds with their tokens, counts and data, its queued
requests are withdrawn, and the old owner, if it is still alive, is fenced off.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

import tenure
from tenure import SessionTicket
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LostError,
    SessionClosedError,
    SessionExpiredError,
)
from tenure.testing import FakeClock

from .harness import Expire, MakeClient, Network
from .support import eventually, owners, spawn, wait_for_waiters, waiters, within

pytestmark = pytest.mark.requires(tenure.Capability.SESSION_RECOVERY)


async def _fenced(session: tenure.Session) -> None:
    """Wait until the old owner has heard that its session was taken (a push away)."""

    async def lost() -> bool:
        return session.lost_reason is not None

    await eventually(lost, f"session {session.id}'s old owner hears it was resumed")


async def test_resume_keeps_every_hold_with_its_token_count_and_data(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node, recovery_window=30.0)
    await old.semaphore("pool").create(limit=5)
    lock = await old.mutex("job").lock(data=b"worker-1")
    lease = await old.semaphore("pool").acquire(2, data=b"two")
    ticket = old.ticket()

    new = await client2.session(node, resume=ticket)

    assert new.id == old.id
    assert new.recovery_window == old.recovery_window
    resumed = {(x.name, x.token, x.count, x.data) for x in new.leases()}
    assert resumed == {
        ("job", lock.token, lock.count, b"worker-1"),
        ("pool", lease.token, 2, b"two"),
    }
    assert all(x.held and x.session is new for x in new.leases())
    assert [x.name for x in new.leases("pool")] == ["pool"]
    assert await owners(new, "job") == [new.id]
    description = await new.semaphore("pool").describe(owners=True)
    assert description.count == 2
    assert [(o.token, o.data) for o in description.owners] == [(lease.token, b"two")]


async def test_the_old_owner_is_fenced_off(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node)
    lock = await old.mutex("job").lock()

    new = await client2.session(node, resume=old.ticket())
    await _fenced(old)

    assert isinstance(old.lost_reason, SessionExpiredError)
    assert isinstance(lock.lost_reason, SessionExpiredError)
    with pytest.raises(LostError):
        await old.mutex("other").lock(timeout=0)
    await lock.release()  # a no-op: the lock was lost, and it is the new owner's now
    [resumed] = new.leases()
    assert resumed.held
    assert resumed.token == lock.token
    assert await owners(new, "job") == [new.id]
    with pytest.raises(LostError):
        old.ticket()


async def test_the_resumed_lease_releases_and_the_next_waiter_gets_it(
    client: tenure.Client, client2: tenure.Client, make_client: MakeClient, node: str
) -> None:
    old = await client.session(node)
    lock = await old.mutex("job").lock()
    other = await (await make_client()).session(node)
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    new = await client2.session(node, resume=old.ticket().to_str())
    assert not waiting.done()  # still held, by the new owner
    [resumed] = new.leases("job")
    await resumed.release()

    granted = await within(waiting)
    assert granted.token > lock.token
    assert not resumed.held
    assert resumed.lost_reason is None
    assert new.leases() == []
    assert await owners(new, "job") == [other.id]


async def test_queued_requests_of_the_old_owner_are_withdrawn(
    client: tenure.Client, client2: tenure.Client, make_client: MakeClient, node: str
) -> None:
    holder = await (await make_client()).session(node)
    held = await holder.mutex("job").lock()
    old = await client.session(node)
    old_waiting = spawn(old.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)
    third = await (await make_client()).session(node)
    third_waiting = spawn(third.mutex("job").lock())
    await wait_for_waiters(holder, "job", 2)

    new = await client2.session(node, resume=old.ticket())

    assert await waiters(holder, "job") == [third.id]
    with pytest.raises(LostError):
        await within(old_waiting)
    assert new.leases() == []
    await held.release()  # the old owner's request was ahead: now the third is
    granted = await within(third_waiting)
    assert granted.token > held.token
    assert await owners(holder, "job") == [third.id]


async def test_an_upgrade_in_waiting_is_withdrawn_and_the_hold_kept(
    client: tenure.Client, client2: tenure.Client, make_client: MakeClient, node: str
) -> None:
    old = await client.session(node)
    await old.semaphore("pool").create(limit=3)
    lease = await old.semaphore("pool").acquire(1, data=b"one")
    other = await (await make_client()).session(node)
    blocker = await other.semaphore("pool").acquire(2)
    upgrading = spawn(lease.restate(3))
    await wait_for_waiters(other, "pool", 1)

    new = await client2.session(node, resume=old.ticket())

    assert await waiters(other, "pool") == []
    with pytest.raises(LostError):
        await within(upgrading)
    [resumed] = new.leases()
    assert (resumed.token, resumed.count, resumed.data) == (lease.token, 1, b"one")
    await blocker.release()
    await resumed.restate(3)
    assert resumed.count == 3
    assert resumed.token > lease.token


async def test_the_loss_of_a_resumed_lease_cancels_its_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node)
    await old.semaphore("pool").create(limit=1)
    await old.semaphore("pool").acquire()
    new = await client2.session(node, resume=old.ticket())
    [resumed] = new.leases()
    admin = await client2.session(node)
    entered = asyncio.Event()

    async def block() -> None:
        async with resumed:
            entered.set()
            await asyncio.Event().wait()  # until cancelled by the loss

    task = spawn(block())
    await within(entered.wait(), "the block to start")
    await admin.semaphore("pool").delete(force=True)

    with pytest.raises(LeaseLostError):
        await within(task)
    assert isinstance(resumed.lost_reason, LeaseLostError)
    assert new.lost_reason is None  # only the lease was lost


async def test_closing_the_resumed_session_releases_what_it_took_back(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node)
    await old.mutex("job").lock()
    new = await client2.session(node, resume=old.ticket())
    [resumed] = new.leases()

    await new.close()

    assert isinstance(resumed.lost_reason, SessionClosedError)
    other = await client2.session(node)
    assert await other.mutex("job").try_lock() is not None


async def test_a_ticket_round_trips_through_its_string(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    ticket = session.ticket()

    text = ticket.to_str()

    assert text.isascii()
    assert all(c.isalnum() or c in "-_." for c in text)
    assert SessionTicket.from_str(text) == ticket
    assert (ticket.node, ticket.session_id) == (node, session.id)
    assert ticket.secret.hex() not in repr(ticket)
    for garbage in (
        "",
        "t1.",
        "t1.a.b.c",
        "x" * 50,
        text + ".x",
        text.replace(".", "!"),
        "t1.!.1.a.b",
    ):
        with pytest.raises(InvalidArgumentError):
            SessionTicket.from_str(garbage)


async def test_a_wrong_secret_is_refused_and_the_session_goes_on(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node)
    lock = await old.mutex("job").lock()
    ticket = old.ticket()
    forged = dataclasses.replace(ticket, secret=bytes(b ^ 0xFF for b in ticket.secret))

    with pytest.raises(SessionExpiredError):
        await client2.session(node, resume=forged)

    assert lock.held
    assert old.lost_reason is None
    assert await owners(old, "job") == [old.id]
    assert await old.mutex("other").try_lock() is not None


async def test_a_ticket_of_another_node_or_backend_is_refused(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node)
    ticket = old.ticket()
    other_node = f"{node}-other"
    await client.create_node(other_node)
    try:
        with pytest.raises(InvalidArgumentError):
            client2.session(other_node, resume=ticket)  # at once: the ticket names `node`
        moved = dataclasses.replace(ticket, node=other_node)
        with pytest.raises(SessionExpiredError):
            await client2.session(other_node, resume=moved)  # no such session there
        alien = dataclasses.replace(ticket, scheme="alien")
        with pytest.raises(InvalidArgumentError):
            await client2.session(node, resume=alien)
        with pytest.raises(InvalidArgumentError):
            client2.session(node, resume=ticket, recovery_window=5.0)
        with pytest.raises(InvalidArgumentError):
            client2.session(node, resume=ticket, description="again")
        with pytest.raises(InvalidArgumentError):
            client2.session(node, resume=b"t1.not-a-ticket")  # type: ignore[arg-type]
        assert old.lost_reason is None
    finally:
        await client.drop_node(other_node, force=True)


async def test_a_closed_session_cannot_be_resumed(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    old = await client.session(node)
    await old.mutex("job").lock()
    ticket = old.ticket()
    await old.close()

    with pytest.raises(SessionExpiredError):
        await client2.session(node, resume=ticket)
    with pytest.raises(SessionClosedError):
        old.ticket()


async def test_an_expired_session_cannot_be_resumed(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    old = await client.session(node, recovery_window=5.0)
    await old.mutex("job").lock()
    ticket = old.ticket()

    await expire(old)

    with pytest.raises(SessionExpiredError):
        await client2.session(node, resume=ticket)


async def test_a_detached_session_is_resumed_and_its_old_connection_stays_fenced(
    client: tenure.Client,
    client2: tenure.Client,
    node: str,
    clock: FakeClock,
    network: Network,
) -> None:
    old = await client.session(node, recovery_window=15.0)
    lock = await old.mutex("job").lock()
    ticket = old.ticket()
    await network.disconnect(old, lose_pushes=True)  # the process died, as it were
    await clock.advance(10.0)

    new = await client2.session(node, resume=ticket)
    await clock.advance(30.0)  # attached to its new owner: the window no longer runs

    [resumed] = new.leases()
    assert resumed.held
    assert resumed.token == lock.token
    await network.reconnect(old)  # a stale attach: refused
    assert isinstance(old.lost_reason, SessionExpiredError)
    assert resumed.held
    assert await owners(new, "job") == [new.id]


async def test_a_session_resumed_twice_belongs_to_the_last(
    client: tenure.Client, client2: tenure.Client, make_client: MakeClient, node: str
) -> None:
    old = await client.session(node)
    lock = await old.mutex("job").lock()
    ticket = old.ticket()
    first = await client2.session(node, resume=ticket)
    second = await (await make_client()).session(node, resume=ticket)
    await _fenced(first)

    assert isinstance(first.lost_reason, SessionExpiredError)
    assert [x.token for x in second.leases()] == [lock.token]
    assert second.ticket() == ticket  # the same session, the same ticket


async def test_a_client_may_resume_its_own_session(client: tenure.Client, node: str) -> None:
    old = await client.session(node)
    lock = await old.mutex("job").lock()

    new = await client.session(node, resume=old.ticket())
    await _fenced(old)

    [resumed] = new.leases()
    assert resumed.token == lock.token
    assert resumed.held
    assert new.lost_reason is None
    assert await new.mutex("other").try_lock() is not None
    assert await owners(new, "job") == [new.id]


@pytest.mark.requires(tenure.Capability.LEASE_TTL)
async def test_a_resumed_lease_with_a_ttl_is_renewed_by_its_new_owner(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    await client.alter_node(node, default_lease=0.6)  # renewed every 0.2 s
    old = await client.session(node)
    lock = await old.mutex("job").lock()
    new = await client2.session(node, resume=old.ticket())
    await _fenced(old)  # the old owner renews no more

    await asyncio.sleep(1.5)  # real time: on a server, the TTL would run out twice

    [resumed] = new.leases()
    assert resumed.held
    assert resumed.token == lock.token
    assert await owners(new, "job") == [new.id]


@pytest.mark.requires(tenure.Capability.LEASE_TTL)
async def test_a_resumed_lease_is_renewed_at_once(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock, network: Network
) -> None:
    # Its last renewal was the dead process's, up to a whole TTL before the resume: a
    # first renewal a third of a TTL later could come after the hold's end.
    await client.alter_node(node, default_lease=3.0)
    old = await client.session(node, recovery_window=30.0)
    lock = await old.mutex("job").lock()
    ticket = old.ticket()
    await network.disconnect(old)  # its process is gone: it renews no more
    await clock.advance(2.5)  # most of the TTL since its last renewal
    new = await client2.session(node, resume=ticket)

    await clock.advance(2.0)  # past the old owner's deadline, not past one from the resume

    [resumed] = new.leases()
    assert resumed.held, resumed
    assert resumed.token == lock.token
    assert await owners(new, "job") == [new.id]


async def test_an_old_owner_that_missed_the_news_cannot_close_the_session(
    client: tenure.Client, client2: tenure.Client, node: str, network: Network
) -> None:
    old = await client.session(node, recovery_window=15.0)
    lock = await old.mutex("job").lock()
    await network.disconnect(old, lose_pushes=True)  # it will not hear of the resume
    new = await client2.session(node, resume=old.ticket())

    await old.close()  # late, from a process that did not die after all

    [resumed] = new.leases()
    assert resumed.held
    assert new.lost_reason is None
    assert await owners(new, "job") == [new.id]
    assert resumed.token == lock.token
