"""Everyday usage that should work, or fail loudly instead of hanging."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import PreconditionFailedError

from .support import owners, within


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_openings_are_coroutines_for_create_task(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    task = asyncio.create_task(session.mutex("job").lock())
    lock = await within(task)
    assert isinstance(lock, tenure.Lock)
    async with asyncio.TaskGroup() as tasks:
        leased = tasks.create_task(session.semaphore("pool").acquire(ephemeral=True))
    assert leased.result().token > lock.token
    assert await owners(session, "job") == [session.id]


async def test_an_unawaited_opening_leaves_no_trace(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    opening = session.mutex("job").lock()
    del opening  # never awaited: nothing acquired, and (filterwarnings=error) no warning
    assert await session.mutex("job").try_lock() is not None


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_relocking_in_the_same_task_is_an_error_not_a_deadlock(
    client: tenure.Client, node: str
) -> None:
    session = await client.session(node)
    async with session.mutex("job") as lock:
        with pytest.raises(PreconditionFailedError, match="not reentrant"):
            await within(session.mutex("job").lock())
        assert lock.held
    # Released: the same task may lock it again.
    again = await within(session.mutex("job").lock())
    assert again.token > lock.token


@pytest.mark.requires(tenure.Capability.FENCING_TOKENS)
async def test_another_task_of_the_session_waits_its_turn(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    first = await session.mutex("job").lock()
    second = asyncio.create_task(session.mutex("job").lock())
    await asyncio.sleep(0)
    assert not second.done()
    await first.release()
    lock = await within(second)
    assert lock.token > first.token


async def test_entering_a_released_lease_is_refused(client: tenure.Client, node: str) -> None:
    session = await client.session(node)
    lock = await session.mutex("job").lock()
    await lock.release()
    with pytest.raises(PreconditionFailedError, match="released"):
        async with lock:
            pytest.fail("the body must not run unprotected")
