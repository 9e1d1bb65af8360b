"""Sync reentrant mutexes: they nest per thread (each blocking call is a task of its own
on the portal's loop, acting for its thread), and another thread queues."""

from __future__ import annotations

import threading

import pytest

import tenure
import tenure.sync
from tenure.errors import LeaseLostError, LimitExceededError, PreconditionFailedError

from .conftest import NODE, wait_for_waiters


def test_a_thread_nests_one_hold_with_one_token(shared_url: str) -> None:
    with tenure.sync.connect(shared_url) as client, tenure.sync.connect(shared_url) as client2:
        client.create_node(NODE, exist_ok=True)
        session, other = client.session(NODE), client2.session(NODE)
        mutex = session.mutex("job", reentrant=True)
        assert (mutex.reentrant, mutex.max_depth) == (True, tenure.MAX_REENTRANT_DEPTH)
        with mutex as outer, session.mutex("job", reentrant=True) as inner:
            assert isinstance(inner, tenure.sync.Lock)
            assert inner.token == outer.token
            nested = session.mutex("job", reentrant=True).try_lock()
            assert nested is not None
            assert nested.token == outer.token
            nested.release()
            [owner] = other.semaphore("job").describe(owners=True).owners
            assert (owner.session_id, owner.token) == (session.id, outer.token)
        assert not outer.held
        assert not inner.held
        outer.release()  # until the block's release is applied
        taken = other.mutex("job").try_lock()
        assert taken is not None
        assert taken.token > outer.token


def test_inner_exits_keep_the_lock_until_the_outermost(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    with session.mutex("job", reentrant=True) as outer:
        with session.mutex("job", reentrant=True) as inner:
            assert inner.token == outer.token
        assert not inner.held
        assert outer.held
        assert other.mutex("job").try_lock() is None
    taken = other.mutex("job").try_lock()
    assert taken is not None
    assert taken.token > outer.token


def test_each_lock_counts_down_once(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    first = session.mutex("job", reentrant=True).lock()
    second = session.mutex("job", reentrant=True).lock(timeout=0)
    assert second.token == first.token
    second.release()
    second.release()  # idempotent: not a second count down
    assert first.held
    assert other.mutex("job").try_lock() is None
    first.release()
    assert other.mutex("job").try_lock() is not None


def test_another_thread_of_the_session_queues(session: tenure.sync.Session) -> None:
    mutex = session.mutex("job", reentrant=True)  # one object, shared by both threads
    got: list[tenure.sync.Lock | None] = []
    with mutex as held:
        tried = threading.Thread(target=lambda: got.append(mutex.try_lock()))
        tried.start()
        tried.join(timeout=30)
        assert got == [None]
        waiting = threading.Thread(target=lambda: got.append(mutex.lock(timeout=30)))
        waiting.start()
        wait_for_waiters(session, "job", 1)
        with mutex as nested:  # this thread still nests, at once
            assert nested.token == held.token
        assert waiting.is_alive()
    waiting.join(timeout=30)
    lock = got[-1]
    assert lock is not None
    assert lock.token > held.token
    lock.release()


def test_plain_and_reentrant_holds_of_a_thread_refuse_each_other(
    session: tenure.sync.Session,
) -> None:
    with session.mutex("job"):
        with pytest.raises(PreconditionFailedError, match="not reentrant"):
            session.mutex("job", reentrant=True).try_lock()
        with pytest.raises(PreconditionFailedError, match="this thread"):
            session.mutex("job", reentrant=True).lock(timeout=30)
    with session.mutex("job", reentrant=True) as held:
        with pytest.raises(PreconditionFailedError, match="reentrant mutex"):
            session.mutex("job").lock(timeout=30)  # would have waited behind itself
        with pytest.raises(PreconditionFailedError, match="reentrant mutex"):
            session.semaphore("job").acquire(1, timeout=30)
        # Another thread is no holder: its plain try is an ordinary "busy".
        got: list[tenure.sync.Lock | None] = []
        thread = threading.Thread(target=lambda: got.append(session.mutex("job").try_lock()))
        thread.start()
        thread.join(timeout=30)
        assert got == [None]
        assert held.held


def test_a_loss_ends_every_nested_lock_and_the_next_starts_afresh(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    locks: list[tenure.sync.Lock] = []

    def body() -> None:
        with session.mutex("job", reentrant=True) as outer:
            locks.append(outer)
            with session.mutex("job", reentrant=True) as inner:
                locks.append(inner)
                other.semaphore("job").delete(force=True)

    with pytest.raises(LeaseLostError):
        body()
    assert all(isinstance(lock.lost_reason, LeaseLostError) for lock in locks)
    again = session.mutex("job", reentrant=True).lock()
    assert again.token > locks[0].token
    assert other.mutex("job").try_lock() is None
    again.release()


def test_nesting_deeper_than_max_depth_is_refused(session: tenure.sync.Session) -> None:
    mutex = session.mutex("job", reentrant=True, max_depth=2)
    with mutex, mutex, pytest.raises(LimitExceededError, match="max_depth"):
        mutex.lock()
    assert session.mutex("job").try_lock() is not None  # both left: released


def test_a_thread_that_ended_holding_it_leaves_no_share_to_the_next(
    session: tenure.sync.Session,
) -> None:
    """Python recycles an ended thread's ident (CPython on Linux: at once), so the
    caller is an object per thread, not its ident."""
    idents: list[int] = []
    got: list[tenure.sync.Lock | None] = []

    def hold_and_end() -> None:  # takes the lock and ends without releasing it
        idents.append(threading.get_ident())
        got.append(session.mutex("job", reentrant=True).lock())

    def try_it() -> None:
        idents.append(threading.get_ident())
        got.append(session.mutex("job", reentrant=True).try_lock())

    for target in (hold_and_end, try_it):
        thread = threading.Thread(target=target)
        thread.start()
        thread.join(timeout=30)
    held, tried = got
    assert held is not None
    assert held.held
    assert tried is None, f"thread {idents[1]} shared the hold of ended thread {idents[0]}"
    held.release()
