"""Sync mutexes: every form, timeouts, loss while blocking code runs, and threads contending."""

from __future__ import annotations

import signal
import threading

import pytest

import tenure.sync
from tenure.errors import LeaseLostError, LostError, SessionExpiredError
from tenure.sync.testing import disconnect
from tenure.testing import FakeClock

from .conftest import NODE, advance, interrupted_once_queued, wait_for_waiters


def test_with_mutex_holds_and_releases(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    with session.mutex("job") as lock:
        assert isinstance(lock, tenure.sync.Lock)
        assert lock.held
        assert lock.name == "job"
        assert lock.session is session
        assert other.mutex("job").try_lock() is None
        first = lock.token
    assert not lock.held
    assert lock.lost.is_set()  # ended cleanly: no reason
    assert lock.lost_reason is None
    later = other.mutex("job").try_lock()
    assert later is not None
    assert later.token > first
    later.release()


def test_lock_plain_and_in_with(session: tenure.sync.Session, other: tenure.sync.Session) -> None:
    mutex = session.mutex("job")
    lock = mutex.lock(data=b"me")
    assert lock.data == b"me"
    [owner] = other.semaphore("job").describe(owners=True).owners
    assert (owner.session_id, owner.token, owner.data) == (session.id, lock.token, b"me")
    lock.release()
    lock.release()  # idempotent
    with mutex.lock(timeout=1.0) as again:
        assert again.token > lock.token
    assert other.mutex("job").try_lock(data=b"x") is not None


def test_lock_times_out_with_timeout_error_on_the_real_clock() -> None:
    with tenure.sync.connect("memory://") as client:
        client.create_node(NODE)
        holder, waiter = client.session(NODE), client.session(NODE)
        with holder.mutex("job"), pytest.raises(TimeoutError):
            waiter.mutex("job").lock(timeout=0.05)
        assert waiter.mutex("job").lock(timeout=0.05).held  # free again


def test_lock_timeout_follows_the_fake_clock(
    client: tenure.sync.Client,
    clock: FakeClock,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
) -> None:
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            other.mutex("job").lock(timeout=30.0)
        except BaseException as error:
            errors.append(error)

    holder = session.mutex("job").lock()
    thread = threading.Thread(target=wait)
    thread.start()
    wait_for_waiters(session, "job", 1)
    advance(client, clock, 29)
    assert thread.is_alive()
    advance(client, clock, 2)
    thread.join(timeout=10)
    assert [type(error) for error in errors] == [TimeoutError]
    assert holder.held


def test_session_expiry_loses_the_lock_every_way(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    lock = session.mutex("job").lock()
    seen: list[LostError] = []
    lock.on_lost(seen.append)
    disconnect(session)
    advance(client, clock, 16)
    assert lock.lost.is_set()
    assert not lock.held
    assert isinstance(lock.lost_reason, SessionExpiredError)
    assert seen == [lock.lost_reason]
    with pytest.raises(SessionExpiredError):
        lock.check()
    lock.release()  # a no-op once lost


def test_with_mutex_raises_the_loss_on_exit(
    client: tenure.sync.Client,
    clock: FakeClock,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
) -> None:
    steps = []

    def body() -> None:
        with session.mutex("job") as lock:
            disconnect(session)
            advance(client, clock, 16)
            steps.append(lock.lost.is_set())

    with pytest.raises(SessionExpiredError):
        body()
    assert steps == [True]
    assert other.mutex("job").try_lock() is not None  # expiry freed it


def test_forced_delete_loses_the_lock_and_the_bodys_error_wins(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    def body() -> None:
        with session.mutex("job") as lock:
            other.semaphore("job").delete(force=True)
            assert isinstance(lock.lost_reason, LeaseLostError)
            raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        body()
    assert not session.closed  # only the lock was lost


def test_a_worker_loop_stops_when_the_lock_is_lost(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    lock = session.mutex("job").lock()
    started = threading.Event()
    rounds = 0

    def worker() -> None:
        nonlocal rounds
        while not lock.lost.is_set():
            rounds += 1
            started.set()
            lock.lost.wait(0.01)  # a unit of blocking work

    thread = threading.Thread(target=worker)
    thread.start()
    assert started.wait(10)
    disconnect(session)
    advance(client, clock, 16)
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert rounds >= 1


def test_entering_a_lost_lock_raises(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    lock = session.mutex("job").lock()
    disconnect(session)
    advance(client, clock, 16)
    with pytest.raises(SessionExpiredError), lock:
        pytest.fail("the body must not run")


def test_two_threads_sharing_one_session_and_mutex_object(session: tenure.sync.Session) -> None:
    mutex = session.mutex("job")
    inside = 0
    overlaps = 0
    tokens: list[int] = []
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, overlaps
        for _ in range(20):
            with mutex as lock:
                with guard:
                    inside += 1
                    overlaps += inside > 1
                    tokens.append(lock.token)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert overlaps == 0
    assert len(tokens) == 40
    assert tokens == sorted(set(tokens))


def test_threads_on_two_clients_stay_mutually_exclusive(shared_url: str) -> None:
    before = threading.active_count()
    clients = [tenure.sync.connect(shared_url) for _ in range(2)]
    clients[0].create_node(NODE)
    sessions = [client.session(NODE) for client in clients]
    inside = 0
    overlaps = 0
    tokens: list[int] = []
    guard = threading.Lock()

    def work(session: tenure.sync.Session) -> None:
        nonlocal inside, overlaps
        for _ in range(25):
            with session.mutex("job") as lock:
                with guard:
                    inside += 1
                    overlaps += inside > 1
                    tokens.append(lock.token)
                with guard:
                    inside -= 1

    threads = [threading.Thread(target=work, args=(session,)) for session in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    for client in clients:
        client.close()
    assert overlaps == 0
    assert len(tokens) == 50
    assert tokens == sorted(set(tokens))
    assert threading.active_count() == before


def test_waiting_threads_get_the_mutex_in_arrival_order(shared_url: str) -> None:
    clients = [tenure.sync.connect(shared_url) for _ in range(4)]
    try:
        clients[0].create_node(NODE)
        sessions = [client.session(NODE) for client in clients]
        order: list[tuple[int, int]] = []

        def wait_turn(index: int) -> None:
            with sessions[index].mutex("job") as lock:
                order.append((index, lock.token))

        holder = sessions[0].mutex("job").lock()
        threads = []
        for index in (3, 1, 2):  # arrival order, not session order
            thread = threading.Thread(target=wait_turn, args=(index,))
            thread.start()
            threads.append(thread)
            wait_for_waiters(sessions[0], "job", len(threads))
        assert order == []
        holder.release()
        for thread in threads:
            thread.join(timeout=30)
        assert [index for index, _ in order] == [3, 1, 2]
        assert [token for _, token in order] == sorted(token for _, token in order)
        assert order[0][1] > holder.token
    finally:
        for client in clients:
            client.close()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs pthread_kill")
def test_interrupting_a_blocked_lock_withdraws_the_request(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    holder = session.mutex("job").lock()
    thread = interrupted_once_queued(session, "job", lambda: other.mutex("job").lock())
    thread.join(timeout=10)
    with session.semaphore("job").watch(waiters=True) as stream:
        assert next(d for d in stream if not d.waiters).waiters == ()  # withdrawn
    holder.release()
    assert other.mutex("job").try_lock() is not None  # the other session still works
