"""Sync all-or-none locks: threads of two sessions lock overlapping pairs in any order."""

from __future__ import annotations

import random
import threading

import pytest

import tenure.sync
from tenure.errors import LeaseLostError


def test_threads_locking_overlapping_pairs_never_deadlock_or_overlap(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    names = ["acct/1", "acct/2", "acct/3"]
    inside: list[str] = []
    guard = threading.Lock()
    done: list[int] = []

    def transfers(owner: tenure.sync.Session, seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(8):
            pair = rng.sample(names, 2)
            with owner.lock_all(pair, timeout=30) as held:
                assert isinstance(held, tenure.sync.HeldLocks)
                with guard:
                    assert not set(pair) & set(inside)
                    inside.extend(pair)
                with guard:
                    for name in pair:
                        inside.remove(name)
                    done.append(held.tokens[pair[0]])

    threads = [
        threading.Thread(target=transfers, args=(s, seed))
        for seed, s in enumerate((session, other, session))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60.0)
    assert len(done) == 24
    assert len(set(done)) == 24


def test_a_lost_member_ends_the_set_and_leaving_raises_it(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    held = session.lock_all(["a", "b"])
    assert set(held.locks) == {"a", "b"}
    held.__enter__()
    other.semaphore("b").delete(force=True)
    assert held.lost.wait(10)
    with pytest.raises(LeaseLostError):  # leaving the block raises the loss
        held.__exit__(None, None, None)
    assert not held.held
    assert other.mutex("a").try_lock() is not None  # a was released
