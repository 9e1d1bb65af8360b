"""A recipe of your own: a readers-writer lock over ``Session.acquire``.

``Session.acquire`` is the one primitive tenure's own recipes are written over,
and it is public. Here it makes a readers-writer lock: a semaphore of ``READERS``
tokens, where a reader takes 1 and a writer takes all of them. The FIFO queue
gives the lock its fairness for free: a reader who comes after a waiting writer
waits too, so writers are never starved. A writer who is done writing can
*downgrade* to a reader with ``lease.restate(1)``: it keeps its fencing token and
lets the queued readers in at once. All tasks share one session: each acquire is
a hold of its own, queued at the server like another session's.

Run it with::

    python examples/rwlock.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/rwlock.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import tenure
from tenure.client import Opening

NODE = "rwlock-demo"
READERS = 8  # at most this many readers at once


class ReadWriteLock:
    """Readers share the semaphore ``name``; a writer holds all of its tokens."""

    def __init__(self, session: tenure.Session, name: str) -> None:
        self.session = session
        self.name = name

    async def create(self) -> None:
        """Make the semaphore (once; every process may call it)."""
        await self.session.semaphore(self.name).create(READERS, exist_ok=True)

    def read(self, who: str) -> Opening[tenure.Lease]:
        """One reader's share: ``async with lock.read(...)``."""
        return self.session.acquire(self.name, 1, data=who.encode())

    def write(self, who: str) -> Opening[tenure.Lease]:
        """The writer's whole lock: no reader and no other writer meanwhile."""
        return self.session.acquire(self.name, READERS, data=who.encode())


async def wait_until(
    session: tenure.Session, done: Callable[[tenure.SemaphoreDescription], bool]
) -> None:
    """Wait until the lock's state satisfies ``done`` (watch yields the current state first)."""
    states = session.semaphore("report").watch(owners=True, waiters=True)
    async with contextlib.aclosing(states):
        async for state in states:
            if done(state):
                return


async def reader(lock: ReadWriteLock, who: str, finish: asyncio.Event) -> None:
    async with lock.read(who) as lease:
        print(f"{who}: reading (token {lease.token})")
        await finish.wait()
    print(f"{who}: done")


async def writer(lock: ReadWriteLock, finish: asyncio.Event) -> None:
    async with lock.write("writer") as lease:
        print(f"writer: writing alone (token {lease.token}, {lease.count} tokens)")
        await lease.restate(1)  # downgrade: a reader now, same token
        print(f"writer: downgraded to a reader (token {lease.token}, {lease.count} token)")
        await finish.wait()
    print("writer: done")


async def main() -> None:
    async with tenure.connect(os.environ.get("TENURE_URL", "memory://")) as client:
        await client.create_node(NODE)
        async with client.session(NODE, description="rwlock-demo") as session:
            lock = ReadWriteLock(session, "report")
            await lock.create()
            first_readers, rest = asyncio.Event(), asyncio.Event()

            tasks = [
                asyncio.create_task(reader(lock, f"reader-{i}", first_readers)) for i in (1, 2)
            ]
            await wait_until(session, lambda s: len(s.owners) == 2)
            tasks.append(asyncio.create_task(writer(lock, rest)))
            await wait_until(session, lambda s: len(s.waiters) == 1)
            print("main: the writer waits for the two readers")
            tasks.append(asyncio.create_task(reader(lock, "reader-3", rest)))
            await wait_until(session, lambda s: len(s.waiters) == 2)
            print("main: reader-3 waits behind the writer, though tokens are free")

            first_readers.set()  # readers 1 and 2 finish: the writer goes, then reader-3
            await wait_until(session, lambda s: len(s.owners) == 2 and not s.waiters)
            state = await session.semaphore("report").describe(owners=True)
            owners = ", ".join(f"{o.data.decode()}={o.count}" for o in state.owners)
            print(f"main: {state.count}/{state.limit} tokens held: {owners}")
            rest.set()
            await asyncio.gather(*tasks)


if __name__ == "__main__":
    asyncio.run(main())
