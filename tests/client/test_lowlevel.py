"""tenure.lowlevel: the public low level the recipes stand on, on ``memory://``.

Each name does what its docstring says: ``acquire`` makes a lease of the kind asked
for, its caller's (asking again is refused); ``lock_reentrant`` nests; ``start_release``
ends a lease at once and gives the backend's answer (None once ended);
``backend_session`` raises the session's end; ``caller`` is the asking task, or the
sync face's thread. ``acquire`` is the session's own method, so that the mutex's
block makes no call more than before (tests/bench's call budget).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

import tenure
import tenure.sync
from tenure import MAX_COUNT, lowlevel
from tenure.client._session_holds import SessionHolds
from tenure.errors import PreconditionFailedError, SessionClosedError


@pytest.fixture
async def session() -> AsyncIterator[tenure.Session]:
    async with tenure.connect("memory://") as client:
        await client.create_node("n")
        async with client.session("n") as session:
            yield session


class Job(tenure.Lease):
    """A recipe's own kind of lease."""


async def test_acquire_makes_a_lease_of_the_kind_asked_for(session: tenure.Session) -> None:
    lease = await lowlevel.acquire(session, Job, "jobs", 2, b"mine", None, True)
    assert type(lease) is Job
    assert (lease.name, lease.count, lease.data, lease.held) == ("jobs", 2, b"mine", True)
    described = await session.semaphore("jobs").describe(owners=True)
    assert [(o.session_id, o.token) for o in described.owners] == [(session.id, lease.token)]
    # It is its caller's: the same task asking again would wait behind itself.
    with pytest.raises(PreconditionFailedError):
        await lowlevel.acquire(session, Job, "jobs", 1, b"", 0, True)
    await lease.release()


async def test_acquire_is_the_sessions_method_with_no_call_between() -> None:
    assert lowlevel.acquire is SessionHolds._acquire
    assert lowlevel.lock_reentrant is SessionHolds._lock_reentrant


async def test_lock_reentrant_nests_in_its_caller(session: tenure.Session) -> None:
    outer = await lowlevel.lock_reentrant(session, "ledger", b"", None, 3)
    inner = await lowlevel.lock_reentrant(session, "ledger", b"", None, 3)
    assert inner.token == outer.token
    await inner.release()
    assert (await session.mutex("ledger").describe()).held
    await outer.release()
    assert not (await session.mutex("ledger").describe()).held


async def test_start_release_ends_the_lease_at_once(session: tenure.Session) -> None:
    lease = await lowlevel.acquire(session, tenure.Lock, "m", MAX_COUNT, b"", None, True)
    releasing = lowlevel.start_release(lease)
    assert not lease.held  # before any answer
    assert releasing is not None
    assert await releasing is True
    assert not (await session.mutex("m").describe()).held
    assert lowlevel.start_release(lease) is None  # ended: nothing to release


async def test_backend_session_raises_the_sessions_end(session: tenure.Session) -> None:
    backend = lowlevel.backend_session(session)
    assert backend.session_id == session.id
    await session.close()
    with pytest.raises(SessionClosedError):
        lowlevel.backend_session(session)


async def test_caller_is_the_asking_task() -> None:
    async def ask() -> object:
        return lowlevel.caller()

    assert lowlevel.caller() is asyncio.current_task()
    task = asyncio.ensure_future(ask())
    assert await task is task


def test_caller_in_the_sync_face_is_the_thread() -> None:
    callers: list[object] = []

    async def ask() -> None:
        callers.append(lowlevel.caller())

    with tenure.sync.connect("memory://") as client:
        client.portal.call(ask)
        client.portal.call(ask)
        other = threading.Thread(target=client.portal.call, args=(ask,))
        other.start()
        other.join()
    assert callers[0] is callers[1]  # two calls of one thread: one caller
    assert callers[2] is not callers[0]
    assert not isinstance(callers[0], asyncio.Task)
