"""Loss cancels the work.

If a session, lease, lock or leadership is lost while the body of its ``async with``
runs, the body is cancelled and the block raises the loss error (the way
``asyncio.timeout`` turns its cancellation into TimeoutError). ``.lost`` and
``.lost_reason`` tell the same news to code that is not inside such a block. Here,
for each kind of holder; what is and is not a loss: ``test_loss_rules.py``.
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import (
    LeaderChangedError,
    LeaseLostError,
    SessionExpiredError,
)

from .harness import Expire
from .support import Body, hold_in_block, run_block, within

# -- each kind of holder --------------------------------------------------------------


async def test_session_loss_cancels_the_session_block(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    task, body, session = await hold_in_block(client.session(node, recovery_window=15.0))
    await expire(session)

    with pytest.raises(SessionExpiredError) as raised:
        await within(task)
    assert not body.finished
    assert isinstance(raised.value.__cause__, asyncio.CancelledError)
    assert session.lost_reason is not None
    assert type(session.lost_reason) is SessionExpiredError
    assert await session.lost is session.lost_reason


async def test_lease_loss_cancels_the_lease_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    await session.semaphore("pool").create(limit=2)
    task, body, lease = await hold_in_block(session.semaphore("pool").acquire(count=2))
    await admin.semaphore("pool").delete(force=True)

    with pytest.raises(LeaseLostError) as raised:
        await within(task)
    assert type(raised.value) is LeaseLostError
    assert not body.finished
    assert lease.lost_reason is not None
    assert type(lease.lost_reason) is LeaseLostError
    assert await lease.lost is lease.lost_reason
    assert not lease.held
    assert session.lost_reason is None  # only the lease was lost


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_lock_loss_cancels_the_lock_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    task, body, lock = await hold_in_block(session.mutex("job"))
    await admin.semaphore("job").delete(force=True)  # a mutex is a semaphore

    with pytest.raises(LeaseLostError):
        await within(task)
    assert not body.finished
    assert isinstance(lock.lost_reason, LeaseLostError)
    relock = await session.mutex("job").try_lock()  # the local turn was given back
    assert relock is not None
    assert relock.token > lock.token


async def test_leadership_loss_cancels_the_campaign_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    task, body, leadership = await hold_in_block(session.election("primary").campaign(b"me"))
    await admin.semaphore("primary").delete(force=True)

    with pytest.raises(LeaderChangedError):
        await within(task)
    assert not body.finished
    assert isinstance(leadership.lost_reason, LeaderChangedError)
    assert await leadership.lost is leadership.lost_reason
    assert await session.election("primary").leader() is None


@pytest.mark.parametrize("kind", ["lease", "lock", "leadership"])
async def test_session_expiry_ends_every_holder_with_session_expired(
    client: tenure.Client, node: str, expire: Expire, kind: str
) -> None:
    session = await client.session(node, recovery_window=15.0)
    await session.semaphore("pool").create(limit=1)
    held: tenure.Lease
    if kind == "lease":
        held = await session.semaphore("pool").acquire()
    elif kind == "lock":
        held = await session.mutex("job").lock()
    else:
        held = await session.election("primary").campaign(b"me")

    task, body, _ = await hold_in_block(held)
    await expire(session)

    with pytest.raises(SessionExpiredError):  # not LeaderChangedError: the session went
        await within(task)
    assert not body.finished
    assert type(held.lost_reason) is SessionExpiredError


async def test_nested_blocks_each_raise_the_loss_error(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    """Session and lock lost at once: the innermost block raises the loss error.

    The task is cancelled once; the lock block turns that into SessionExpiredError
    (the lock's own loss reason), and the session block lets it pass.
    """
    sessions: list[tenure.Session] = []
    locks: list[tenure.Lock] = []
    inner: list[BaseException] = []

    async def block(body: Body) -> None:
        async with client.session(node, recovery_window=15.0) as session:
            sessions.append(session)
            try:
                async with session.mutex("job") as lock:
                    locks.append(lock)
                    await body.run()
            except BaseException as error:
                inner.append(error)
                raise

    task, body = await run_block(block)
    await expire(sessions[0])

    with pytest.raises(SessionExpiredError):
        await within(task)
    assert not body.finished
    assert [type(error) for error in inner] == [SessionExpiredError]
    assert isinstance(locks[0].lost_reason, SessionExpiredError)
    assert isinstance(sessions[0].lost_reason, SessionExpiredError)
