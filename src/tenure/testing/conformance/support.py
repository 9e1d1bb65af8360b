"""Helpers of the API suite that work the same on every backend.

They wait on the backend's own state (``describe``) or on tasks, never on
wall-clock sleeps: on ``memory://`` everything they wait for has happened after a
few turns of the event loop; a networked backend gets a few seconds, polled.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TypeVar

import tenure
from tenure.errors import NotFoundError

T = TypeVar("T")

#: How long a networked backend may take to show something (never reached on memory://).
PATIENCE = 5.0


async def settle(turns: int = 50) -> None:
    """Let every ready task run (a few loop turns; no time passes)."""
    for _ in range(turns):
        await asyncio.sleep(0)


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Wait until ``check()`` is true; fail naming ``what`` if it never becomes so."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE
    polls = 0
    while not await check():
        if loop.time() > deadline:
            raise AssertionError(f"never happened: {what}")
        polls += 1
        await asyncio.sleep(0 if polls < 200 else 0.005)


async def within(awaitable: Awaitable[T], what: str = "the operation") -> T:
    """Await ``awaitable``, failing (instead of hanging) if it takes unreasonably long."""
    guard = asyncio.timeout(PATIENCE)
    try:
        async with guard:
            return await awaitable
    except TimeoutError:
        # Only the guard's expiry is a hang; a TimeoutError from inside is the result.
        if guard.expired():
            raise AssertionError(f"{what} did not finish in {PATIENCE}s") from None
        raise


def spawn(awaitable: Awaitable[T]) -> asyncio.Task[T]:
    """Run ``awaitable`` in a task (from the next turn of the loop).

    Takes any awaitable: ``lock()``, ``acquire()`` and ``campaign()`` return an
    ``Opening``, which ``asyncio.create_task`` refuses (it is not a coroutine).
    """

    async def run() -> T:
        return await awaitable

    task = asyncio.get_running_loop().create_task(run())
    _spawned.add(task)
    task.add_done_callback(_spawned.discard)
    return task


_spawned: set[asyncio.Task[object]] = set()


async def reap_spawned() -> None:
    """Cancel and await the tasks a test spawned and left running (at its teardown)."""
    tasks = [task for task in _spawned if not task.done()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def describe(session: tenure.Session, name: str) -> tenure.SemaphoreDescription | None:
    """The semaphore's description with owners and waiters, or None if it does not exist."""
    try:
        return await session.semaphore(name).describe(owners=True, waiters=True)
    except NotFoundError:
        return None


async def owners(session: tenure.Session, name: str) -> list[int]:
    """Session ids of the semaphore's owners in grant order ([] if it does not exist)."""
    description = await describe(session, name)
    return [] if description is None else [o.session_id for o in description.owners]


async def waiters(session: tenure.Session, name: str) -> list[int]:
    """Session ids of the semaphore's waiters in service order ([] if it does not exist)."""
    description = await describe(session, name)
    return [] if description is None else [w.session_id for w in description.waiters]


async def wait_for_waiters(session: tenure.Session, name: str, count: int) -> list[int]:
    """Wait until ``name`` has ``count`` waiters on the backend; their session ids."""

    async def queued() -> bool:
        return len(await waiters(session, name)) >= count

    await eventually(queued, f"{count} waiter(s) on {name!r}")
    return await waiters(session, name)


async def wait_for_owner(session: tenure.Session, name: str, owner: tenure.Session) -> None:
    """Wait until ``owner`` holds tokens of ``name`` on the backend."""

    async def holds() -> bool:
        return owner.id in await owners(session, name)

    await eventually(holds, f"session {owner.id} holding {name!r}")


async def exists(session: tenure.Session, name: str) -> bool:
    """Whether the semaphore ``name`` exists."""
    return await describe(session, name) is not None


class Body:
    """A block body that marks where it got to, and blocks until cancelled."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.finished = False

    async def run(self) -> None:
        """Say the body was entered, then wait until cancelled (``finished`` stays False)."""
        self.entered.set()
        await asyncio.Event().wait()
        self.finished = True


async def run_block(block: Callable[[Body], Awaitable[None]]) -> tuple[asyncio.Task[None], Body]:
    """Run ``block`` (an ``async with`` around ``body.run()``) in a task, until its body
    is entered: the task and the body."""
    body = Body()
    task = spawn(block(body))
    await within(body.entered.wait(), "the block to start")
    return task, body


async def hold_in_block(
    holding: AbstractAsyncContextManager[T],
) -> tuple[asyncio.Task[None], Body, T]:
    """Run ``async with holding as held: await body.run()`` in a task, until its body is
    entered: the task, the body, and ``held`` (a session, a lease, a lock...)."""
    entered: list[T] = []

    async def block(body: Body) -> None:
        async with holding as held:
            entered.append(held)
            await body.run()

    task, body = await run_block(block)
    return task, body, entered[0]
