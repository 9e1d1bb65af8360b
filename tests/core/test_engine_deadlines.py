"""Time: waiter timeouts, lease TTLs and renewal, lock-delay, next_deadline, tick."""

from __future__ import annotations

import pytest

from tenure._core import (
    MAX_COUNT,
    AcquireStatus,
    AttachSession,
    CloseSession,
    DetachSession,
    Engine,
    NodeConfig,
    Release,
    Renew,
)
from tenure._core.invariants import check_invariants
from tenure.errors import ErrorCode, NotFoundError, PreconditionFailedError

from .support import (
    KEY,
    acquire,
    create_semaphore,
    describe,
    failed,
    granted,
    lost,
    make_engine,
    open_session,
    owner,
    owners_of,
    settled,
    snapshot,
    waiters_of,
)

BUSY, GRANTED, QUEUED = AcquireStatus.BUSY, AcquireStatus.GRANTED, AcquireStatus.QUEUED

# -- waiter timeouts ----------------------------------------------------------------


def test_waiter_times_out_exactly_at_its_deadline():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", request_id=4, timeout=2.5, now=1.0)
    assert engine.next_deadline() == 3.5
    engine.tick(3.4999)
    assert engine.take_effects() == []
    assert waiters_of(engine, a, "p") == [(b, 1)]
    engine.tick(3.5)
    (timeout,) = failed(settled(engine))
    assert (timeout.session_id, timeout.request_id, timeout.name, timeout.code) == (
        b,
        4,
        "p",
        ErrorCode.TIMEOUT,
    )
    assert waiters_of(engine, a, "p") == []
    assert engine.next_deadline() is None
    assert b in engine.sessions  # the session itself is fine


def test_timed_out_head_lets_smaller_waiters_behind_it_proceed():
    engine = make_engine()
    a, b, c, d = (open_session(engine) for _ in range(4))
    create_semaphore(engine, a, "p", 3)
    acquire(engine, a, "p", 2)
    acquire(engine, b, "p", 3, request_id=1, timeout=5.0)  # blocks the queue
    acquire(engine, c, "p", 1, request_id=2)
    acquire(engine, d, "p", 1, request_id=3)
    engine.take_effects()
    engine.tick(5.0)
    effects = settled(engine)
    assert [(e.session_id, e.code) for e in failed(effects)] == [(b, ErrorCode.TIMEOUT)]
    assert [(g.session_id, g.request_id) for g in granted(effects)] == [(c, 2)]
    assert waiters_of(engine, a, "p") == [(d, 1)]


def test_granted_waiter_does_not_time_out_later():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", timeout=5.0)
    engine.apply(Release(a, "p"), 1.0)
    assert len(granted(engine.take_effects())) == 1
    assert engine.next_deadline() is None  # the stale timeout is skipped
    engine.tick(10.0)
    assert engine.take_effects() == []
    assert owners_of(engine, a, "p") == [(b, 1)]


def test_superseded_waiter_keeps_only_the_new_timeout():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", request_id=1, timeout=2.0)
    acquire(engine, b, "p", request_id=2, timeout=10.0, now=1.0)
    engine.take_effects()
    assert engine.next_deadline() == 11.0
    engine.tick(5.0)
    assert engine.take_effects() == []
    engine.tick(11.0)
    assert [(e.request_id, e.code) for e in failed(engine.take_effects())] == [
        (2, ErrorCode.TIMEOUT)
    ]


# -- leases -------------------------------------------------------------------------


def test_lease_ttl_expires_with_lease_lost():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    result = acquire(engine, a, "p", lease_ttl=4.0, now=1.0)
    assert (result.status, result.lease_ttl) == (GRANTED, 4.0)
    acquire(engine, b, "p", request_id=9, now=1.0)
    assert engine.next_deadline() == 5.0
    engine.tick(4.999)
    assert engine.take_effects() == []
    engine.tick(5.0)
    effects = settled(engine)
    (loss,) = lost(effects)
    assert (loss.session_id, loss.name, loss.token, loss.code) == (
        a,
        "p",
        result.token,
        ErrorCode.LEASE_LOST,
    )
    assert [(g.session_id, g.request_id) for g in granted(effects)] == [(b, 9)]
    assert a in engine.sessions  # losing a lease does not end the session
    assert engine.apply(Release(a, "p"), 5.0) is False


def test_renew_extends_the_lease():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p", lease_ttl=4.0)
    assert engine.apply(Renew(a, "p"), 3.0) == 4.0
    assert engine.next_deadline() == 7.0  # the old deadline (4.0) is stale
    engine.tick(4.0)
    assert engine.take_effects() == []
    assert owners_of(engine, a, "p") == [(a, 1)]
    engine.tick(7.0)
    assert len(lost(engine.take_effects())) == 1


def test_renew_with_a_new_ttl_changes_it():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    token = acquire(engine, a, "p", lease_ttl=4.0).token
    assert engine.apply(Renew(a, "p", 10.0), 1.0) == 10.0
    assert engine.next_deadline() == 11.0
    assert owner(engine, a, "p", a).token == token  # renewing is not a new grant
    assert engine.apply(Renew(a, "p"), 2.0) == 10.0  # the new TTL sticks


def test_renew_of_something_not_held_is_not_found():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p", lease_ttl=4.0)
    acquire(engine, b, "p", lease_ttl=4.0)  # b only waits
    before = snapshot(engine)
    with pytest.raises(NotFoundError):
        engine.apply(Renew(b, "p"), 1.0)
    with pytest.raises(NotFoundError):
        engine.apply(Renew(a, "missing"), 1.0)
    assert snapshot(engine) == before


def test_renew_of_a_grant_without_ttl_fails():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    before = snapshot(engine)
    with pytest.raises(PreconditionFailedError, match="no lease TTL"):
        engine.apply(Renew(a, "p"), 1.0)
    assert snapshot(engine) == before


def test_renew_with_explicit_ttl_of_a_grant_without_ttl_fails():
    # Renew "extends a grant that has a lease TTL"; a grant made without one lasts
    # as long as its session and must not silently become a timed lease.
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    before = snapshot(engine)
    with pytest.raises(PreconditionFailedError):
        engine.apply(Renew(a, "p", 5.0), 1.0)
    assert snapshot(engine) == before
    assert engine.next_deadline() is None


def test_node_default_lease_applies_to_every_grant():
    engine = make_engine(NodeConfig(default_lease=3.0))
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    first = acquire(engine, a, "p")
    assert first.lease_ttl == 3.0
    acquire(engine, b, "p", request_id=5)
    engine.tick(3.0)
    effects = settled(engine)
    assert [e.session_id for e in lost(effects)] == [a]
    (grant,) = granted(effects)
    assert (grant.session_id, grant.lease_ttl) == (b, 3.0)
    assert engine.next_deadline() == 6.0  # b's lease runs from its grant


def test_per_acquire_lease_ttl_overrides_the_default():
    engine = make_engine(NodeConfig(default_lease=3.0))
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    assert acquire(engine, a, "p", lease_ttl=8.0).lease_ttl == 8.0
    assert engine.next_deadline() == 8.0


def test_in_place_update_keeps_the_lease_deadline():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 2, lease_ttl=4.0)
    again = acquire(engine, a, "p", 1, now=2.0)
    assert again.lease_ttl == 4.0
    assert engine.next_deadline() == 4.0


def test_upgrade_grant_gets_a_fresh_lease_and_drops_the_old_deadline():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 2)
    acquire(engine, a, "p", 1, lease_ttl=4.0)
    bigger = acquire(engine, a, "p", 2, lease_ttl=10.0, now=1.0)
    assert (bigger.status, bigger.lease_ttl) == (GRANTED, 10.0)
    assert engine.next_deadline() == 11.0
    engine.tick(4.0)
    assert engine.take_effects() == []


# -- lock-delay ---------------------------------------------------------------------


def _expired_holder(config: NodeConfig, *, ephemeral: bool = False) -> tuple[Engine, int, int]:
    """Node with lock-delay; session ``a`` held "p" and expired at t=10."""
    engine = make_engine(config)
    a = open_session(engine, timeout=10.0)
    w = open_session(engine)
    if not ephemeral:
        create_semaphore(engine, w, "p", 1)
    acquire(engine, a, "p", ephemeral=ephemeral, count=MAX_COUNT if ephemeral else 1)
    engine.apply(DetachSession(a), 0.0)
    return engine, a, w


def test_tokens_of_an_expired_session_are_not_granted_during_lock_delay():
    engine, _, w = _expired_holder(NodeConfig(lock_delay=5.0))
    acquire(engine, w, "p", request_id=3, now=1.0)
    engine.take_effects()
    engine.tick(10.0)
    assert granted(settled(engine)) == []
    assert owners_of(engine, w, "p") == []
    assert waiters_of(engine, w, "p") == [(w, 1)]
    assert engine.next_deadline() == 15.0
    engine.tick(14.999)
    assert engine.take_effects() == []
    engine.tick(15.0)
    assert [(g.session_id, g.request_id) for g in granted(settled(engine))] == [(w, 3)]


def test_new_acquire_during_lock_delay_is_busy_or_queued():
    engine, _, w = _expired_holder(NodeConfig(lock_delay=5.0))
    engine.tick(10.0)
    assert acquire(engine, w, "p", timeout=0, now=12.0).status is BUSY
    assert acquire(engine, w, "p", request_id=8, now=12.0).status is QUEUED
    engine.tick(15.0)
    assert [g.request_id for g in granted(engine.take_effects())] == [8]


def test_acquire_right_at_the_end_of_lock_delay_is_granted():
    engine, _, w = _expired_holder(NodeConfig(lock_delay=5.0))
    engine.tick(10.0)
    assert acquire(engine, w, "p", timeout=0, now=15.0).status is GRANTED


def test_idle_ephemeral_semaphore_survives_until_lock_delay_ends():
    engine, _, w = _expired_holder(NodeConfig(lock_delay=5.0), ephemeral=True)
    engine.tick(10.0)
    desc = describe(engine, w, "p", now=10.0)
    assert (desc.ephemeral, desc.owners, desc.waiters) == (True, (), ())
    check_invariants(engine)
    engine.tick(15.0)
    assert "p" not in engine.nodes["n"].semaphores
    with pytest.raises(NotFoundError):
        describe(engine, w, "p", now=15.0)
    assert engine.next_deadline() is None


def test_clean_release_and_close_start_no_lock_delay():
    engine = make_engine(NodeConfig(lock_delay=5.0))
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "p", request_id=2)
    acquire(engine, c, "p", request_id=3)
    engine.take_effects()
    engine.apply(Release(a, "p"), 1.0)
    assert [g.request_id for g in granted(settled(engine))] == [2]
    engine.apply(CloseSession(b), 2.0)
    assert [g.request_id for g in granted(settled(engine))] == [3]
    assert engine.next_deadline() is None


def test_expired_lease_starts_lock_delay():
    engine = make_engine(NodeConfig(lock_delay=2.0))
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p", lease_ttl=1.0)
    acquire(engine, b, "p", request_id=4)
    engine.take_effects()
    engine.tick(1.0)
    effects = settled(engine)
    assert len(lost(effects)) == 1
    assert granted(effects) == []
    assert engine.next_deadline() == 3.0
    engine.tick(3.0)
    assert [g.request_id for g in granted(engine.take_effects())] == [4]


def test_lock_delay_blocks_an_otherwise_fitting_waiter_on_a_counting_semaphore():
    # The engine blocks every grant on the semaphore during lock-delay, not just
    # the tokens the failed holder freed (semaphore module docstring).
    engine = make_engine(NodeConfig(lock_delay=5.0))
    a = open_session(engine, timeout=1.0)
    b, c = open_session(engine), open_session(engine)
    create_semaphore(engine, b, "p", 3)
    acquire(engine, a, "p", 1)
    engine.apply(DetachSession(a), 0.0)
    engine.tick(1.0)
    assert acquire(engine, c, "p", 1, timeout=0, now=2.0).status is BUSY
    assert describe(engine, b, "p").count == 0


def test_waiter_timeout_during_lock_delay_is_reported():
    engine, _, w = _expired_holder(NodeConfig(lock_delay=5.0))
    acquire(engine, w, "p", request_id=3, timeout=12.0, now=1.0)  # until 13
    engine.take_effects()
    engine.tick(10.0)
    engine.tick(13.0)
    assert [(e.request_id, e.code) for e in failed(settled(engine))] == [(3, ErrorCode.TIMEOUT)]
    engine.tick(15.0)
    assert engine.take_effects() == []


# -- next_deadline and tick ---------------------------------------------------------


def test_next_deadline_is_none_without_timed_work():
    engine = make_engine()
    a = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p")
    assert engine.next_deadline() is None


def test_next_deadline_is_the_earliest_live_one_and_skips_stale_ones():
    engine = make_engine()
    a = open_session(engine, timeout=20.0)
    b, c = open_session(engine), open_session(engine)
    create_semaphore(engine, b, "p", 1)
    acquire(engine, b, "p", lease_ttl=9.0)  # lease at 9
    acquire(engine, c, "p", timeout=4.0)  # waiter at 4
    engine.apply(DetachSession(a), 0.0)  # session at 20
    assert engine.next_deadline() == 4.0
    engine.apply(Release(c, "p"), 1.0)  # waiter at 4 is stale now
    assert engine.next_deadline() == 9.0
    engine.apply(Renew(b, "p", 30.0), 2.0)  # lease moves to 32
    assert engine.next_deadline() == 20.0
    engine.apply(AttachSession(a, KEY, 2), 3.0)  # session deadline is stale
    assert engine.next_deadline() == 32.0
    engine.apply(Release(b, "p"), 4.0)
    assert engine.next_deadline() is None


def test_tick_before_any_deadline_changes_nothing():
    engine = make_engine()
    a, b = open_session(engine, timeout=10.0), open_session(engine)
    create_semaphore(engine, b, "p", 1)
    acquire(engine, b, "p", lease_ttl=5.0)
    acquire(engine, a, "p", timeout=3.0)
    engine.apply(DetachSession(a), 0.0)
    before = snapshot(engine)
    engine.tick(2.0)
    engine.tick(2.0)
    assert snapshot(engine) == before
    assert engine.take_effects() == []


def test_one_tick_processes_every_due_deadline_in_time_order():
    engine = make_engine()
    a = open_session(engine, timeout=6.0)
    b, c = open_session(engine), open_session(engine)
    create_semaphore(engine, b, "p", 1)
    acquire(engine, b, "p", lease_ttl=2.0)  # lease ends at 2
    acquire(engine, c, "p", request_id=1, timeout=4.0)  # granted at 2, not timed out
    acquire(engine, a, "q", ephemeral=True)
    engine.apply(DetachSession(a), 0.0)  # expires at 6
    engine.take_effects()
    engine.tick(100.0)
    effects = settled(engine)
    kinds = [type(e).__name__ for e in effects]
    assert kinds == ["LeaseLost", "Granted", "SessionEnded"]
    assert owners_of(engine, b, "p") == [(c, 1)]
    assert a not in engine.sessions


def test_coarse_tick_matches_ticking_at_each_deadline():
    # tick(now) "lets time pass up to now"; pop_due even yields entries scheduled
    # while ticking. Ticking once at t=100 should reach the same state as ticking at
    # every deadline on the way. Here a's expiry at t=10 starts a 5 s lock-delay:
    # the waiter (timeout at t=51) is granted at t=15 when ticked finely, but a
    # single tick(100) starts the delay at t=100 and times the waiter out instead.
    def run(ticks: list[float]) -> list[tuple[str, int]]:
        engine = make_engine(NodeConfig(lock_delay=5.0))
        a = open_session(engine, timeout=10.0)
        w = open_session(engine)
        create_semaphore(engine, w, "p", 1)
        acquire(engine, a, "p")
        engine.apply(DetachSession(a), 0.0)
        acquire(engine, w, "p", request_id=7, timeout=50.0, now=1.0)
        engine.take_effects()
        for t in ticks:
            engine.tick(t)
        return [(type(e).__name__, e.session_id) for e in engine.take_effects()]

    fine = run([10.0, 15.0, 100.0])
    assert ("Granted", 2) in fine
    assert run([100.0]) == fine


def test_coarse_tick_runs_a_lease_from_its_logical_grant_time():
    engine = make_engine()
    a, b = open_session(engine), open_session(engine)
    create_semaphore(engine, a, "p", 1)
    acquire(engine, a, "p", lease_ttl=2.0)  # ends at 2
    acquire(engine, b, "p", request_id=5, lease_ttl=3.0)  # granted at 2, so ends at 5
    engine.take_effects()
    engine.tick(100.0)
    effects = settled(engine)
    assert [(type(e).__name__, e.session_id) for e in effects] == [
        ("LeaseLost", a),
        ("Granted", b),
        ("LeaseLost", b),
    ]
    assert owners_of(engine, a, "p") == []
    assert engine.next_deadline() is None
