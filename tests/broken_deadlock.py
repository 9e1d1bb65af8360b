"""A deadlock a server breaks, for the tests of what shows it (``tenure describe``,
the dashboard): two sessions cross two mutexes and the closing acquire is refused."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import DeadlockError
from tenure.testing.conformance.support import wait_for_waiters


async def break_a_deadlock(url: str, node: str, held: str = "a") -> tuple[int, int]:
    """In the new ``node``: a task of session one holds ``held`` and waits for 'b',
    held by session two, whose asking for ``held`` is refused (DeadlockError); then
    both let go. The two sessions' ids (one, two)."""
    async with tenure.connect(url) as client:
        await client.create_node(node)
        async with client.session(node) as one, client.session(node) as two:
            b = await two.mutex("b").lock()
            holds = asyncio.Event()

            async def first() -> None:
                async with one.mutex(held).lock():
                    holds.set()
                    async with one.mutex("b").lock():
                        pass

            task = asyncio.create_task(first())
            await asyncio.wait_for(holds.wait(), 10)
            await wait_for_waiters(one, "b", 1)
            with pytest.raises(DeadlockError):
                await two.mutex(held).lock()
            await b.release()
            await asyncio.wait_for(task, 10)
            return one.id, two.id
