"""What is and is not a loss, for a block that loss cancels (``test_loss.py``).

A cancellation from elsewhere stays a CancelledError; a body that swallows the
cancellation, or loses its own lease or closes its own session, still gets the
loss error; a session closed on purpose, a loss after the block, and a lost lease
entered anew each behave as documented; closing the client ends every block.
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import (
    LeaseLostError,
    SessionClosedError,
    SessionExpiredError,
)
from tenure.testing import FakeClock

from .harness import Expire
from .support import Body, hold_in_block, run_block, settle, spawn, wait_for_waiters, within

# -- what is and is not a loss --------------------------------------------------------


async def test_a_cancellation_from_elsewhere_stays_a_cancelled_error(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    task, _, lock = await hold_in_block(session.mutex("job"))
    task.cancel()

    with pytest.raises(asyncio.CancelledError):
        await within(task)
    assert lock.lost_reason is None  # released on the way out, not lost
    assert await lock.lost is None
    await lock.release()  # until the block's release is applied: then all see it
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
    task, body, lock = await hold_in_block(session.mutex("job"))
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    await client2.aclose()

    with pytest.raises(SessionClosedError):
        await within(task)
    assert not body.finished
    assert isinstance(lock.lost_reason, SessionClosedError)
    assert session.closed
    # Closed from outside (by its client), not by its own close(): a loss for it too.
    assert isinstance(session.lost_reason, SessionClosedError)
    assert (await within(waiting)).token > lock.token
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
    task, body, lock = await hold_in_block(session.mutex("job"))
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(other, "job", 1)

    await clock.advance(10.5)

    with pytest.raises(LeaseLostError):
        await within(task)
    assert not body.finished
    assert isinstance(lock.lost_reason, LeaseLostError)
    assert session.lost_reason is None  # only the lease ran out, not the session
    assert (await within(waiting)).token > lock.token


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
