"""The numbers a client gives its callers (deadlock detection): one per asyncio task,
never given twice; in the sync face, one per calling thread (tenure.client._caller)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import tenure.sync
from tenure.client._caller import caller_number, current_caller, task_number, this_thread
from tenure.sync import Portal
from tests.sync.conftest import wait_for_waiters


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


async def _callers_number() -> int:
    return caller_number(current_caller(asyncio.current_task()))


def test_each_portal_call_goes_by_its_threads_number() -> None:
    portal = Portal()
    try:
        here = [portal.call(_callers_number) for _ in range(3)]  # three tasks, one thread
        assert here == [this_thread().number] * 3
        there: list[int] = []
        thread = threading.Thread(target=lambda: there.append(portal.call(_callers_number)))
        thread.start()
        thread.join(10)
        assert there[0] not in here
    finally:
        portal.close()


def test_a_threads_calls_are_one_task_to_the_store(
    session: tenure.sync.Session, other: tenure.sync.Session
) -> None:
    # This thread holds 'a' (one call, one task); the other session's thread holds 'b'
    # and waits for 'a'; then this thread asks for 'b' (another call, another task):
    # to the store both calls are one task, which closes the cycle.
    mine = this_thread().number
    with session.mutex("a"):
        taken = threading.Event()

        def theirs() -> None:
            with other.mutex("b"):
                taken.set()
                with other.mutex("a").lock(timeout=10):
                    pass

        thread = threading.Thread(target=theirs)
        thread.start()
        assert taken.wait(10)
        wait_for_waiters(other, "a", 1)
        me = f"session {session.id} (task {mine})"
        with pytest.raises(tenure.errors.DeadlockError) as refused:
            session.mutex("b").lock(timeout=5)
        assert f"{me} waits for 'b'" in str(refused.value)
        assert f"held by {me}" in str(refused.value)
    thread.join(10)
    assert not thread.is_alive()
