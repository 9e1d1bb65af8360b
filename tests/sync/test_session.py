"""Sync sessions: opening forms, loss seen through .lost/check()/on_lost/with exit, and the loop."""

from __future__ import annotations

import threading

import pytest

import tenure.sync
from tenure.errors import LostError, SessionClosedError, SessionExpiredError
from tenure.sync.testing import disconnect, reconnect
from tenure.testing import FakeClock

from .conftest import NODE, advance


def expire(client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session) -> None:
    disconnect(session)
    advance(client, clock, 16)


def test_with_block_opens_and_closes(client: tenure.sync.Client) -> None:
    with client.session(NODE, recovery_window=5.0, description="worker") as session:
        assert (session.node, session.recovery_window, session.description) == (
            NODE,
            5.0,
            "worker",
        )
        assert client.describe_node(NODE).sessions == 1
        assert not session.closed
    assert session.closed
    assert session.lost.is_set()  # ended, cleanly
    assert session.lost_reason is None
    assert client.describe_node(NODE).sessions == 0


def test_plain_session_and_close(client: tenure.sync.Client) -> None:
    first = client.session(NODE)
    second = client.session(NODE)
    assert first.id != second.id
    first.close()
    first.close()
    assert first.closed
    assert not second.closed
    assert client.describe_node(NODE).sessions == 1
    second.close()


def test_expiry_sets_lost_reason_check_and_callback(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    calls: list[tuple[LostError, str]] = []
    session.on_lost(lambda error: calls.append((error, threading.current_thread().name)))
    assert not session.lost.is_set()
    session.check()  # nothing lost yet
    expire(client, clock, session)
    assert session.lost.is_set()
    assert isinstance(session.lost_reason, SessionExpiredError)
    with pytest.raises(SessionExpiredError):
        session.check()
    [(error, thread)] = calls
    assert error is session.lost_reason
    assert thread.startswith("tenure-portal")
    late: list[LostError] = []
    session.on_lost(late.append)  # already lost: called at once, here
    assert late == [session.lost_reason]


def test_reconnect_within_the_window_keeps_the_session(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    disconnect(session)
    advance(client, clock, 10)
    reconnect(session)
    advance(client, clock, 100)
    assert not session.lost.is_set()
    assert not session.closed


def test_clean_close_ends_without_a_reason_nor_a_loss_callback(
    client: tenure.sync.Client, session: tenure.sync.Session
) -> None:
    calls: list[LostError] = []
    ends: list[LostError | None] = []
    session.on_lost(calls.append)
    session.lost.add_callback(ends.append)
    session.close()
    assert session.ended
    assert session.lost.is_set()  # like the async lost: it resolves after a close
    assert session.lost_reason is None
    session.on_lost(calls.append)
    assert calls == []
    assert ends == [None]


def test_loss_during_with_body_raises_at_exit(client: tenure.sync.Client, clock: FakeClock) -> None:
    opened: list[tenure.sync.Session] = []

    def body() -> None:
        with client.session(NODE) as session:
            opened.append(session)
            expire(client, clock, session)
            assert session.lost.is_set()  # the body goes on: nothing can cancel it

    with pytest.raises(SessionExpiredError):
        body()
    [session] = opened
    assert session.closed


def test_the_bodys_own_exception_wins_over_the_loss(
    client: tenure.sync.Client, clock: FakeClock
) -> None:
    def body() -> None:
        with client.session(NODE) as session:
            expire(client, clock, session)
            _ = 1 / 0

    with pytest.raises(ZeroDivisionError):
        body()


def test_entering_a_lost_session_raises(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    expire(client, clock, session)
    with pytest.raises(SessionExpiredError), session:
        pytest.fail("the body must not run")


def test_loss_reaches_a_thread_blocked_on_the_event(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    # The main thread blocks; another thread breaks the connection and moves time.
    breaker = threading.Thread(target=expire, args=(client, clock, session))
    breaker.start()
    assert session.lost.wait(timeout=10)
    breaker.join()
    assert isinstance(session.lost_reason, SessionExpiredError)


def test_sessions_loop_opens_a_new_session_after_each_loss(
    client: tenure.sync.Client, clock: FakeClock
) -> None:
    loop = client.sessions(NODE, recovery_window=15.0, description="looped")
    assert loop.current is None
    first = next(loop)
    assert loop.current is first
    assert loop.last_loss is None
    assert first.description == "looped"
    expire(client, clock, first)
    assert isinstance(loop.last_loss, SessionExpiredError)
    second = next(loop)
    assert second.id != first.id
    assert loop.current is second
    assert not second.closed
    second.close()  # closed on purpose: the loop is over
    assert list(loop) == []
    loop.close()


def test_sessions_loop_in_a_for_statement(client: tenure.sync.Client, clock: FakeClock) -> None:
    ids: list[int] = []
    with client.sessions(NODE) as loop:
        for session in loop:
            ids.append(session.id)
            if len(ids) < 3:
                expire(client, clock, session)
                continue
            break
    assert len(set(ids)) == 3
    assert loop.current is not None
    assert loop.current.closed
    assert client.describe_node(NODE).sessions == 0


def test_client_close_ends_a_sessions_loop(client: tenure.sync.Client) -> None:
    loop = client.sessions(NODE)
    session = next(loop)
    client.close()
    assert session.closed
    assert isinstance(session.lost_reason, SessionClosedError)
    with pytest.raises(SessionClosedError):
        next(loop)
    loop.close()


def test_a_session_is_resumed_by_ticket_with_its_leases(shared_url: str) -> None:
    with tenure.sync.connect(shared_url) as first, tenure.sync.connect(shared_url) as second:
        first.create_node(NODE)
        old = first.session(NODE, recovery_window=30.0)
        lock = old.mutex("job").lock(data=b"w1")
        assert old.leases() == [lock]  # the one sync face of the lease
        ticket = old.ticket()

        new = second.session(NODE, resume=ticket.to_str())

        [resumed] = new.leases("job")
        assert (resumed.token, resumed.count, resumed.data) == (lock.token, lock.count, b"w1")
        assert new.leases() == [resumed]
        assert old.lost.wait(10.0)
        assert isinstance(old.lost_reason, tenure.errors.SessionExpiredError)
        with pytest.raises(tenure.errors.InvalidArgumentError):
            second.session(NODE, resume=ticket, recovery_window=5.0)
        with resumed:
            assert resumed.held
        assert not resumed.held
        assert resumed.lost_reason is None
        assert new.mutex("job").try_lock() is not None
        new.close()


def test_a_ttl_session_lives_while_the_thread_renews_it(client: tenure.sync.Client) -> None:
    # The deadline is kept on the portal's thread: a calling thread that stops
    # renewing (stuck, here: waiting on the event) loses the session there.
    session = client.session(NODE, ttl=0.6)
    assert session.ttl == 0.6
    lock = session.mutex("job").lock()
    for _ in range(9):  # 0.9 s: one and a half ttls, renewed every 0.1 s
        session.renew()
        assert not session.lost.wait(0.1)
    assert lock.lost_reason is None
    assert session.lost.wait(5.0)
    assert isinstance(session.lost_reason, SessionExpiredError)
    assert isinstance(lock.lost_reason, SessionExpiredError)
    with pytest.raises(SessionExpiredError):
        session.renew()
    with client.session(NODE) as other:  # closed in the store as soon as it answers
        assert other.mutex("job").lock(timeout=5.0).held
