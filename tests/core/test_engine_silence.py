"""DetachSession's ``silent_for``: the window counts from when the client was last heard."""

from __future__ import annotations

import math

import pytest

from tenure._core import AttachSession, DetachSession, NodeConfig, SessionInfo
from tenure._core.invariants import check_invariants
from tenure._protocol.payloads import decode_command, encode_command
from tenure.errors import ErrorCode, InvalidArgumentError, SessionExpiredError

from .support import (
    KEY,
    acquire,
    create_semaphore,
    ended,
    granted,
    make_engine,
    open_session,
    settled,
    snapshot,
)


def test_the_window_counts_from_the_last_word_not_from_the_detach():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid, silent_for=4.0), 20.0)
    assert engine.next_deadline() == 26.0  # 16 + 10: last heard at 16
    engine.tick(25.999)
    assert sid in engine.sessions
    engine.tick(26.0)
    assert sid not in engine.sessions
    (effect,) = ended(settled(engine))
    assert (effect.session_id, effect.code) == (sid, ErrorCode.SESSION_EXPIRED)


@pytest.mark.parametrize("silent_for", [10.0, 10.5, 1e9])
def test_a_session_silent_for_its_whole_window_expires_with_the_detach(silent_for):
    engine = make_engine()
    holder = open_session(engine, timeout=10.0)
    waiter = open_session(engine)
    create_semaphore(engine, holder, "job", 1)
    acquire(engine, holder, "job")
    acquire(engine, waiter, "job", request_id=7)  # queued behind the holder
    settled(engine)
    assert engine.apply(DetachSession(holder, silent_for=silent_for), 30.0) is None
    assert holder not in engine.sessions
    effects = settled(engine)
    assert [(e.session_id, e.code) for e in ended(effects)] == [(holder, ErrorCode.SESSION_EXPIRED)]
    assert [(g.session_id, g.request_id) for g in granted(effects)] == [(waiter, 7)]
    assert engine.next_deadline() is None
    with pytest.raises(SessionExpiredError):
        engine.apply(AttachSession(holder, KEY, 2), 30.0)


def test_a_later_detach_only_ever_brings_the_expiry_closer():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid, silent_for=2.0), 10.0)
    assert engine.next_deadline() == 18.0
    engine.apply(DetachSession(sid), 12.0)  # would be 22: ignored
    assert engine.next_deadline() == 18.0
    engine.apply(DetachSession(sid, silent_for=7.0), 14.0)  # last heard at 7: due at 17
    assert engine.next_deadline() == 17.0
    engine.tick(17.0)
    assert sid not in engine.sessions
    check_invariants(engine)


def test_a_re_attach_within_the_shortened_window_keeps_the_session():
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    engine.apply(DetachSession(sid, silent_for=9.0), 5.0)
    assert engine.apply(AttachSession(sid, KEY, 2), 5.5) == SessionInfo(sid, 10.0, 2)
    assert engine.next_deadline() is None
    engine.tick(100.0)
    assert sid in engine.sessions


def test_lock_delay_starts_at_the_expiry_in_the_detach():
    engine = make_engine(NodeConfig(lock_delay=3.0))
    holder = open_session(engine, timeout=1.0)
    waiter = open_session(engine)
    create_semaphore(engine, holder, "job", 1)
    acquire(engine, holder, "job")
    acquire(engine, waiter, "job", request_id=7)
    settled(engine)
    engine.apply(DetachSession(holder, silent_for=1.0), 50.0)
    assert granted(settled(engine)) == []  # the failed holder's lock-delay first
    assert engine.next_deadline() == 53.0
    engine.tick(53.0)
    assert [g.session_id for g in granted(settled(engine))] == [waiter]


@pytest.mark.parametrize("silent_for", [-0.001, math.inf, math.nan, "1", True, None])
def test_a_bad_silent_for_is_refused_and_changes_nothing(silent_for):
    engine = make_engine()
    sid = open_session(engine, timeout=10.0)
    before = snapshot(engine)
    with pytest.raises(InvalidArgumentError, match="silent_for"):
        engine.apply(DetachSession(sid, silent_for=silent_for), 1.0)
    assert snapshot(engine) == before


def test_replaying_the_logged_detach_gives_the_same_state():
    # The journal logs commands with the wire codec: the duration travels with it.
    def run(wire: bool) -> tuple[object, float | None]:
        engine = make_engine()
        sid = open_session(engine, timeout=10.0)
        detach = DetachSession(sid, silent_for=2.5)
        loaded = decode_command(encode_command(detach))
        assert loaded == detach
        engine.apply(loaded if wire else detach, 3.0)
        return snapshot(engine), engine.next_deadline()

    assert run(wire=True) == run(wire=False)
    assert run(wire=True)[1] == 10.5
