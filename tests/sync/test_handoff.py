"""Sync hand-offs: ``lease.handoff()`` and ``session.adopt()`` blocking, each a twin of
the async one (a hold moved under a new, greater token; the old lease lost)."""

from __future__ import annotations

import threading

import pytest

import tenure.sync
from tenure.errors import LeaseLostError


def test_a_thread_adopts_a_hold_another_session_handed_off(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    lock = session.mutex("job").lock(data=b"job-7")
    text = lock.handoff()
    adopted: list[tenure.sync.Lease] = []
    worker = threading.Thread(target=lambda: adopted.append(other.adopt(text)))
    worker.start()
    worker.join()

    [lease] = adopted
    assert isinstance(lease, tenure.sync.Lease)
    assert lease.session is other
    assert lease.held
    assert lease.token > lock.token
    assert lease.data == b"job-7"
    assert other.leases("job") == [lease]  # the session keeps its one sync twin
    assert lock.lost.wait(5)
    assert isinstance(lock.lost_reason, LeaseLostError)
    with pytest.raises(LeaseLostError):
        session.adopt(text)  # adopted once already
    with lease:
        assert lease.held
    assert not lease.held
