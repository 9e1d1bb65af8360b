"""Mutexes: exclusive locks with fencing tokens, in both forms."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.testing import FakeClock

from .harness import Expire
from .support import (
    eventually,
    exists,
    owners,
    settle,
    spawn,
    wait_for_owner,
    wait_for_waiters,
    waiters,
    within,
)


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_async_with_holds_the_lock_for_the_block(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)

    async with session.mutex("job") as lock:
        assert isinstance(lock, tenure.Lock)
        assert lock.token > 0
        assert lock.held
        assert await owners(other, "job") == [session.id]
        assert await other.mutex("job").try_lock() is None

    assert not lock.held
    assert lock.lost_reason is None
    assert await lock.lost is None
    # Leaving the block started the release; this client's next request comes after
    # it, another client's once it is applied: release() waits for that.
    await lock.release()
    assert await other.mutex("job").try_lock() is not None


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_after_a_block_this_clients_next_request_finds_the_lock_free(
    client: tenure.Client, node: str
) -> None:
    """Leaving ``async with`` need not wait for the release's answer (docs/concepts.md,
    "Releasing"), but what the same client asks next is served after it: by another
    session of the client, or by the same one."""
    one = await client.session(node)
    two = await client.session(node)
    last = 0
    for _ in range(10):
        async with one.mutex("job") as lock:
            assert lock.token > last
        again = await two.mutex("job").try_lock()
        assert again is not None, "another session of the client found the lock taken"
        await again.release()
        async with one.mutex("job").lock(timeout=0) as mine:  # the same session, at once
            last = mine.token
        assert last > again.token > lock.token
    await mine.release()
    assert await owners(one, "job") == []


async def test_awaitable_lock_and_idempotent_release(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)

    lock = await session.mutex("job").lock(timeout=5.0, data=b"me")
    description = await other.semaphore("job").describe(owners=True)
    assert [(o.session_id, o.data, o.token) for o in description.owners] == [
        (session.id, b"me", lock.token)
    ]

    await lock.release()
    await lock.release()

    assert not lock.held
    assert lock.lost_reason is None
    assert not await exists(other, "job")  # a mutex is ephemeral: gone with its holder


async def test_async_with_lock_with_a_timeout(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)

    async with session.mutex("job").lock(timeout=5.0, data=b"w1") as lock:
        assert lock.held
        description = await other.semaphore("job").describe(owners=True)
        assert [(o.session_id, o.data) for o in description.owners] == [(session.id, b"w1")]

    assert not lock.held
    await lock.release()  # until the block's release is applied (see above)
    assert not await exists(other, "job")


async def test_a_mutex_has_one_holder_and_one_token_count(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    async with session.mutex("job"):
        description = await session.semaphore("job").describe(owners=True)
    assert description.ephemeral
    assert description.count == description.limit == tenure.MAX_COUNT
    assert len(description.owners) == 1


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_try_lock_returns_none_when_busy(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    lock = await session.mutex("job").try_lock()
    assert lock is not None

    assert await other.mutex("job").try_lock() is None
    assert await waiters(session, "job") == []  # a try never queues

    await lock.release()
    again = await other.mutex("job").try_lock()
    assert again is not None
    assert again.token > lock.token


async def test_lock_with_timeout_zero_only_tries(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    lock = await session.mutex("job").lock(timeout=0)

    with pytest.raises(TimeoutError):
        await other.mutex("job").lock(timeout=0)
    assert await waiters(session, "job") == []
    await lock.release()


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_waiter_gets_the_lock_when_it_is_released(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()

    waiting = spawn(other.mutex("job").lock(data=b"next"))
    assert await wait_for_waiters(session, "job", 1) == [other.id]
    assert not waiting.done()

    await lock.release()

    granted = await within(waiting)
    assert granted.token > lock.token
    assert await owners(session, "job") == [other.id]


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_tasks_of_one_session_take_turns_in_order(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    inside = 0
    order: list[tuple[int, int]] = []

    async def worker(i: int) -> None:
        nonlocal inside
        async with session.mutex("job") as lock:
            inside += 1
            assert inside == 1, "two tasks of one session held the mutex together"
            order.append((i, lock.token))
            await settle(5)
            inside -= 1

    first = await session.mutex("job").lock()
    tasks = []
    for i in range(4):
        tasks.append(spawn(worker(i)))
        await settle(5)  # arrival order: 0, 1, 2, 3
    assert order == []

    await first.release()
    await within(asyncio.gather(*tasks))

    assert [i for i, _ in order] == [0, 1, 2, 3]
    tokens = [token for _, token in order]
    assert tokens == sorted(tokens)
    assert len(set(tokens)) == 4
    assert tokens[0] > first.token


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_try_lock_does_not_jump_a_local_waiter_after_a_release(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    first = await session.mutex("job").lock()
    queued = spawn(session.mutex("job").lock())
    await settle()

    await first.release()
    # The lock is promised to the queued task: a try must say busy, not wait for it.
    assert await within(session.mutex("job").try_lock(), "try_lock") is None

    second = await within(queued)
    assert second.token > first.token
    await second.release()


async def test_a_second_task_of_a_session_waits_by_the_backend_clock(
    client: tenure.Client, node: str, clock: FakeClock
) -> None:
    """Tasks of one session queue at the backend, whose clock ends their wait."""
    session = await client.session(node)
    first = await session.mutex("job").lock()
    waiting = spawn(session.mutex("job").lock(timeout=5.0))
    assert await wait_for_waiters(session, "job", 1) == [session.id]
    await clock.advance(4.9)
    assert not waiting.done()
    await clock.advance(0.2)
    with pytest.raises(TimeoutError):
        await within(waiting)
    assert first.held
    assert await waiters(session, "job") == []


async def test_tasks_of_one_session_hold_a_semaphore_side_by_side(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.semaphore("pool").create(limit=3)

    async def hold_one() -> tenure.Lease:
        return await session.semaphore("pool").acquire(1)

    mine = await within(asyncio.gather(hold_one(), hold_one()))
    assert len({lease.token for lease in mine}) == 2
    assert await owners(other, "pool") == [session.id, session.id]
    queued = spawn(other.semaphore("pool").acquire(3))
    await wait_for_waiters(other, "pool", 1)
    await mine[0].release()
    await settle()
    assert not queued.done()  # two tokens free, three asked
    assert await owners(other, "pool") == [session.id]
    await mine[1].release()
    assert (await within(queued)).count == 3


async def test_lock_timeout_is_decided_by_the_backend_clock(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    await session.mutex("job").lock()

    waiting = spawn(other.mutex("job").lock(timeout=5.0))
    await wait_for_waiters(session, "job", 1)
    await clock.advance(4.9)
    assert not waiting.done()
    assert await waiters(session, "job") == [other.id]

    await clock.advance(0.2)

    with pytest.raises(TimeoutError):
        await within(waiting)
    assert await waiters(session, "job") == []
    assert await owners(session, "job") == [session.id]


async def test_a_cancelled_wait_leaves_no_waiter_and_no_hold(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(session, "job", 1)

    waiting.cancel()

    with pytest.raises(asyncio.CancelledError):
        await within(waiting)
    assert await waiters(session, "job") == []
    await lock.release()
    assert not await exists(session, "job")  # nobody got it: the cancelled wait is gone
    assert await other.mutex("job").try_lock() is not None  # and its gate was freed


async def test_a_wait_cancelled_as_it_is_granted_leaves_no_hold(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    lock = await session.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(session, "job", 1)

    waiting.cancel()  # the cancellation and the grant race:
    await lock.release()  # on memory:// the grant lands before the task wakes

    with pytest.raises(asyncio.CancelledError):
        await within(waiting)

    async def freed() -> bool:
        return not await exists(session, "job")

    await eventually(freed, "the raced grant to be given back")
    relock = await session.mutex("job").try_lock()
    assert relock is not None


@pytest.mark.requires(tenure.Capability.LOCK_DELAY)
async def test_lock_delay_holds_back_the_tokens_of_an_expired_holder(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock, expire: Expire
) -> None:
    await client.alter_node(node, lock_delay=5.0)
    holder = await client.session(node, recovery_window=10.0)
    other = await client2.session(node)
    observer = await client2.session(node)
    await holder.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(observer, "job", 1)

    await expire(holder)  # expires at t=10, the delay runs to t=15

    assert await owners(observer, "job") == []
    assert await waiters(observer, "job") == [other.id]
    assert await observer.mutex("job").try_lock() is None
    await clock.advance(3.5)  # t=14.5 (expire() advanced 11)
    assert not waiting.done()
    assert await owners(observer, "job") == []

    await clock.advance(1.0)

    await within(waiting)
    await wait_for_owner(observer, "job", other)


@pytest.mark.requires(tenure.Capability.LOCK_DELAY)
async def test_lock_delay_does_not_apply_to_a_clean_release(
    client: tenure.Client, client2: tenure.Client, node: str, clock: FakeClock
) -> None:
    await client.alter_node(node, lock_delay=5.0)
    holder = await client.session(node)
    other = await client2.session(node)
    lock = await holder.mutex("job").lock()
    waiting = spawn(other.mutex("job").lock())
    await wait_for_waiters(holder, "job", 1)

    await lock.release()

    await within(waiting)  # no clock.advance needed
    assert await owners(holder, "job") == [other.id]
