"""A thread that asks again for what it holds is refused at once, as an asyncio task is.

Each sync call runs as a task of its own on the portal's loop, so the session keys
what a caller holds or is acquiring by the thread the call acts for: a thread that
relocked a mutex it holds used to wait behind itself (forever, without a timeout).
Another thread, a thread that ended, a withdrawn (Ctrl-C) call and a resumed lease
are no such caller.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable

import pytest

import tenure
import tenure.sync
from tenure.client._caller import ThreadCaller, start_for_thread, withdraw
from tenure.errors import PreconditionFailedError
from tenure.testing.conformance.support import wait_for_waiters as wait_for_waiters_async
from tenure.testing.conformance.support import within

from .conftest import NODE, interrupted_once_queued, wait_for_waiters

# The message of the async face's refusal, for a thread.
REFUSED = r"this thread already holds or is acquiring 'job' in this session; .*not reentrant"


def refused(call: Callable[[], object]) -> None:
    """``call`` raises the relock refusal (at once: a wait would be a timeout instead)."""
    with pytest.raises(PreconditionFailedError, match=REFUSED):
        call()


def test_a_thread_that_holds_a_mutex_is_refused_every_way_of_asking_again(
    shared_url: str,
) -> None:
    with tenure.sync.connect(shared_url) as client, tenure.sync.connect(shared_url) as client2:
        client.create_node(NODE, exist_ok=True)
        session, other = client.session(NODE), client2.session(NODE)
        with session.mutex("job") as held:
            refused(lambda: session.mutex("job").try_lock())
            refused(lambda: session.mutex("job").lock(timeout=30))
            refused(lambda: session.acquire("job", timeout=30, ephemeral=True))
            refused(lambda: session.semaphore("job").try_acquire(ephemeral=True))
            refused(lambda: session.rwlock("job").read(timeout=30))
            refused(lambda: session.rwlock("job").try_write())
            refused(lambda: session.election("job").campaign(timeout=30))
            refused(lambda: session.lock_all(["free", "job"], timeout=30))
            assert held.held
            # Refused whole: lock_all took none of its names.
            assert other.mutex("free").try_lock() is not None
            # Another thread of the session is no holder: its try is an ordinary "busy".
            got: list[tenure.sync.Lock | None] = []
            thread = threading.Thread(target=lambda: got.append(session.mutex("job").try_lock()))
            thread.start()
            thread.join(timeout=30)
            assert got == [None]
        again = session.mutex("job").lock(timeout=30)  # released: asking again is fine
        assert again.token > held.token
        again.release()


def test_a_thread_is_refused_what_it_holds_through_any_recipe(
    session: tenure.sync.Session,
) -> None:
    with session.election("job").campaign() as leadership:
        refused(lambda: session.election("job").campaign(timeout=30))
        refused(lambda: session.mutex("job").lock(timeout=30))
    with session.lock_all(["job", "b"]) as locks:
        refused(lambda: session.mutex("job").lock(timeout=30))
        refused(lambda: session.lock_all(["job"], timeout=30))
    with session.rwlock("job").read():
        refused(lambda: session.rwlock("job").write(timeout=30))
        refused(lambda: session.rwlock("job").read(timeout=30))  # a second share: as async
    assert not leadership.held
    assert not locks.held
    assert session.mutex("job").try_lock() is not None


def test_a_thread_holding_tokens_of_a_semaphore_asks_for_more_by_restating(
    session: tenure.sync.Session,
) -> None:
    """As an asyncio task: a second acquire of a semaphore it holds is refused (with
    room left: every acquire is a hold of its own); restate changes the hold."""
    session.semaphore("pool").create(limit=3)
    lease = session.semaphore("pool").acquire(1)
    with pytest.raises(PreconditionFailedError, match=r"'pool'.*not reentrant"):
        session.semaphore("pool").acquire(1, timeout=30)
    lease.restate(2)
    assert lease.count == 2
    lease.release()
    assert session.semaphore("pool").acquire(3).count == 3


def test_a_lock_released_by_another_thread_frees_its_holder_to_ask_again(
    session: tenure.sync.Session,
) -> None:
    lock = session.mutex("job").lock()
    thread = threading.Thread(target=lock.release)
    thread.start()
    thread.join(timeout=30)
    assert not lock.held
    again = session.mutex("job").lock(timeout=30)
    assert again.token > lock.token
    refused(lambda: session.mutex("job").lock(timeout=30))
    again.release()


def test_a_thread_that_ended_holding_a_lock_leaves_no_claim_to_the_next(
    session: tenure.sync.Session,
) -> None:
    """Python recycles an ended thread's ident (CPython on Linux: at once): the next
    thread is another caller, whose try is an ordinary "busy", not a refusal."""
    got: list[tenure.sync.Lock | BaseException | None] = []

    def run(call: Callable[[], tenure.sync.Lock | None]) -> None:
        try:
            got.append(call())
        except BaseException as error:
            got.append(error)

    for call in (session.mutex("job").lock, session.mutex("job").try_lock):
        thread = threading.Thread(target=run, args=(call,))
        thread.start()
        thread.join(timeout=30)
    held, tried = got
    assert isinstance(held, tenure.sync.Lock)
    assert held.held
    assert tried is None
    held.release()


def test_a_resumed_lease_is_no_threads_and_its_end_keeps_the_threads_claim(
    shared_url: str,
) -> None:
    with tenure.sync.connect(shared_url) as first, tenure.sync.connect(shared_url) as second:
        first.create_node(NODE, exist_ok=True)
        old = first.session(NODE, recovery_window=30.0)
        old.mutex("job").lock()
        new = second.session(NODE, resume=old.ticket().to_str())
        [resumed] = new.leases("job")
        # The resumed hold is nobody's: this thread's ask queues behind it, unrefused.
        assert new.mutex("job").try_lock() is None
        got: list[tenure.sync.Lock | BaseException] = []

        def lock_then_relock() -> None:
            got.append(new.mutex("job").lock(timeout=30))
            try:
                new.mutex("job").try_lock()
            except PreconditionFailedError as error:
                got.append(error)

        waiting = threading.Thread(target=lock_then_relock)
        waiting.start()
        wait_for_waiters(new, "job", 1)
        resumed.release()  # its end drops no claim of the waiting thread's
        waiting.join(timeout=30)
        lock, relock = got
        assert isinstance(lock, tenure.sync.Lock)
        assert lock.held
        assert lock.token > resumed.token
        assert isinstance(relock, PreconditionFailedError)  # the holding thread: refused
        assert new.mutex("job").try_lock() is None  # this thread holds nothing: busy
        new.close()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_a_thread_interrupted_while_it_waits_may_ask_again_at_once(shared_url: str) -> None:
    """The interrupted call's task winds down on the loop (its withdrawal takes a round
    trip) while the thread already asks again: that claim is no longer the thread's."""
    with tenure.sync.connect(shared_url) as client, tenure.sync.connect(shared_url) as client2:
        client.create_node(NODE, exist_ok=True)
        session, other = client.session(NODE), client2.session(NODE)
        holder = other.mutex("job").lock()
        thread = interrupted_once_queued(other, "job", lambda: session.mutex("job").lock())
        assert session.mutex("job").try_lock() is None  # busy, not refused
        thread.join(timeout=10)
        holder.release()
        lock = session.mutex("job").lock(timeout=30)
        assert lock.token > holder.token
        refused(lambda: session.mutex("job").try_lock())
        lock.release()


async def test_a_withdrawn_calls_claim_neither_refuses_nor_drops_the_next_calls() -> None:
    """The portal's sequence, step by step on one loop: a call for a thread waits, the
    thread withdraws it (its claim is still there until the task winds down), the
    thread's next call waits in its place, and the first one's end leaves that claim."""
    async with tenure.connect("memory://") as client:
        await client.create_node(NODE)
        session, other = await client.session(NODE), await client.session(NODE)
        holder = await other.mutex("job").lock()
        loop, thread = asyncio.get_running_loop(), ThreadCaller()
        first = start_for_thread(loop, session.mutex("job").lock(), thread)
        await wait_for_waiters_async(other, "job", 1)
        withdraw(first)  # as the portal does, before it cancels the task
        second = start_for_thread(loop, session.mutex("job").lock(), thread)
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await within(first)
        assert not second.done()
        await holder.release()
        lock = await within(second)
        assert lock.token > holder.token
        third = start_for_thread(loop, session.mutex("job").try_lock(), thread)
        with pytest.raises(PreconditionFailedError, match=REFUSED):
            await within(third)
        await lock.release()
