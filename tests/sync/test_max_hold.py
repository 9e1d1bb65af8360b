"""The sync face's max_hold (issue 50): the keyword on acquire, mutex and rwlock, the loss
told to the blocking code as any lost lease's."""

from __future__ import annotations

import pytest

import tenure.sync
from tenure.errors import InvalidArgumentError, LeaseLostError
from tenure.testing import FakeClock

from .conftest import advance


def test_a_mutex_with_max_hold_is_lost_at_its_end_and_the_with_raises_it(
    client: tenure.sync.Client,
    clock: FakeClock,
    session: tenure.sync.Session,
    other: tenure.sync.Session,
) -> None:
    mutex = session.mutex("job", max_hold=5.0)
    assert mutex.max_hold == 5.0
    steps = []

    def body() -> None:
        with mutex as lock:
            advance(client, clock, 4.0)
            steps.append(lock.held)
            advance(client, clock, 1.0)
            steps.append(lock.lost.is_set())

    with pytest.raises(LeaseLostError, match="max_hold"):
        body()
    assert steps == [True, True]
    assert session.lost_reason is None  # the session lives on
    later = other.mutex("job").try_lock()
    assert later is not None
    later.release()


def test_acquire_and_rwlock_take_max_hold(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    lease = session.acquire("pool", ephemeral=True, max_hold=2.0)
    rwlock = session.rwlock("catalog", max_hold=3.0)
    assert rwlock.max_hold == 3.0
    reader = rwlock.read()
    advance(client, clock, 2.0)
    assert isinstance(lease.lost_reason, LeaseLostError)
    assert reader.held
    advance(client, clock, 1.0)
    assert isinstance(reader.lost_reason, LeaseLostError)
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        session.mutex("job", max_hold=0)
    with pytest.raises(InvalidArgumentError, match="max_hold"):
        session.acquire("job", ephemeral=True, max_hold=-1.0)
