"""Sync rate limiters: threads of two sessions share one bucket; refusals at once."""

from __future__ import annotations

import threading

import pytest

import tenure.sync
from tenure.errors import PreconditionFailedError


def test_threads_of_two_sessions_share_the_bucket_in_turn(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    grants: list[float] = []
    guard = threading.Lock()

    def takes(owner: tenure.sync.Session) -> None:
        limiter = owner.rate_limiter("api", rate=1000.0, burst=2)
        for _ in range(10):
            at = limiter.acquire(1, timeout=10)
            with guard:
                grants.append(at)

    threads = [threading.Thread(target=takes, args=(s,)) for s in (session, other, session)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30.0)
    assert len(grants) == 30
    grants.sort()
    # Two at once (the burst), then one per 1/1000 s of the store's clock.
    assert grants[-1] - grants[0] == pytest.approx(28 / 1000, abs=1e-4)


def test_a_spent_bucket_refuses_at_once_and_reconfigures_for_everyone(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    limiter = session.rate_limiter("slow", rate=0.01, burst=1)
    assert isinstance(limiter, tenure.sync.RateLimiter)
    assert limiter.try_acquire()
    assert not other.rate_limiter("slow", rate=0.01, burst=1).try_acquire()
    with pytest.raises(TimeoutError, match="could go only in 100"):
        limiter.acquire(1, timeout=5)
    with pytest.raises(PreconditionFailedError, match="burst 1, not 1/s"):
        other.rate_limiter("slow", rate=1.0, burst=1).try_acquire()
    limiter.reconfigure(0.01, 3)
    assert (limiter.rate, limiter.burst) == (0.01, 3.0)
    assert other.rate_limiter("slow", rate=0.01, burst=3).try_acquire(2)
