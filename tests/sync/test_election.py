"""Sync elections: campaign forms, proclaim, leader(), observe(), resign and lost leadership."""

from __future__ import annotations

import threading

import pytest

import tenure.sync
from tenure.client import LeaderState
from tenure.errors import LeaderChangedError, SessionExpiredError
from tenure.sync.testing import disconnect
from tenure.testing import FakeClock

from .conftest import advance, wait_for_waiters


def test_campaign_in_with_proclaim_and_leader(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    assert other.election("primary").leader() is None
    with session.election("primary").campaign(b"host-a:8080") as leadership:
        assert isinstance(leadership, tenure.sync.Leadership)
        seen = other.election("primary").leader()
        assert seen == LeaderState(b"host-a:8080", False, session.id, leadership.token)
        leadership.proclaim(b"host-a:9090")
        assert leadership.data == b"host-a:9090"
        mine = session.election("primary").leader()
        assert mine is not None
        assert mine.is_me
        assert mine.data == b"host-a:9090"
        assert mine.token == leadership.token  # proclaiming keeps the token
    assert not leadership.held
    assert other.election("primary").leader() is None


def test_plain_campaign_resign_hands_over_in_order(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    leadership = session.election("primary").campaign(b"a")
    won: list[tenure.sync.Leadership] = []
    thread = threading.Thread(target=lambda: won.append(other.election("primary").campaign(b"b")))
    thread.start()
    wait_for_waiters(session, "primary", 1)
    assert not won
    leadership.resign()
    thread.join(timeout=10)
    [successor] = won
    assert successor.held
    assert successor.token > leadership.token
    assert leadership.lost.is_set()  # ended, as the async lost resolves on resigning
    assert leadership.lost_reason is None  # resigning is not losing
    successor.resign()


def test_observe_is_a_blocking_iterator_of_changes(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    with other.election("primary").observe() as states:
        assert not next(states).has_leader
        leadership = session.election("primary").campaign(b"a")
        state = next(states)
        assert (state.data, state.session_id, state.is_me) == (b"a", session.id, False)
        leadership.proclaim(b"a2")
        assert next(states).data == b"a2"
        leadership.resign()
        assert next(states).session_id is None


def test_campaign_timeout(
    client: tenure.sync.Client,
    clock: FakeClock,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
) -> None:
    errors: list[BaseException] = []

    def campaign() -> None:
        try:
            other.election("primary").campaign(b"b", timeout=5.0)
        except BaseException as error:
            errors.append(error)

    with session.election("primary").campaign(b"a") as leadership:
        thread = threading.Thread(target=campaign)
        thread.start()
        wait_for_waiters(session, "primary", 1)
        advance(client, clock, 5.5)
        thread.join(timeout=10)
        assert [type(error) for error in errors] == [TimeoutError]
        assert leadership.held


def test_leadership_lost_to_a_forced_delete_is_leader_changed(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    calls: list[BaseException] = []

    def body() -> None:
        with session.election("primary").campaign() as leadership:
            leadership.on_lost(calls.append)
            other.semaphore("primary").delete(force=True)
            assert leadership.lost.is_set()

    with pytest.raises(LeaderChangedError):
        body()
    assert [type(error) for error in calls] == [LeaderChangedError]


def test_leadership_ends_with_its_session(
    client: tenure.sync.Client,
    clock: FakeClock,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
) -> None:
    leadership = session.election("primary").campaign(b"a")
    disconnect(session)
    advance(client, clock, 16)
    assert isinstance(leadership.lost_reason, SessionExpiredError)
    with pytest.raises(SessionExpiredError):
        leadership.check()
    assert other.election("primary").leader() is None
