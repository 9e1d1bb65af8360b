"""Sync latches: a thread blocked in wait() goes when other threads count the latch down."""

from __future__ import annotations

import threading

import pytest

import tenure.sync


def test_a_blocked_wait_goes_when_the_count_reaches_zero(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    latch = session.latch("warmup", 2)
    assert isinstance(latch, tenure.sync.Latch)
    assert latch.remaining() == 2
    with pytest.raises(TimeoutError):
        latch.wait(timeout=0.05)
    done = threading.Event()

    def wait() -> None:
        other.latch("warmup", 2).wait()
        done.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert latch.count_down() == 1
    assert not done.wait(0.05)
    assert other.latch("warmup", 2).count_down() == 0
    waiter.join(timeout=10.0)
    assert done.is_set()
    latch.wait(timeout=0)
