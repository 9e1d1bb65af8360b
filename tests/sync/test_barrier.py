"""Sync barriers: threads of two sessions block in wait() until all parties are there."""

from __future__ import annotations

import threading

import pytest

import tenure.sync


def test_threads_go_together(session: tenure.sync.Session, other: tenure.sync.Session) -> None:
    barrier = session.barrier("stage", 3)
    assert isinstance(barrier, tenure.sync.Barrier)
    with pytest.raises(TimeoutError):
        barrier.wait(timeout=0.05)  # alone: the arrival is taken back
    passed: list[str] = []

    def party(owner: tenure.sync.Session, name: str) -> None:
        owner.barrier("stage", 3).wait(timeout=30)
        passed.append(name)

    threads = [
        threading.Thread(target=party, args=(s, n))
        for s, n in ((session, "a"), (other, "b"), (other, "c"))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30.0)
    assert sorted(passed) == ["a", "b", "c"]
    assert barrier.rounds() == 1
