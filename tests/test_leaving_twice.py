"""Leaving a block twice does what releasing twice does: nothing, on both faces.

A second ``__exit__``/``__aexit__`` (an ExitStack unwound twice, a framework that
exits defensively) used to raise a bare KeyError or IndexError. The first exit
releases (and reports a loss, if any); every later one is a no-op, like a second
``release()``. The logic is the client's, the same on every backend: memory:// is
enough.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

import tenure
import tenure.sync
from tenure.errors import LeaseLostError

NODE = "app"


@pytest.fixture
async def client() -> AsyncIterator[tenure.Client]:
    async with tenure.connect("memory://") as client:
        await client.create_node(NODE)
        yield client


async def free(session: tenure.Session, name: str) -> bool:
    """Whether ``name`` has no owner now (another session could take it at once)."""
    description = await session.semaphore(name).describe(owners=True)
    return description.owners == ()


async def test_async_lease_left_twice_is_released_once(client: tenure.Client) -> None:
    session = await client.session(NODE)
    await session.semaphore("pool").create(limit=1)
    opening = session.semaphore("pool").acquire()
    async with opening as lease:
        assert lease.held
    assert not lease.held
    assert await lease.__aexit__(None, None, None) is None
    assert await opening.__aexit__(None, None, None) is None
    await lease.release()  # and a release after both exits: still nothing
    assert await free(session, "pool")
    again = await session.semaphore("pool").acquire(timeout=0)
    assert again.token > lease.token


async def test_async_mutex_left_twice(client: tenure.Client) -> None:
    session = await client.session(NODE)
    mutex = session.mutex("job")
    async with mutex as lock:
        assert lock.held
    await mutex.__aexit__(None, None, None)
    assert not lock.held
    other = await client.session(NODE)
    taken = await other.mutex("job").try_lock()
    assert taken is not None
    # A stray exit of the first session's mutex must not release the other's lock.
    assert await mutex.__aexit__(None, None, None) is None
    assert taken.held
    assert not await free(other, "job")


async def test_async_lost_lease_reports_its_loss_once(client: tenure.Client) -> None:
    session, other = await client.session(NODE), await client.session(NODE)
    await session.semaphore("pool").create(limit=2)
    lease = await session.semaphore("pool").acquire()

    async def lose_it_inside_a_block() -> None:
        async with lease:
            await other.semaphore("pool").delete(force=True)
            await asyncio.wait_for(lease.lost, 5)
            await asyncio.sleep(0)  # the loss cancels the body here

    with pytest.raises(LeaseLostError):
        await lose_it_inside_a_block()
    assert isinstance(lease.lost_reason, LeaseLostError)
    await lease.__aexit__(None, None, None)  # told once, not again
    await lease.release()  # and a release of a lost lease does nothing either


async def test_async_session_left_twice(client: tenure.Client) -> None:
    async with client.session(NODE) as session:
        await session.mutex("job").lock()
    await session.__aexit__(None, None, None)
    other = await client.session(NODE)
    assert await other.mutex("job").try_lock() is not None


def test_sync_faces_left_twice() -> None:
    with tenure.sync.connect("memory://") as client:
        client.create_node(NODE)
        session, other = client.session(NODE), client.session(NODE)
        mutex = session.mutex("job")
        with mutex as lock:
            assert lock.held
        mutex.__exit__(None, None, None)  # was: KeyError
        lock.__exit__(None, None, None)
        lock.release()
        taken = other.mutex("job").try_lock()
        assert taken is not None
        mutex.__exit__(None, None, None)  # a stray exit leaves the other's lock alone
        assert taken.held
        taken.release()

        with session.semaphore("pool").acquire(ephemeral=True) as lease:
            assert lease.held
        lease.__exit__(None, None, None)
        assert not lease.held
        assert other.semaphore("pool").try_acquire(ephemeral=True) is not None

        with session:
            pass
        session.__exit__(None, None, None)
        assert session.ended


def test_sync_lost_lease_reports_its_loss_once() -> None:
    with tenure.sync.connect("memory://") as client:
        client.create_node(NODE)
        session, other = client.session(NODE), client.session(NODE)
        session.semaphore("pool").create(limit=2)
        lease = session.semaphore("pool").acquire()

        def lose_it_inside_a_block() -> None:
            with lease:
                other.semaphore("pool").delete(force=True)
                assert lease.lost.wait(5)

        with pytest.raises(LeaseLostError):
            lose_it_inside_a_block()
        lease.__exit__(None, None, None)  # told once, not again
        lease.release()
        assert isinstance(lease.lost_reason, LeaseLostError)


async def test_async_client_closed_and_left_twice() -> None:
    client = tenure.connect("memory://")
    async with client as opened:
        await opened.create_node(NODE)
    await opened.aclose()
    await opened.__aexit__(None, None, None)


def test_sync_client_closed_and_left_twice() -> None:
    with tenure.sync.connect("memory://") as client:
        client.create_node(NODE)
        session = client.session(NODE)
        session.close()
        session.close()
    client.close()
    client.__exit__(None, None, None)


async def test_async_nested_reentrant_blocks_left_twice_count_down_once(
    client: tenure.Client,
) -> None:
    """An inner block left twice leaves the outer one held, when each block has its own
    object or its own lock: its second exit is told from the outer's exit."""
    session, other = await client.session(NODE), await client.session(NODE)
    outer_mutex = session.mutex("job", reentrant=True)
    outer = await outer_mutex.__aenter__()
    for inner_block in (session.mutex("job", reentrant=True), outer_mutex.lock()):
        inner = await inner_block.__aenter__()
        assert inner.token == outer.token
        await inner_block.__aexit__(None, None, None)
        assert await inner_block.__aexit__(None, None, None) is None  # nothing
        assert not inner.held
        assert outer.held
        assert await other.mutex("job").try_lock() is None
    await outer_mutex.__aexit__(None, None, None)
    assert not outer.held
    taken = await other.mutex("job").try_lock()
    assert taken is not None
    await outer_mutex.__aexit__(None, None, None)  # no block open: nothing
    assert taken.held


async def test_async_plain_lock_block_left_twice(client: tenure.Client) -> None:
    session, other = await client.session(NODE), await client.session(NODE)
    block = session.mutex("job").lock()
    async with block as lock:
        assert lock.held
    await block.__aexit__(None, None, None)
    taken = await other.mutex("job").try_lock()
    assert taken is not None
    await block.__aexit__(None, None, None)  # a stray exit leaves the other's lock alone
    assert taken.held


def test_sync_nested_reentrant_blocks_left_twice_count_down_once() -> None:
    with tenure.sync.connect("memory://") as client:
        client.create_node(NODE)
        session, other = client.session(NODE), client.session(NODE)
        outer_mutex = session.mutex("job", reentrant=True)
        outer = outer_mutex.__enter__()
        for inner_block in (session.mutex("job", reentrant=True), outer_mutex.lock()):
            inner = inner_block.__enter__()
            assert inner.token == outer.token
            inner_block.__exit__(None, None, None)
            inner_block.__exit__(None, None, None)  # nothing
            assert not inner.held
            assert outer.held
            assert other.mutex("job").try_lock() is None
        outer_mutex.__exit__(None, None, None)
        assert not outer.held
        outer.release()  # (until the block's release is applied)
        taken = other.mutex("job").try_lock()
        assert taken is not None
        outer_mutex.__exit__(None, None, None)  # no block open: nothing
        assert taken.held


def test_sync_a_new_thread_does_not_leave_the_block_an_ended_thread_left_open() -> None:
    """Python recycles an ended thread's ident (CPython on Linux: at once): a stray
    exit from the next thread must not leave (and release) the ended thread's block."""
    with tenure.sync.connect("memory://") as client:
        client.create_node(NODE)
        session, other = client.session(NODE), client.session(NODE)
        mutex = session.mutex("job")
        entered: list[tenure.sync.Lock] = []
        for target in (
            lambda: entered.append(mutex.__enter__()),  # ends with its block open
            lambda: mutex.__exit__(None, None, None),  # this thread has none open
        ):
            thread = threading.Thread(target=target)
            thread.start()
            thread.join(timeout=30)
        [lock] = entered
        assert lock.held
        assert other.mutex("job").try_lock() is None
        lock.release()
