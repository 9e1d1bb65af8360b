"""A queued acquire asked again with ``keep_place``: restated in place (YDB's rule).

Without ``keep_place`` (the rule of older logs and clients) it is superseded and the
new request queues at the back: the last test keeps that rule as it was.
"""

from __future__ import annotations

import random

import pytest

from tenure._core import AcquireStatus, DescribeSemaphore, Engine, Release
from tenure.errors import ErrorCode
from tests.core.support import (
    NODE,
    acquire,
    create_semaphore,
    describe,
    failed,
    fired,
    granted,
    make_engine,
    open_session,
    settled,
    waiters_of,
)

QUEUED, GRANTED = AcquireStatus.QUEUED, AcquireStatus.GRANTED


def _queue(limit: int = 3) -> tuple[Engine, int, int, int]:
    """``a`` holds the whole semaphore ``p``; ``b`` (2 tokens) then ``c`` (1) wait."""
    engine = make_engine()
    a, b, c = (open_session(engine) for _ in range(3))
    create_semaphore(engine, a, "p", limit)
    acquire(engine, a, "p", limit)
    acquire(engine, b, "p", 2, request_id=1, data=b"old")
    acquire(engine, c, "p", 1, request_id=2)
    engine.take_effects()
    return engine, a, b, c


def test_fewer_tokens_or_new_data_keep_the_place_and_end_the_old_request() -> None:
    engine, a, b, c = _queue()
    result = acquire(engine, b, "p", 1, request_id=3, data=b"new", keep_place=True)
    assert result.status is QUEUED
    effects = settled(engine)
    assert [(e.request_id, e.code) for e in failed(effects)] == [(1, ErrorCode.CANCELLED)]
    assert waiters_of(engine, a, "p") == [(b, 1), (c, 1)]  # still ahead of c
    assert [w.data for w in describe(engine, a, "p").waiters] == [b"new", b""]
    engine.apply(Release(a, "p"), 1.0)
    assert [(g.session_id, g.request_id) for g in granted(settled(engine))] == [(b, 3), (c, 2)]


def test_the_same_request_sent_again_keeps_its_place_and_its_id() -> None:
    engine, a, b, c = _queue()
    assert acquire(engine, b, "p", 2, request_id=1, data=b"old", keep_place=True).status is QUEUED
    assert failed(settled(engine)) == []  # nothing superseded: it is the same request
    assert waiters_of(engine, a, "p") == [(b, 2), (c, 1)]


def test_the_timeout_restarts_from_the_restate() -> None:
    engine, _a, b, _c = _queue()
    acquire(engine, b, "p", 2, request_id=3, timeout=2.0, data=b"old", keep_place=True, now=1.0)
    acquire(engine, b, "p", 2, request_id=4, timeout=5.0, data=b"old", keep_place=True, now=2.0)
    engine.take_effects()
    engine.tick(6.9)
    assert engine.take_effects() == []
    engine.tick(7.0)
    assert [(e.request_id, e.code) for e in failed(settled(engine))] == [(4, ErrorCode.TIMEOUT)]


def test_at_the_head_it_is_granted_at_once_when_it_now_fits() -> None:
    engine, a, _b, c = _queue(limit=3)
    engine.apply(Release(a, "p"), 1.0)  # b (2) granted; c (1) granted too: 3 fit
    engine.take_effects()
    d, e = open_session(engine), open_session(engine)
    acquire(engine, d, "p", 2, request_id=5, now=2.0)  # 3 held: d waits for 2
    acquire(engine, e, "p", 1, request_id=6, now=2.0)
    engine.apply(Release(c, "p"), 3.0)  # 1 free: d (2) at the head does not fit
    assert granted(settled(engine)) == []
    result = acquire(engine, d, "p", 1, request_id=7, keep_place=True, now=4.0)
    assert result.status is GRANTED
    assert [(x.request_id, x.code) for x in failed(settled(engine))] == [(5, ErrorCode.CANCELLED)]
    assert waiters_of(engine, a, "p") == [(e, 1)]  # e behind it still waits: 3 held


def test_more_tokens_or_a_try_do_not_restate_in_place() -> None:
    engine, a, b, c = _queue()
    acquire(engine, b, "p", 3, request_id=3, keep_place=True)  # more: to the back
    assert waiters_of(engine, a, "p") == [(c, 1), (b, 3)]
    result = acquire(engine, b, "p", 1, request_id=4, timeout=0, keep_place=True)
    assert result.status is AcquireStatus.BUSY  # a try: the wait is given up
    assert waiters_of(engine, a, "p") == [(c, 1)]
    settled(engine)


def test_without_keep_place_the_request_goes_to_the_back() -> None:
    engine, a, b, c = _queue()
    acquire(engine, b, "p", 1, request_id=3, data=b"new")
    effects = settled(engine)
    assert [(e.request_id, e.code) for e in failed(effects)] == [(1, ErrorCode.CANCELLED)]
    assert waiters_of(engine, a, "p") == [(c, 1), (b, 1)]


def test_a_restate_of_new_data_fires_a_waiters_watch() -> None:
    engine, a, b, _c = _queue()
    engine.apply(DescribeSemaphore(a, "p", waiters=True, watch_waiters=True), 0.0)
    acquire(engine, b, "p", 2, request_id=3, data=b"newer", keep_place=True)
    assert len(fired(settled(engine))) == 1


@pytest.mark.parametrize("seed", range(30))
def test_random_restates_keep_the_queue_in_arrival_order(seed: int) -> None:
    """Sessions ask, ask again (in place or not), try, release and time out at random:
    after every step the invariants hold (the queue ascends in arrival numbers, a head
    that fits was granted), and the queue hands out grants in arrival order."""
    rng = random.Random(seed)
    engine = make_engine()
    ids = [open_session(engine) for _ in range(5)]
    create_semaphore(engine, ids[0], "p", 3)
    now, last_granted = 0.0, 0
    for request_id in range(1, 200):
        now += rng.choice([0.0, 0.1, 0.5])
        sid = rng.choice(ids)
        queued = {
            w.request_id: w.order for w in engine.nodes[NODE].semaphores["p"].waiters.values()
        }
        if rng.random() < 0.7:
            acquire(
                engine,
                sid,
                "p",
                rng.randint(1, 3),
                request_id=request_id,
                timeout=rng.choice([None, 0, 1.0, 3.0]),
                keep_place=rng.random() < 0.7,
                data=b"%d" % request_id,
                now=now,
            )
        elif rng.random() < 0.8:
            engine.apply(Release(sid, "p"), now)
        else:
            engine.tick(now)
        for grant in granted(settled(engine)):
            if grant.request_id in queued:  # granted from the queue: in arrival order
                assert queued[grant.request_id] > last_granted
                last_granted = queued[grant.request_id]
