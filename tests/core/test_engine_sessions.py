"""Sessions: create, detach/attach, the recovery window, expiry and close."""

from __future__ import annotations

import math

import pytest

from tenure._core import (
    AttachSession,
    CloseSession,
    CreateNode,
    CreateSession,
    DescribeNode,
    DetachSession,
    NodeConfig,
    Release,
    SessionInfo,
)
from tenure._core.engine import MAX_PROTECTION_KEY_BYTES
from tenure._core.invariants import check_invariants
from tenure._core.values import MAX_DESCRIPTION_BYTES, MAX_RECOVERY_WINDOW
from tenure.errors import (
    ErrorCode,
    InvalidArgumentError,
    LimitExceededError,
    PermissionDeniedError,
    PreconditionFailedError,
    SessionExpiredError,
    TenureError,
)

from .support import (
    KEY,
    acquire,
    create_semaphore,
    describe,
    ended,
    failed,
    granted,
    make_engine,
    open_session,
    owners_of,
    settled,
    snapshot,
    waiters_of,
)

# -- create -------------------------------------------------------------------------


def test_create_session_uses_node_default_timeout_and_seq_no_1():
    engine = make_engine(NodeConfig(recovery_window=12.0))
    info = engine.apply(CreateSession("n", KEY), 0.0)
    assert info.timeout == 12.0
    assert info.seq_no == 1
    assert engine.apply(DescribeNode("n"), 0.0).sessions == 1


def test_create_session_with_own_timeout():
    engine = make_engine(NodeConfig(recovery_window=12.0))
    info = engine.apply(CreateSession("n", KEY, timeout=3.5), 0.0)
    assert info.timeout == 3.5


def test_session_ids_are_distinct_across_nodes():
    engine = make_engine()
    engine.apply(CreateNode("m"), 0.0)
    ids = [open_session(engine, node) for node in ("n", "m", "n", "m")]
    assert len(set(ids)) == 4


@pytest.mark.parametrize(
    "timeout",
    [0, 0.0, -1.0, math.nan, math.inf, -math.inf, MAX_RECOVERY_WINDOW + 1, True, "3"],
)
def test_invalid_recovery_window_is_rejected(timeout):
    engine = make_engine()
    with pytest.raises(InvalidArgumentError):
        engine.apply(CreateSession("n", KEY, timeout=timeout), 0.0)
    assert engine.sessions == {}


@pytest.mark.parametrize(
    "key",
    [b"", b"k" * (MAX_PROTECTION_KEY_BYTES + 1), "text-key", None],
    ids=["empty", "too-long", "str", "none"],
)
def test_invalid_protection_key_is_rejected(key):
    engine = make_engine()
    with pytest.raises(InvalidArgumentError, match="protection_key"):
        engine.apply(CreateSession("n", key), 0.0)
    assert engine.sessions == {}


def test_longest_protection_key_is_accepted():
    engine = make_engine()
    key = b"k" * MAX_PROTECTION_KEY_BYTES
    sid = engine.apply(CreateSession("n", key), 0.0).session_id
    assert engine.apply(AttachSession(sid, key, 2), 0.0).seq_no == 2


@pytest.mark.parametrize(
    "description", ["x" * (MAX_DESCRIPTION_BYTES + 1), 42], ids=["too-long", "not-str"]
)
def test_invalid_description_is_rejected(description):
    engine = make_engine()
    with pytest.raises(InvalidArgumentError, match="description"):
        engine.apply(CreateSession("n", KEY, description=description), 0.0)
    assert engine.sessions == {}


def test_max_sessions_is_enforced_and_named():
    engine = make_engine(NodeConfig(max_sessions=2))
    a = open_session(engine)
    b = open_session(engine)
    engine.apply(DetachSession(b), 0.0)  # detached sessions still count
    before = snapshot(engine)
    with pytest.raises(LimitExceededError, match="max_sessions"):
        open_session(engine)
    assert snapshot(engine) == before
    engine.apply(CloseSession(a), 0.0)
    open_session(engine)  # room again
    assert engine.apply(DescribeNode("n"), 0.0).sessions == 2


# -- detach, expiry, attach ---------------------------------------------------------


def test_detached_session_expires_exactly_at_its_deadline():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid), 5.0)
    assert engine.next_deadline() == 15.0
    engine.tick(14.999)
    assert sid in engine.sessions
    assert engine.take_effects() == []
    engine.tick(15.0)
    assert sid not in engine.sessions
    (effect,) = ended(settled(engine))
    assert (effect.session_id, effect.code) == (sid, ErrorCode.SESSION_EXPIRED)
    assert engine.next_deadline() is None
    with pytest.raises(SessionExpiredError):
        engine.apply(AttachSession(sid, KEY, 2), 15.0)


def test_attached_session_never_expires():
    engine = make_engine(NodeConfig(recovery_window=1.0))
    sid = open_session(engine)
    assert engine.next_deadline() is None
    engine.tick(1e9)
    assert sid in engine.sessions
    assert engine.take_effects() == []


def test_detach_twice_does_not_extend_the_window():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid), 0.0)
    engine.apply(DetachSession(sid), 8.0)
    assert engine.next_deadline() == 10.0
    engine.tick(10.0)
    assert sid not in engine.sessions


def test_reattach_before_expiry_keeps_everything():
    engine = make_engine()
    a = open_session(engine, timeout=10.0)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    create_semaphore(engine, a, "q", 1)
    token = acquire(engine, a, "p").token
    acquire(engine, b, "q")
    acquire(engine, a, "q")  # a waits on q
    engine.apply(DetachSession(a), 1.0)
    info = engine.apply(AttachSession(a, KEY, 2), 9.0)
    assert info == SessionInfo(a, 10.0, 2)
    assert engine.next_deadline() is None  # the expiry is stale now
    engine.tick(100.0)
    assert engine.take_effects() == []
    assert [(o.session_id, o.token) for o in describe(engine, a, "p").owners] == [(a, token)]
    assert waiters_of(engine, a, "q") == [(a, 1)]
    check_invariants(engine)


def test_detach_after_reattach_starts_a_new_window():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid), 0.0)
    engine.apply(AttachSession(sid, KEY, 2), 5.0)
    engine.apply(DetachSession(sid), 7.0)
    assert engine.next_deadline() == 17.0
    engine.tick(16.9)
    assert sid in engine.sessions
    engine.tick(17.0)
    assert sid not in engine.sessions


def test_attach_with_a_timeout_and_description_restates_them():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    info = engine.apply(AttachSession(sid, KEY, 2, timeout=3.0, description="again"), 1.0)
    assert info == SessionInfo(sid, 3.0, 2)
    assert engine.sessions[sid].description == "again"
    engine.apply(AttachSession(sid, KEY, 3), 2.0)  # nil: both kept
    assert (engine.sessions[sid].timeout, engine.sessions[sid].description) == (3.0, "again")
    engine.apply(DetachSession(sid), 4.0)
    assert engine.next_deadline() == 7.0  # the new window


@pytest.mark.parametrize(
    "changes",
    [{"timeout": 0.0}, {"timeout": MAX_RECOVERY_WINDOW * 2}, {"description": "x" * 5000}],
)
def test_attach_with_a_bad_timeout_or_description_changes_nothing(
    changes: dict[str, object],
) -> None:
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    with pytest.raises(InvalidArgumentError):
        engine.apply(AttachSession(sid, KEY, 2, **changes), 1.0)  # type: ignore[arg-type]
    session = engine.sessions[sid]
    assert (session.seq_no, session.timeout, session.description) == (1, 10.0, "")


def test_attach_with_wrong_key_is_denied_and_changes_nothing():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid), 0.0)
    before = snapshot(engine)
    with pytest.raises(PermissionDeniedError):
        engine.apply(AttachSession(sid, b"wrong", 2), 1.0)
    assert snapshot(engine) == before
    engine.tick(10.0)  # still detached: it expires on time
    assert sid not in engine.sessions


def test_attach_with_non_bytes_key_raises_a_tenure_error():
    # Engine.apply promises a reply or a tenure.errors exception; CreateSession
    # validates the key's type, AttachSession passes it to hmac.compare_digest,
    # which raises a bare TypeError for a str.
    engine = make_engine()
    sid = open_session(engine)
    with pytest.raises(TenureError):
        engine.apply(AttachSession(sid, "protection-key", 2), 0.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("seq_no", [1, 0, -5], ids=["equal", "zero", "negative"])
def test_attach_with_stale_seq_no_fails(seq_no):
    engine = make_engine()
    sid = open_session(engine)
    engine.apply(DetachSession(sid), 0.0)
    before = snapshot(engine)
    with pytest.raises(PreconditionFailedError, match="stale"):
        engine.apply(AttachSession(sid, KEY, seq_no), 1.0)
    assert snapshot(engine) == before


def test_seq_no_must_grow_across_attaches():
    engine = make_engine()
    sid = open_session(engine)
    assert engine.apply(AttachSession(sid, KEY, 5), 0.0).seq_no == 5
    with pytest.raises(PreconditionFailedError):
        engine.apply(AttachSession(sid, KEY, 4), 0.0)
    with pytest.raises(PreconditionFailedError):
        engine.apply(AttachSession(sid, KEY, 5), 0.0)
    assert engine.apply(AttachSession(sid, KEY, 6), 0.0).seq_no == 6


def test_attach_can_take_over_an_attached_session():
    engine = make_engine()
    sid = open_session(engine)
    assert engine.apply(AttachSession(sid, KEY, 2), 0.0) == SessionInfo(sid, 30.0, 2)
    assert engine.sessions[sid].expires_at is None


@pytest.mark.parametrize(
    "command",
    [
        AttachSession(999, KEY, 2),
        DetachSession(999),
        CloseSession(999),
        Release(999, "p"),
    ],
    ids=["attach", "detach", "close", "release"],
)
def test_unknown_session_is_reported_expired(command):
    engine = make_engine()
    with pytest.raises(SessionExpiredError):
        engine.apply(command, 0.0)


def test_expiry_releases_holds_cancels_waits_and_serves_the_next_waiter():
    engine = make_engine()
    a = open_session(engine, timeout=5.0)
    b = open_session(engine)
    c = open_session(engine)
    create_semaphore(engine, b, "p", 1)
    create_semaphore(engine, b, "q", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "q")
    acquire(engine, a, "q", request_id=11)  # a waits on q
    acquire(engine, c, "p", request_id=21)  # c waits on p
    acquire(engine, a, "e", ephemeral=True)
    engine.take_effects()
    engine.apply(DetachSession(a), 0.0)
    engine.tick(5.0)
    effects = settled(engine)

    (cancelled,) = failed(effects)
    assert (cancelled.session_id, cancelled.request_id, cancelled.name, cancelled.code) == (
        a,
        11,
        "q",
        ErrorCode.SESSION_EXPIRED,
    )
    (grant,) = granted(effects)
    assert (grant.session_id, grant.request_id, grant.name) == (c, 21, "p")
    assert [e.session_id for e in ended(effects)] == [a]
    assert owners_of(engine, b, "p") == [(c, 1)]
    assert waiters_of(engine, b, "q") == []
    assert "e" not in engine.nodes["n"].semaphores  # the ephemeral one vanished
    assert engine.apply(DescribeNode("n"), 5.0).sessions == 2


def test_close_releases_cancels_and_serves_without_session_ended():
    engine = make_engine(NodeConfig(lock_delay=10.0))
    a = open_session(engine)
    b = open_session(engine)
    create_semaphore(engine, a, "p", 1)
    create_semaphore(engine, a, "q", 1)
    acquire(engine, a, "p")
    acquire(engine, b, "q")
    acquire(engine, a, "q", request_id=7)
    acquire(engine, b, "p", request_id=8)
    engine.take_effects()
    engine.apply(CloseSession(a), 1.0)
    effects = settled(engine)
    assert [(e.session_id, e.request_id, e.code) for e in failed(effects)] == [
        (a, 7, ErrorCode.SESSION_CLOSED)
    ]
    # A clean close starts no lock-delay: b gets p at once.
    assert [(e.session_id, e.request_id) for e in granted(effects)] == [(b, 8)]
    assert ended(effects) == []
    assert a not in engine.sessions
    with pytest.raises(SessionExpiredError):
        engine.apply(CloseSession(a), 2.0)


def test_closing_a_detached_session_ends_it_without_waiting():
    engine = make_engine()
    a = open_session(engine, timeout=5.0)
    engine.apply(DetachSession(a), 0.0)
    engine.apply(CloseSession(a), 1.0)
    assert engine.next_deadline() is None
    engine.tick(5.0)
    assert engine.take_effects() == []
