"""Reentrant mutexes: ``session.mutex(name, reentrant=True)`` nests for the task that holds it.

One hold in the backend and one fencing token however deep the nesting; the hold is
released when the last acquisition is (the outermost block); another task, even of
the same session, queues; a loss cancels every nested block; a plain hold and a
reentrant one of the same name by one task refuse each other; nesting is capped.
The mutex is the plain one's semaphore, so this holds wherever mutexes do.
"""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import (
    InvalidArgumentError,
    LeaseLostError,
    LimitExceededError,
    PreconditionFailedError,
    SessionClosedError,
)

from .support import describe, eventually, owners, settle, spawn, wait_for_waiters, waiters, within


async def freed(session: tenure.Session, name: str) -> None:
    """Until the backend shows ``name`` free (a block's release may still be on its way)."""

    async def free() -> bool:
        return await owners(session, name) == []

    await eventually(free, f"{name!r} released")


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_nesting_keeps_one_hold_and_one_token(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    async with (
        session.mutex("job", reentrant=True) as a,
        session.mutex("job", reentrant=True) as b,
    ):
        assert isinstance(a, tenure.Lock)
        assert isinstance(b, tenure.Lock)
        assert a is not b
        assert a.token == b.token > 0
        c = await within(session.mutex("job", reentrant=True).lock(timeout=5.0))
        d = await within(session.mutex("job", reentrant=True).try_lock())
        assert d is not None
        assert c.token == d.token == a.token
        description = await describe(other, "job")
        assert description is not None
        assert [(o.session_id, o.token) for o in description.owners] == [(session.id, a.token)]
        assert description.waiters == ()
        mutex = await other.mutex("job").describe()
        assert mutex.held
        assert mutex.owner is not None
        assert mutex.owner.token == a.token
        await c.release()
        await d.release()
        assert a.held
        assert b.held
    assert not a.held
    assert not b.held
    assert a.lost_reason is None
    assert b.lost_reason is None
    await freed(other, "job")


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_inner_exits_keep_the_lock_and_the_outermost_releases_it(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    waiting: asyncio.Task[tenure.Lock] | None = None
    async with session.mutex("job", reentrant=True) as outer:
        async with session.mutex("job", reentrant=True):
            async with session.mutex("job", reentrant=True) as inner:
                assert inner.token == outer.token
                waiting = spawn(other.mutex("job").lock())
                assert await wait_for_waiters(session, "job", 1) == [other.id]
            assert not inner.held
            assert outer.held
            await settle()
            assert await other.mutex("job").try_lock() is None
            assert await owners(other, "job") == [session.id]
        assert outer.held
        assert await other.mutex("job").try_lock() is None
        assert not waiting.done()
        assert await waiters(other, "job") == [other.id]
    assert not outer.held
    granted = await within(waiting, "the other session's lock after the outermost exit")
    assert granted.token > outer.token
    assert await owners(session, "job") == [other.id]


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_each_acquisition_counts_down_once_in_any_order(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    """The awaitable forms: each handle's release counts the hold down once (again does
    nothing); the hold goes with the last handle, whichever was taken first."""
    session = await client.session(node)
    other = await client2.session(node)
    mutex = session.mutex("job", reentrant=True)
    first = await within(mutex.lock(data=b"first"))
    second = await within(mutex.try_lock())
    third = await within(session.mutex("job", reentrant=True).lock(timeout=0))
    assert second is not None
    assert first.token == second.token == third.token
    assert second.data == third.data == b"first"  # the hold's data: nested ones keep it

    await first.release()
    await first.release()  # idempotent per handle: not a second count down
    assert not first.held
    assert second.held
    assert third.held
    assert await other.mutex("job").try_lock() is None
    async with third:  # a handle in a block: leaving it is its release
        pass
    assert not third.held
    assert second.held
    await third.release()  # released already by the block: nothing more
    assert await other.mutex("job").try_lock() is None
    assert await owners(other, "job") == [session.id]

    await second.release()
    taken = await within(other.mutex("job").try_lock())
    assert taken is not None
    assert taken.token > first.token


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_another_task_of_the_session_does_not_share_the_hold(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    async with session.mutex("job", reentrant=True) as held:
        # A task started inside the block is a caller of its own: it queues.
        tried = await within(asyncio.create_task(_try(session)))
        assert tried is None
        assert await waiters(session, "job") == []  # a try never queues
        child = spawn(session.mutex("job", reentrant=True).lock())
        assert await wait_for_waiters(session, "job", 1) == [session.id]
        plain = spawn(session.mutex("job").lock())
        await wait_for_waiters(session, "job", 2)
        async with session.mutex("job", reentrant=True) as nested:  # this task still nests
            assert nested.token == held.token
        assert not child.done()
        assert not plain.done()
    got = await within(child, "the child task's lock after the block")
    assert got.token > held.token
    assert not plain.done()  # the child's hold is its own: the next waiter still waits
    await got.release()
    assert (await within(plain)).token > got.token


async def _try(session: tenure.Session) -> tenure.Lock | None:
    return await session.mutex("job", reentrant=True).try_lock()


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_a_loss_cancels_every_nested_block_then_a_new_hold_starts_afresh(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    admin = await client2.session(node)
    entered = asyncio.Event()
    reached: list[str] = []
    handles: list[tenure.Lock] = []

    async def nested() -> tenure.Lock:
        try:
            async with session.mutex("job", reentrant=True) as outer:
                handles.append(outer)
                try:
                    async with session.mutex("job", reentrant=True) as inner:
                        handles.append(inner)
                        entered.set()
                        await asyncio.Event().wait()
                        reached.append("inner body ended")
                except LeaseLostError:
                    reached.append("inner block raised the loss")
                    raise
                reached.append("outer body went on")
        except LeaseLostError:
            reached.append("outer block raised the loss")
        # The session forgot the lost hold: this task's next reentrant acquire is a
        # new hold, asked of the backend, with a new token.
        return await session.mutex("job", reentrant=True).lock()

    task = spawn(nested())
    await within(entered.wait(), "the nested blocks to start")
    await admin.semaphore("job").delete(force=True)

    again = await within(task)
    assert reached == ["inner block raised the loss", "outer block raised the loss"]
    assert all(isinstance(h.lost_reason, LeaseLostError) for h in handles)
    assert not any(h.held for h in handles)
    assert again.held
    assert again.token > handles[0].token
    assert await owners(admin, "job") == [session.id]
    assert await admin.mutex("job").try_lock() is None
    await again.release()
    await freed(admin, "job")


async def test_the_sessions_end_ends_every_nested_acquisition(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    outer = await session.mutex("job", reentrant=True).lock()
    inner = await session.mutex("job", reentrant=True).lock()
    await session.close()
    assert isinstance(outer.lost_reason, SessionClosedError)
    assert isinstance(inner.lost_reason, SessionClosedError)
    with pytest.raises(SessionClosedError):
        await session.mutex("job", reentrant=True).lock()


async def test_plain_and_reentrant_holds_of_one_task_refuse_each_other(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    async with session.mutex("job") as plain:
        with pytest.raises(PreconditionFailedError, match="not reentrant"):
            await within(session.mutex("job", reentrant=True).lock())
        with pytest.raises(PreconditionFailedError, match="not reentrant"):
            await within(session.mutex("job", reentrant=True).try_lock())
        assert plain.held
        assert await waiters(session, "job") == []  # refused before anything was sent
    await freed(session, "job")

    async with session.mutex("job", reentrant=True) as held:
        for refused in (
            session.mutex("job").lock(),
            session.mutex("job").try_lock(),
            session.lock_all(["job", "other"]),
            session.rwlock("job").read(),
        ):
            with pytest.raises(PreconditionFailedError, match="reentrant mutex"):
                await within(refused)
        assert held.held
        assert await waiters(session, "job") == []
        assert await owners(session, "other") == []
    await freed(session, "job")
    # Neither refusal left anything behind: the plain mutex is free for this task.
    assert (await within(session.mutex("job").lock(timeout=5.0))).held


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_nesting_deeper_than_max_depth_is_refused(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    other = await client2.session(node)
    mutex = session.mutex("job", reentrant=True, max_depth=3)
    assert mutex.max_depth == 3
    handles = [await within(mutex.lock()) for _ in range(3)]
    with pytest.raises(LimitExceededError, match="max_depth"):
        await mutex.lock()
    with pytest.raises(LimitExceededError, match="max_depth"):
        await mutex.try_lock()
    assert all(h.held and h.token == handles[0].token for h in handles)
    await handles[0].release()
    fourth = await within(mutex.lock())  # back under the limit
    assert fourth.token == handles[0].token
    for handle in [*handles[1:], fourth]:
        await handle.release()
    assert (await within(other.mutex("job").lock(timeout=5.0))).token > fourth.token


async def test_the_default_depth_limit_is_max_reentrant_depth(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    mutex = session.mutex("job", reentrant=True)
    assert mutex.max_depth == tenure.MAX_REENTRANT_DEPTH
    handles = [await mutex.lock() for _ in range(tenure.MAX_REENTRANT_DEPTH)]
    assert len({h.token for h in handles}) == 1
    with pytest.raises(LimitExceededError, match="MAX_REENTRANT_DEPTH"):
        await session.mutex("job", reentrant=True).lock()
    # A mutex object with a larger max_depth nests deeper in the same hold.
    deeper = await session.mutex("job", reentrant=True, max_depth=1001).lock()
    assert deeper.token == handles[0].token
    for handle in [*handles, deeper]:
        await handle.release()
    await freed(session, "job")


async def test_restating_a_nested_acquisition_changes_the_holds_data_only(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    async with (
        session.mutex("job", reentrant=True).lock(data=b"v1") as outer,
        session.mutex("job", reentrant=True) as inner,
    ):
        await inner.restate(data=b"v2")
        assert outer.data == inner.data == b"v2"
        assert outer.token == inner.token
        description = await describe(session, "job")
        assert description is not None
        assert description.owners[0].data == b"v2"
        with pytest.raises(PreconditionFailedError, match="reentrant"):
            await inner.restate(1)
        assert inner.held
        assert inner.count == tenure.MAX_COUNT


async def test_bad_reentrant_arguments_are_refused_at_once(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    with pytest.raises(InvalidArgumentError, match="reentrant"):
        session.mutex("job", reentrant="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="max_depth"):
        session.mutex("job", max_depth=5)  # only with reentrant=True
    for bad in (0, -1, 2.5, True):
        with pytest.raises(InvalidArgumentError, match="max_depth"):
            session.mutex("job", reentrant=True, max_depth=bad)  # type: ignore[arg-type]
    assert session.mutex("job").max_depth is None
    assert await describe(session, "job") is None
