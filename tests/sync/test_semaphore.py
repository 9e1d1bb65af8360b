"""Sync semaphores: create, acquire forms, describe, update, delete, watch, and lease upkeep."""

from __future__ import annotations

import threading
import time

import pytest

import tenure.sync
from tenure.errors import (
    AlreadyExistsError,
    LeaseLostError,
    LimitExceededError,
    NotFoundError,
    PreconditionFailedError,
    SessionExpiredError,
)
from tenure.sync.testing import disconnect
from tenure.testing import FakeClock

from .conftest import NODE, advance


def test_create_describe_update_delete(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    pool = session.semaphore("pool")
    pool.create(limit=3, data=b"cfg")
    with pytest.raises(AlreadyExistsError):
        other.semaphore("pool").create(limit=1)
    described = other.semaphore("pool").describe()
    assert (described.limit, described.count, described.data) == (3, 0, b"cfg")
    pool.update(b"cfg2")
    assert other.semaphore("pool").describe().data == b"cfg2"
    pool.delete()
    with pytest.raises(NotFoundError):
        pool.describe()


def test_acquire_in_with_and_plain_and_try(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    session.semaphore("pool").create(limit=3)
    mine = session.semaphore("pool")
    theirs = other.semaphore("pool")
    with mine.acquire(count=2, data=b"me", timeout=5.0) as lease:
        assert isinstance(lease, tenure.sync.Lease)
        assert (lease.count, lease.data, lease.name) == (2, b"me", "pool")
        assert theirs.try_acquire(2) is None
        small = theirs.try_acquire(1, data=b"them")
        assert small is not None
        assert small.token > lease.token
        owners = mine.describe(owners=True).owners
        assert {(o.session_id, o.count, o.data) for o in owners} == {
            (session.id, 2, b"me"),
            (other.id, 1, b"them"),
        }
        small.release()
    assert not lease.held
    assert lease.lost.is_set()  # ended cleanly: no reason
    assert lease.lost_reason is None
    lease = theirs.acquire(3)
    assert mine.describe().count == 3
    lease.release()
    assert mine.describe().count == 0


def test_acquire_errors(session: tenure.sync.Session) -> None:
    with pytest.raises(NotFoundError):
        session.semaphore("missing").acquire()
    session.semaphore("pool").create(limit=2)
    with pytest.raises(LimitExceededError):
        session.semaphore("pool").acquire(3)


def test_ephemeral_semaphore_vanishes_with_its_last_owner(session: tenure.sync.Session) -> None:
    temp = session.semaphore("temp")
    with temp.acquire(ephemeral=True) as lease:
        assert lease.held
        assert temp.describe().ephemeral
    with pytest.raises(NotFoundError):
        temp.describe()


def test_waiters_are_described_and_served_in_order(
    client: tenure.sync.Client, session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    session.semaphore("pool").create(limit=1)
    first = session.semaphore("pool").acquire()
    got: list[tenure.sync.Lease] = []
    thread = threading.Thread(
        target=lambda: got.append(other.semaphore("pool").acquire(data=b"next"))
    )
    thread.start()
    with session.semaphore("pool").watch(waiters=True) as stream:
        waiting = next(d for d in stream if d.waiters)
    assert [(w.session_id, w.data) for w in waiting.waiters] == [(other.id, b"next")]
    first.release()
    thread.join(timeout=10)
    [lease] = got
    assert lease.held
    assert lease.token > first.token


def test_watch_is_a_blocking_iterator(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    session.semaphore("pool").create(limit=2, data=b"a")
    with session.semaphore("pool").watch(data=True, owners=True) as stream:
        assert next(stream).data == b"a"
        other.semaphore("pool").update(b"b")
        assert next(stream).data == b"b"
        lease = other.semaphore("pool").acquire(data=b"o")
        assert [o.data for o in next(stream).owners] == [b"o"]
        lease.release()
        assert next(stream).owners == ()
    with pytest.raises(StopIteration):
        next(stream)  # closed


def test_watch_ends_with_the_sessions_loss(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    stream = session.semaphore("pool").watch(owners=True)
    assert not next(stream).exists
    disconnect(session)
    advance(client, clock, 16)
    with pytest.raises(SessionExpiredError):
        next(stream)
    with pytest.raises(StopIteration):
        next(stream)
    stream.close()


def test_forced_delete_loses_the_lease(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    session.semaphore("pool").create(limit=5)
    lease = session.semaphore("pool").acquire(2)
    other.semaphore("pool").delete(force=True)
    assert lease.lost.is_set()
    assert isinstance(lease.lost_reason, LeaseLostError)
    with pytest.raises(LeaseLostError), lease:
        pass


def test_with_exit_raises_a_loss_that_happened_in_the_body(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    session.semaphore("pool").create(limit=5)

    def body() -> None:
        with session.semaphore("pool").acquire() as lease:
            other.semaphore("pool").delete(force=True)
            assert lease.lost.is_set()

    with pytest.raises(LeaseLostError):
        body()
    with pytest.raises(NotFoundError):
        session.semaphore("pool").describe()  # the delete did happen


def test_leases_stay_renewed_while_the_calling_thread_blocks() -> None:
    with tenure.sync.connect("memory://") as client:  # real time: the TTL must be renewed
        client.create_node(NODE, default_lease=0.1)
        session = client.session(NODE)
        lease = session.semaphore("pool").acquire(ephemeral=True)
        time.sleep(0.4)  # four TTLs of blocking, with no tenure call from this thread
        assert lease.held
        assert not lease.lost.is_set()
        assert session.semaphore("pool").describe(owners=True).owners[0].token == lease.token

        async def block_the_loop() -> None:
            time.sleep(0.4)  # noqa: ASYNC251 - on purpose: what a slow on_lost callback does

        client.portal.call(block_the_loop)  # control: the TTL is real
        assert lease.lost.wait(5)
        assert isinstance(lease.lost_reason, LeaseLostError)


def test_the_primitive_and_restating(session: tenure.sync.Session) -> None:
    class Ticket(tenure.sync.Lease):
        """A recipe's own lease kind."""

    session.semaphore("pool").create(limit=3)
    with session.acquire("pool", 1, data=b"a", kind=Ticket) as ticket:
        assert isinstance(ticket, Ticket)
        first = ticket.token
        ticket.restate(data=b"b")
        assert (ticket.token, ticket.count, ticket.data) == (first, 1, b"b")
        ticket.restate(3)  # free now: granted at once, as a new grant
        assert ticket.count == 3
        assert ticket.token > first
        owners = session.semaphore("pool").describe(owners=True).owners
        assert [(o.count, o.data, o.token) for o in owners] == [(3, b"b", ticket.token)]
    lock = session.acquire("job", tenure.MAX_COUNT, ephemeral=True, kind=tenure.sync.Lock)
    assert isinstance(lock, tenure.sync.Lock)
    with pytest.raises(PreconditionFailedError, match="this thread already holds"):
        session.acquire("job", ephemeral=True, timeout=30)  # would wait behind itself
    got: list[BaseException] = []

    def try_it() -> None:  # another thread of this session: an ordinary "busy"
        try:
            session.acquire("job", ephemeral=True, timeout=0)
        except TimeoutError as error:
            got.append(error)

    thread = threading.Thread(target=try_it)
    thread.start()
    thread.join(timeout=10.0)
    assert len(got) == 1
    assert "busy" in str(got[0])
    lock.release()
