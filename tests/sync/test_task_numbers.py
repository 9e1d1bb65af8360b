"""The numbers a client gives the tasks that ask (deadlock detection): one per asyncio
task, never given twice; in the sync face, one per calling thread."""

from __future__ import annotations

import asyncio
import re
import threading

import pytest

import tenure.sync
from tenure.client._tasks import task_number, thread_number
from tenure.sync import Portal


def test_a_task_keeps_its_number_and_every_other_task_has_its_own() -> None:
    async def number() -> int:
        return task_number(asyncio.current_task())

    async def main() -> tuple[int, int, list[int]]:
        mine = await number()
        again = await number()
        others = await asyncio.gather(*(number() for _ in range(3)))  # tasks of their own
        return mine, again, list(others)

    mine, again, others = asyncio.run(main())
    assert mine == again > 0
    assert len({mine, *others}) == 4
    assert task_number(None) == 0  # outside a task: not known


def test_a_child_task_does_not_take_its_parents_number() -> None:
    async def main() -> tuple[int, int]:
        parent = task_number(asyncio.current_task())
        child = await asyncio.create_task(_own_number())  # inherits the parent's context
        return parent, child

    parent, child = asyncio.run(main())
    assert parent != child


async def _own_number() -> int:
    return task_number(asyncio.current_task())


def test_each_portal_call_goes_by_its_threads_number() -> None:
    portal = Portal()
    try:
        here = [portal.call(_own_number) for _ in range(3)]  # three tasks, one thread
        assert here == [thread_number()] * 3
        there: list[int] = []
        thread = threading.Thread(target=lambda: there.append(portal.call(_own_number)))
        thread.start()
        thread.join(10)
        assert there[0] not in here
    finally:
        portal.close()


def test_a_threads_calls_are_one_task_to_the_store(session: tenure.sync.Session) -> None:
    # Held in one call, asked again under another hold in the next: the same task,
    # so the store sees a task waiting for itself (a deadlock), not two tasks.
    mine = f"session {session.id} (task {thread_number()}) waits for 'm'"
    with session.mutex("m"), pytest.raises(tenure.errors.DeadlockError, match=re.escape(mine)):
        session.acquire("m", tenure.MAX_COUNT, ephemeral=True, timeout=5)
