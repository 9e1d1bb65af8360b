"""ResumeSession: a new owner takes a live session back, whatever its seq_no."""

from __future__ import annotations

import pytest

from tenure._core import (
    AttachSession,
    CreateNode,
    DescribeSemaphore,
    DescribeSession,
    DetachSession,
    ResumeSession,
    SessionInfo,
)
from tenure.errors import (
    ErrorCode,
    InvalidArgumentError,
    PreconditionFailedError,
    SessionExpiredError,
)

from .support import (
    KEY,
    NODE,
    acquire,
    create_semaphore,
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


def test_resume_keeps_the_holds_and_bumps_seq_no() -> None:
    engine = make_engine()
    sid = open_session(engine, timeout=30.0)
    token = acquire(engine, sid, "job", ephemeral=True).token
    engine.apply(AttachSession(sid, KEY, 7), 1.0)
    engine.apply(DetachSession(sid), 2.0)
    settled(engine)

    info = engine.apply(ResumeSession(sid, KEY, NODE), 3.0)

    assert info == SessionInfo(sid, 30.0, 8)
    state = engine.apply(DescribeSession(sid, "", 10), 3.0)
    assert [(h.name, h.token) for h in state.holds] == [("job", token)]
    assert engine.sessions[sid].expires_at is None  # attached: no longer expires
    effects = settled(engine)
    [notice] = ended(effects)
    assert (notice.session_id, notice.code) == (sid, ErrorCode.SESSION_EXPIRED)
    assert "resumed" in notice.message
    assert sid in engine.sessions  # the notice is the old owner's: the session goes on
    engine.tick(1000.0)
    assert sid in engine.sessions
    # The old owner's next attach (its seq_no + 1) is stale: fenced off.
    with pytest.raises(PreconditionFailedError):
        engine.apply(AttachSession(sid, KEY, 8), 4.0)
    assert engine.apply(AttachSession(sid, KEY, 9), 4.0).seq_no == 9


def test_resume_withdraws_the_waits_and_the_next_waiter_moves_up() -> None:
    engine = make_engine()
    holder, old, third = (open_session(engine) for _ in range(3))
    create_semaphore(engine, holder, "pool", 2)
    acquire(engine, holder, "pool", 1)
    held = acquire(engine, old, "pool", 1, data=b"kept")
    acquire(engine, old, "pool", 2, request_id=41)  # an upgrade of its hold: waits
    acquire(engine, third, "pool", 1, request_id=42)  # behind the upgrade
    settled(engine)

    engine.apply(ResumeSession(old, KEY, NODE), 1.0)

    effects = settled(engine)
    assert [(f.session_id, f.request_id, f.code) for f in failed(effects)] == [
        (old, 41, ErrorCode.SESSION_EXPIRED)
    ]
    assert granted(effects) == []  # the limit is full: the third now heads the queue
    assert waiters_of(engine, holder, "pool") == [(third, 1)]
    assert owners_of(engine, holder, "pool") == [(holder, 1), (old, 1)]
    description = engine.apply(
        DescribeSemaphore(holder, "pool", owners=True, waiters=False), 1.0
    ).description
    assert [(o.token, o.data) for o in description.owners if o.session_id == old] == [
        (held.token, b"kept")
    ]
    assert engine.apply(DescribeSession(old, "", 10), 1.0).waits == ()


def test_resume_grants_what_the_withdrawn_head_held_up() -> None:
    engine = make_engine()
    holder, old, third = (open_session(engine) for _ in range(3))
    create_semaphore(engine, holder, "pool", 3)
    acquire(engine, holder, "pool", 1)
    acquire(engine, old, "pool", 3, request_id=51)  # the head: does not fit
    acquire(engine, third, "pool", 1, request_id=52)  # would fit, but waits behind
    settled(engine)

    engine.apply(ResumeSession(old, KEY, NODE), 1.0)

    assert [(g.session_id, g.request_id) for g in granted(settled(engine))] == [(third, 52)]


def test_resume_drops_the_watches_and_the_missed_endings() -> None:
    engine = make_engine()
    watcher, other = open_session(engine), open_session(engine)
    create_semaphore(engine, other, "pool", 1)
    engine.apply(DescribeSemaphore(watcher, "pool", watch_owners=True, watch_repeat=True), 0.0)
    acquire(engine, watcher, "pool", 1, timeout=1.0)  # granted
    acquire(engine, other, "pool", 1, timeout=1.0, request_id=61)  # times out: other's miss
    engine.tick(2.0)
    assert engine.sessions[watcher].watches
    settled(engine)

    engine.apply(ResumeSession(watcher, KEY, NODE), 3.0)

    assert not engine.sessions[watcher].watches
    assert not engine.sessions[watcher].missed
    acquire(engine, other, "pool", 1, timeout=0)
    assert [e for e in settled(engine) if getattr(e, "watch_id", None) is not None] == []


@pytest.mark.parametrize(
    ("session", "key", "node"),
    [
        (None, b"wrong-key", NODE),  # a wrong key
        (None, KEY, "elsewhere"),  # a session of another node
        (999, KEY, NODE),  # no such session
    ],
)
def test_a_wrong_ticket_is_session_expired_and_changes_nothing(
    session: int | None, key: bytes, node: str
) -> None:
    engine = make_engine()
    engine.apply(CreateNode("elsewhere"), 0.0)
    sid = open_session(engine)
    acquire(engine, sid, "job", ephemeral=True)
    settled(engine)
    before = snapshot(engine)

    with pytest.raises(SessionExpiredError) as raised:
        engine.apply(ResumeSession(sid if session is None else session, key, node), 1.0)

    assert "cannot be resumed" in str(raised.value)
    assert snapshot(engine) == before
    assert engine.sessions[sid].seq_no == 1
    assert settled(engine) == []


def test_an_ended_session_cannot_be_resumed() -> None:
    engine = make_engine()
    sid = open_session(engine, timeout=5.0)
    engine.apply(DetachSession(sid), 0.0)
    engine.tick(10.0)
    assert sid not in engine.sessions

    with pytest.raises(SessionExpiredError):
        engine.apply(ResumeSession(sid, KEY, NODE), 11.0)


def test_a_key_that_is_not_bytes_is_refused() -> None:
    engine = make_engine()
    sid = open_session(engine)

    with pytest.raises(InvalidArgumentError):
        engine.apply(ResumeSession(sid, "key", NODE), 0.0)  # type: ignore[arg-type]
