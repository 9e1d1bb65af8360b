"""Sync readers-writer locks: readers in threads share, a writer waits its turn, then is alone."""

from __future__ import annotations

import threading

import tenure
import tenure.sync

from .conftest import wait_for_waiters


def test_readers_share_and_a_writer_waits_for_them(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    rw = session.rwlock("catalog")
    with rw.read() as first, other.rwlock("catalog").read(timeout=1.0) as second:
        assert isinstance(first, tenure.sync.ReadLock)
        assert second.token > first.token
        # (From another thread: this one holds a read in both sessions, and a thread
        # asking again for what it holds in a session is refused, as a task is.)
        tried: list[tenure.sync.WriteLock | None] = []
        trier = threading.Thread(target=lambda: tried.append(other.rwlock("catalog").try_write()))
        trier.start()
        trier.join(timeout=10.0)
        assert tried == [None]
        state = rw.describe()
        assert isinstance(state, tenure.RWLockDescription)
        assert sorted(r.session_id for r in state.readers) == sorted([session.id, other.id])
        got: list[tenure.sync.WriteLock] = []
        writer = threading.Thread(target=lambda: got.append(other.rwlock("catalog").write()))
        writer.start()
        wait_for_waiters(session, "catalog", 1)
        assert not got
    writer.join(timeout=10.0)
    [write] = got
    assert isinstance(write, tenure.sync.WriteLock)
    assert write.token > second.token
    assert rw.describe().writer is not None
    assert rw.try_read() is None
    write.restate(1)  # a downgrade: the writer reads now, with the same token
    again = rw.try_read()
    assert again is not None
    again.release()
    write.release()
    assert not rw.describe().held
