"""Writing your own recipe: the library's mutex, rewritten outside the package over
``tenure.lowlevel``, as docs/recipes.md ("Writing your own recipe") shows it.

``tenure.Mutex`` is a short class over the same low level: a mutex is an ephemeral
semaphore whose holder takes every token (``MAX_COUNT``), so the recipe below and
the library's exclude each other on one name. It acquires with
``lowlevel.acquire`` (a :class:`tenure.Lock` per hold: the same fencing token, the
same loss rules in ``async with``), reads who holds it through the backend's
session (``lowlevel.backend_session``), and lets go without waiting for the
backend's answer with ``lowlevel.start_release``.

Run it with::

    python examples/own_recipe.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/own_recipe.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import os
from functools import partial

import tenure
from tenure import lowlevel
from tenure.client import Opening
from tenure.errors import NotFoundError

NODE = "own-recipe-demo"


class MyMutex:
    """A mutex (not reentrant): the semaphore ``name``, ephemeral, taken whole."""

    def __init__(self, session: tenure.Session, name: str) -> None:
        self.session = session
        self.name = name

    def lock(self, *, timeout: float | None = None, data: bytes = b"") -> Opening[tenure.Lock]:
        """Wait for the lock (``timeout`` seconds at most; 0 only tries): ``await`` it
        or use ``async with``, whose block a loss of the lock cancels."""
        # Every token of an ephemeral semaphore (it goes with its last holder and waiter).
        wanted = (tenure.Lock, self.name, tenure.MAX_COUNT, data, timeout, True)
        return Opening(partial(lowlevel.acquire, self.session, *wanted))

    async def try_lock(self) -> tenure.Lock | None:
        """The lock if it is free right now, else None."""
        try:
            return await self.lock(timeout=0)
        except TimeoutError:
            return None

    async def describe(self) -> tenure.MutexDescription:
        """Who holds it, and who waits (a free mutex is ``held=False``)."""
        backend = lowlevel.backend_session(self.session)
        try:
            state = await backend.describe_semaphore(self.name, owners=True, waiters=True)
        except NotFoundError:  # an ephemeral semaphore exists only while held or awaited
            return tenure.MutexDescription(self.name, held=False, owner=None)
        owner = state.owners[0] if state.owners else None
        return tenure.MutexDescription(self.name, owner is not None, owner, state.waiters)


async def main() -> None:
    url = os.environ.get("TENURE_URL", "memory://")
    async with tenure.connect(url) as client:
        await client.create_node(NODE, exist_ok=True)
        a = await client.session(NODE, description="a")
        b = await client.session(NODE, description="b")

        async with MyMutex(a, "ledger").lock(data=b"a's hold") as first:
            print(f"a: holds 'ledger' with fencing token {first.token}")
            print(f"b: MyMutex.try_lock() -> {await MyMutex(b, 'ledger').try_lock()}")
            print(f"b: session.mutex().try_lock() -> {await b.mutex('ledger').try_lock()}")
            described = await MyMutex(b, "ledger").describe()
            assert described.owner is not None
            mine = described.owner.session_id == a.id
            print(f"b: describe() -> held={described.held}, by a: {mine}")

        second = await MyMutex(b, "ledger").lock(timeout=5)
        print(f"b: holds 'ledger' with fencing token {second.token}")
        print(f"b: the token grew: {second.token > first.token}")
        releasing = lowlevel.start_release(second)
        print(f"b: start_release() returned at once, held={second.held}")
        if releasing is not None:
            await releasing  # (the backend's answer: the tokens are free for everyone)
        third = await MyMutex(a, "ledger").try_lock()
        assert third is not None
        print(f"a: try_lock() after b's release -> token {third.token}")
        await third.release()
        print(f"a: describe() -> held={(await MyMutex(a, 'ledger').describe()).held}")
        await a.close()
        await b.close()


if __name__ == "__main__":
    asyncio.run(main())
