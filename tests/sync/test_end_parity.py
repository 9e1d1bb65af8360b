"""The sync objects report every end exactly as the async objects they wrap do.

The async face is the reference: after your own release or close, after the loss
of the session, after the loss of one lease, after the client's close, each sync
Session, Lease, Lock and Leadership is compared with the async object behind it
(``lost`` ended or not, ``lost_reason``, ``held``/``closed``, ``check()``), and
with what the async API documents.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import pytest

import tenure
import tenure.sync
from tenure.errors import LostError, PreconditionFailedError
from tenure.sync.testing import disconnect
from tenure.testing import FakeClock

from .conftest import NODE, advance

SyncHeld = tenure.sync.Session | tenure.sync.Lease
AsyncHeld = tenure.Session | tenure.Lease


@dataclass(frozen=True)
class View:
    """What a held thing tells about its end."""

    ended: bool
    reason: LostError | None
    live: bool  # held (a lease) or not closed (a session)
    check_raises: LostError | None

    @property
    def kind(self) -> str | None:
        """The loss error's class name, or None."""
        return None if self.reason is None else type(self.reason).__name__


def twin(obj: SyncHeld) -> AsyncHeld:
    """The async object a sync one wraps."""
    return obj._session if isinstance(obj, tenure.sync.Session) else obj._lease


def raised_by(check: Any) -> LostError | None:
    try:
        check()
    except LostError as error:
        return error
    return None


def sync_view(obj: SyncHeld) -> View:
    assert obj.lost.is_set() == obj.lost.ended == obj.ended
    assert obj.lost.reason is obj.lost_reason
    live = obj.held if isinstance(obj, tenure.sync.Lease) else not obj.closed
    return View(obj.lost.is_set(), obj.lost_reason, live, raised_by(obj.check))


async def _async_view(obj: AsyncHeld) -> View:
    ended = obj.lost.ended
    if ended:
        assert await obj.lost is obj.lost_reason  # awaiting an ended signal returns at once
    live = obj.held if isinstance(obj, tenure.Lease) else not obj.closed
    return View(ended, obj.lost_reason, live, raised_by(obj.check))


def async_view(client: tenure.sync.Client, obj: SyncHeld) -> View:
    return client.portal.call(_async_view, twin(obj))


def assert_same(client: tenure.sync.Client, obj: SyncHeld, kind: str | None) -> None:
    """``obj`` and its async twin report the same end: ended, with loss ``kind`` (or clean)."""
    mine, reference = sync_view(obj), async_view(client, obj)
    assert mine == reference, f"sync {obj!r} reports {mine}, async reports {reference}"
    assert mine.ended
    assert not mine.live
    assert mine.kind == kind
    assert mine.check_raises is mine.reason


def assert_live(client: tenure.sync.Client, obj: SyncHeld) -> None:
    mine, reference = sync_view(obj), async_view(client, obj)
    assert mine == reference == View(False, None, True, None)


def expire(client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session) -> None:
    disconnect(session)
    advance(client, clock, 16)


# -- clean ends -------------------------------------------------------------------------


def test_own_release(client: tenure.sync.Client, session: tenure.sync.Session) -> None:
    lease = session.semaphore("pool").acquire(ephemeral=True)
    lock = session.mutex("job").lock()
    assert_live(client, lease)
    lease.release()
    lock.release()
    assert_same(client, lease, None)
    assert_same(client, lock, None)
    assert_live(client, session)


def test_own_resign_and_with_exit(client: tenure.sync.Client, session: tenure.sync.Session) -> None:
    leadership = session.election("primary").campaign(b"a")
    leadership.resign()
    assert_same(client, leadership, None)
    with session.mutex("job") as lock:
        pass
    assert_same(client, lock, None)


def test_own_close_ends_the_session_cleanly_and_what_it_holds_by_loss(
    client: tenure.sync.Client,
) -> None:
    session = client.session(NODE)
    lock = session.mutex("job").lock()
    leadership = session.election("primary").campaign()
    session.close()
    assert_same(client, session, None)
    # What the session held did not choose to end: the async face calls it lost.
    assert_same(client, lock, "SessionClosedError")
    assert_same(client, leadership, "SessionClosedError")


# -- losses -----------------------------------------------------------------------------


def test_session_loss(
    client: tenure.sync.Client, clock: FakeClock, session: tenure.sync.Session
) -> None:
    lease = session.semaphore("pool").acquire(ephemeral=True)
    leadership = session.election("primary").campaign()
    expire(client, clock, session)
    assert_same(client, session, "SessionExpiredError")
    assert_same(client, lease, "SessionExpiredError")
    assert_same(client, leadership, "SessionExpiredError")  # not a LeaderChangedError
    assert lease.lost_reason is session.lost_reason


def test_lease_loss(
    client: tenure.sync.Client, session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    session.semaphore("pool").create(limit=2)
    lease = session.semaphore("pool").acquire()
    leadership = session.election("primary").campaign()
    other.semaphore("pool").delete(force=True)
    other.semaphore("primary").delete(force=True)
    assert_same(client, lease, "LeaseLostError")
    assert_same(client, leadership, "LeaderChangedError")
    assert_live(client, session)
    lease.release()  # a no-op once lost, on both faces
    assert_same(client, lease, "LeaseLostError")


def test_client_close(memory_url: str) -> None:
    client = tenure.sync.connect(memory_url)
    client.create_node(NODE)
    session = client.session(NODE)
    lock = session.mutex("job").lock()
    client.close()
    for obj in (session, lock):
        # The portal thread has stopped: the async twin is read from here.
        mine, reference = sync_view(obj), asyncio.run(_async_view(twin(obj)))
        assert mine == reference
        assert mine.kind == "ClientClosedError"  # a SessionClosedError, more precisely


# -- how the end reaches blocking code --------------------------------------------------


def test_a_thread_blocked_on_lost_wakes_at_a_clean_release(
    session: tenure.sync.Session,
) -> None:
    lock = session.mutex("job").lock()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(lock.lost.wait()))
    waiter.start()
    lock.release()
    waiter.join(timeout=10)
    assert woke == [True]
    assert lock.lost_reason is None


@pytest.mark.parametrize("how", ["release", "loss"])
def test_callbacks_hear_what_the_async_ones_hear(
    client: tenure.sync.Client, session: tenure.sync.Session, other: tenure.sync.Session, how: str
) -> None:
    session.semaphore("pool").create(limit=1)
    lease = session.semaphore("pool").acquire()
    heard: dict[str, list[LostError | None]] = {"async": [], "sync": [], "on_lost": []}

    async def subscribe() -> None:
        twin(lease).lost.add_callback(heard["async"].append)

    client.portal.call(subscribe)
    lease.lost.add_callback(heard["sync"].append)
    lease.on_lost(heard["on_lost"].append)
    if how == "release":
        lease.release()
    else:
        other.semaphore("pool").delete(force=True)
    assert heard["sync"] == heard["async"] == [lease.lost_reason]
    assert heard["on_lost"] == ([] if how == "release" else [lease.lost_reason])
    late: list[LostError | None] = []
    lease.lost.add_callback(late.append)  # already ended: at once, here
    assert late == [lease.lost_reason]


def test_a_released_lease_cannot_guard_a_block_on_either_face(
    client: tenure.sync.Client, session: tenure.sync.Session
) -> None:
    lock = session.mutex("job").lock()
    lock.release()

    async def enter_async() -> None:
        async with twin(lock):
            pass

    with pytest.raises(PreconditionFailedError):
        client.portal.call(enter_async)
    with pytest.raises(PreconditionFailedError), lock:
        pass
