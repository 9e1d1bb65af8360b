"""Loss cancels the work.

If a session, lease, lock or leadership is lost while the body of its ``async with``
runs, the body is cancelled and the block raises the loss error (the way
``asyncio.timeout`` turns its cancellation into TimeoutError). ``.lost`` and
``.lost_reason`` tell the same news to code that is not inside such a block.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

import tenure
from tenure.errors import (
    LeaderChangedError,
    LeaseLostError,
    SessionClosedError,
    SessionExpiredError,
)
from tenure.testing import FakeClock

from .harness import Expire
from .support import settle, spawn, wait_for_waiters, within


class Body:
    """A block body that marks where it got to, and blocks until cancelled."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.finished = False

    async def run(self) -> None:
        self.entered.set()
        await asyncio.Event().wait()
        self.finished = True


async def run_block(block: Callable[[Body], Awaitable[None]]) -> tuple[asyncio.Task[None], Body]:
    body = Body()
    task = spawn(block(body))
    await within(body.entered.wait(), "the block to start")
    return task, body


# -- each kind of holder --------------------------------------------------------------


async def test_session_loss_cancels_the_session_block(
    client: tenure.Client, node: str, expire: Expire
) -> None:
    sessions: list[tenure.Session] = []

    async def block(body: Body) -> None:
        async with client.session(node, recovery_window=15.0) as session:
            sessions.append(session)
            await body.run()

    task, body = await run_block(block)
    await expire(sessions[0])

    with pytest.raises(SessionExpiredError) as raised:
        await within(task)
    assert not body.finished
    assert isinstance(raised.value.__cause__, asyncio.CancelledError)
    assert sessions[0].lost_reason is not None
    assert type(sessions[0].lost_reason) is SessionExpiredError
    assert await sessions[0].lost is sessions[0].lost_reason


async def test_lease_loss_cancels_the_lease_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    await session.semaphore("pool").create(limit=2)
    leases: list[tenure.Lease] = []

    async def block(body: Body) -> None:
        async with session.semaphore("pool").acquire(count=2) as lease:
            leases.append(lease)
            await body.run()

    task, body = await run_block(block)
    await admin.semaphore("pool").delete(force=True)

    with pytest.raises(LeaseLostError) as raised:
        await within(task)
    assert type(raised.value) is LeaseLostError
    assert not body.finished
    assert leases[0].lost_reason is not None
    assert type(leases[0].lost_reason) is LeaseLostError
    assert await leases[0].lost is leases[0].lost_reason
    assert not leases[0].held
    assert session.lost_reason is None  # only the lease was lost


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_lock_loss_cancels_the_lock_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    locks: list[tenure.Lock] = []

    async def block(body: Body) -> None:
        async with session.mutex("job") as lock:
            locks.append(lock)
            await body.run()

    task, body = await run_block(block)
    await admin.semaphore("job").delete(force=True)  # a mutex is a semaphore

    with pytest.raises(LeaseLostError):
        await within(task)
    assert not body.finished
    assert isinstance(locks[0].lost_reason, LeaseLostError)
    relock = await session.mutex("job").try_lock()  # the local turn was given back
    assert relock is not None
    assert relock.token > locks[0].token


async def test_leadership_loss_cancels_the_campaign_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    leaderships: list[tenure.Leadership] = []

    async def block(body: Body) -> None:
        async with session.election("primary").campaign(b"me") as leadership:
            leaderships.append(leadership)
            await body.run()

    task, body = await run_block(block)
    await admin.semaphore("primary").delete(force=True)

    with pytest.raises(LeaderChangedError):
        await within(task)
    assert not body.finished
    assert isinstance(leaderships[0].lost_reason, LeaderChangedError)
    assert await leaderships[0].lost is leaderships[0].lost_reason
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

    async def block(body: Body) -> None:
        async with held:
            await body.run()

    task, body = await run_block(block)
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


# -- what is and is not a loss --------------------------------------------------------


async def test_a_cancellation_from_elsewhere_stays_a_cancelled_error(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    locks: list[tenure.Lock] = []

    async def block(body: Body) -> None:
        async with session.mutex("job") as lock:
            locks.append(lock)
            await body.run()

    task, _ = await run_block(block)
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await within(task)
    assert locks[0].lost_reason is None  # released on the way out, not lost
    assert await locks[0].lost is None
    await locks[0].release()  # until the block's release is applied: then all see it
    assert await other.mutex("job").try_lock() is not None


async def test_a_body_that_swallows_the_cancellation_still_gets_the_loss_error(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    swallowed = False
    carried_on = False

    async def block(body: Body) -> None:
        nonlocal swallowed, carried_on
        async with session.mutex("job"):
            try:
                await body.run()
            except asyncio.CancelledError:
                swallowed = True
            carried_on = True

    task, _ = await run_block(block)
    await admin.semaphore("job").delete(force=True)

    with pytest.raises(LeaseLostError):
        await within(task)
    assert swallowed
    assert carried_on


async def test_a_body_that_loses_its_own_lease_gets_the_loss_error(
    client: tenure.Client, node: str
) -> None:
    """The loss is noticed while the body's own task runs: no stray CancelledError after."""
    session = await client.session(node)

    with pytest.raises(LeaseLostError):
        async with session.mutex("job"):
            await session.semaphore("job").delete(force=True)

    task = asyncio.current_task()
    assert task is not None
    assert task.cancelling() == 0
    await asyncio.sleep(0)  # no cancellation is left pending for this task
    assert await session.mutex("job").try_lock() is not None


async def test_a_body_that_closes_its_own_session_gets_session_closed(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)

    with pytest.raises(SessionClosedError):
        async with session.mutex("job"):
            await session.close()
    await asyncio.sleep(0)  # no cancellation is left pending for this task

    async with client.session(node) as again:
        assert await again.mutex("job").try_lock() is not None


async def test_a_session_closed_on_purpose_does_not_cancel_its_block(
    client: tenure.Client, node: str
) -> None:
    async with client.session(node) as session:
        await session.close()
        await asyncio.sleep(0)  # not cancelled
        assert session.closed
    assert session.lost_reason is None


async def test_a_loss_after_the_block_changes_nothing(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    await session.semaphore("pool").create(limit=1)
    async with session.semaphore("pool").acquire() as lease:
        pass
    await admin.semaphore("pool").delete(force=True)
    await settle()

    assert lease.lost_reason is None  # it was released before: nothing to lose


async def test_entering_a_lost_lease_raises_its_loss_at_once(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    lock = await session.mutex("job").lock()
    await admin.semaphore("job").delete(force=True)
    await within(lock.lost, "the loss reaching the holder")  # over a network: soon, not now
    entered = False

    with pytest.raises(LeaseLostError):
        async with lock:
            entered = True
    assert not entered
    with pytest.raises(LeaseLostError):
        lock.check()


async def test_lost_can_be_awaited_by_code_outside_any_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    lock = await session.mutex("job").lock()
    other_lock = await session.mutex("other").lock()
    watching = spawn(lock.lost)
    released = spawn(other_lock.lost)
    await settle()
    assert not watching.done()
    assert lock.lost_reason is None

    await admin.semaphore("job").delete(force=True)
    await other_lock.release()

    reason = await within(watching)
    assert isinstance(reason, LeaseLostError)
    assert reason is lock.lost_reason
    assert await within(released) is None  # a clean release is no loss


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_closing_the_client_tells_holders_session_closed(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client2.session(node)
    other = await client.session(node)
    locks: list[tenure.Lock] = []

    async def block(body: Body) -> None:
        async with session.mutex("job") as lock:
            locks.append(lock)
            await body.run()

    task, body = await run_block(block)
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    await client2.aclose()

    with pytest.raises(SessionClosedError):
        await within(task)
    assert not body.finished
    assert isinstance(locks[0].lost_reason, SessionClosedError)
    assert session.closed
    # Closed from outside (by its client), not by its own close(): a loss for it too.
    assert isinstance(session.lost_reason, SessionClosedError)
    assert (await within(waiting)).token > locks[0].token
    with pytest.raises(SessionClosedError):
        await client2.session(node)


async def test_a_wait_inside_a_session_block_ends_with_the_session(
    client: tenure.Client, client2: tenure.Client, node: str, expire: Expire
) -> None:
    holder = await client2.session(node)
    await holder.mutex("job").lock()
    sessions: list[tenure.Session] = []
    started = asyncio.Event()

    async def block() -> None:
        async with client.session(node, recovery_window=5.0) as session:
            sessions.append(session)
            started.set()
            await session.mutex("job").lock()

    task = spawn(block())
    await within(started.wait())
    await wait_for_waiters(holder, "job", 1)

    await expire(sessions[0])

    with pytest.raises(SessionExpiredError):
        await within(task)


async def test_a_body_error_raised_during_a_loss_wins_and_the_task_stays_protected(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """A body that turns the cancellation into its own error keeps that error; the
    task's cancellation count is restored, and a later loss still cancels it."""
    session = await client.session(node)
    admin = await client2.session(node)
    first_entered, second_entered = asyncio.Event(), asyncio.Event()
    cancelling_between: list[int] = []
    first_errors: list[ValueError] = []

    async def block() -> None:
        try:
            async with session.mutex("first"):
                first_entered.set()
                try:
                    await asyncio.Event().wait()
                except asyncio.CancelledError:
                    raise ValueError("cleanup failed") from None
        except ValueError as error:
            first_errors.append(error)
        task = asyncio.current_task()
        assert task is not None
        cancelling_between.append(task.cancelling())
        async with session.mutex("second"):
            second_entered.set()
            await asyncio.Event().wait()

    task = spawn(block())
    await within(first_entered.wait())
    await admin.semaphore("first").delete(force=True)
    await within(second_entered.wait())
    assert [str(error) for error in first_errors] == ["cleanup failed"]
    assert cancelling_between == [0]

    await admin.semaphore("second").delete(force=True)

    with pytest.raises(LeaseLostError):
        await within(task, "the second loss to cancel the body")


@pytest.mark.requires(tenure.Capability.LEASE_TTL, tenure.Capability.FENCING_TOKENS)
async def test_a_lease_not_renewed_within_its_ttl_is_lost(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    """The node's ``default_lease`` gives every grant a TTL the client must renew.

    The client renews on its own loop's time; the backend's fake clock jumps past
    the TTL at once, as if the holder had been paused too long to renew.
    """
    await client.alter_node(node, default_lease=10.0)
    session = await client.session(node)
    other = await client2.session(node)
    locks: list[tenure.Lock] = []

    async def block(body: Body) -> None:
        async with session.mutex("job") as lock:
            locks.append(lock)
            await body.run()

    task, body = await run_block(block)
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    await clock.advance(10.5)

    with pytest.raises(LeaseLostError):
        await within(task)
    assert not body.finished
    assert isinstance(locks[0].lost_reason, LeaseLostError)
    assert session.lost_reason is None  # only the lease ran out, not the session
    assert (await within(waiting)).token > locks[0].token


async def test_closing_the_client_cancels_a_session_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    entered = asyncio.Event()
    finished = False

    async def block() -> None:
        nonlocal finished
        async with client2.session(node) as session:
            entered.set()
            await asyncio.Event().wait()
            finished = True
        assert session.closed

    task = spawn(block())
    await within(entered.wait())
    await client2.aclose()
    with pytest.raises(SessionClosedError):
        await within(task)
    assert not finished
