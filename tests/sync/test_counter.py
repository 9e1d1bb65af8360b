"""Sync counters: adds from threads of two sessions are none lost; compare-and-set."""

from __future__ import annotations

import threading

import tenure.sync


def test_adds_from_threads_are_counted_once_each(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    seen: list[int] = []
    guard = threading.Lock()

    def adds(owner: tenure.sync.Session) -> None:
        for _ in range(10):
            value = owner.counter("hits").add()
            with guard:
                seen.append(value)

    threads = [threading.Thread(target=adds, args=(s,)) for s in (session, other, session)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30.0)
    assert sorted(seen) == list(range(1, 31))
    counter = other.counter("hits")
    assert isinstance(counter, tenure.sync.Counter)
    assert counter.get() == 30
    assert not counter.compare_and_set(0, 1)
    assert counter.compare_and_set(30, -1)
    assert session.counter("hits").add(-1) == -2
    assert session.semaphore("hits").compare_and_set(b"-2", b"7")
    assert counter.get() == 7
