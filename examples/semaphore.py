"""A counting semaphore as a connection pool: limits, counts, FIFO order, describe().

The semaphore "db-pool" has 3 tokens, one per database connection. A batch job
takes 2, then "report" asks for 2 and "api" for 1. One token is free, yet "api"
waits: the queue is strictly first-in first-out, so a big request at its head is
never starved by small ones slipping past. ``describe()`` shows owners and waiters.

Run it with::

    python examples/semaphore.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/semaphore.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable

import tenure

NODE = "pool-demo"


async def worker(client: tenure.Client, name: str, count: int, finish: asyncio.Event) -> None:
    async with client.session(NODE, description=name) as session:
        pool = session.semaphore("db-pool")
        # The owner data (here the worker's name) is visible to describe() and watchers.
        async with pool.acquire(count, data=name.encode()) as lease:
            print(f"{name}: got {count} connection(s), token {lease.token}")
            await finish.wait()  # use the connections until the work is done
        print(f"{name}: released {count}")


async def wait_until(
    pool: tenure.Semaphore, done: Callable[[tenure.SemaphoreDescription], bool]
) -> None:
    """Wait until the pool's state satisfies ``done`` (watch yields the current state first)."""
    async with contextlib.aclosing(pool.watch(owners=True, waiters=True)) as states:
        async for state in states:
            if done(state):
                return


async def main() -> None:
    async with tenure.connect(os.environ.get("TENURE_URL", "memory://")) as client:
        await client.create_node(NODE)
        async with client.session(NODE, description="admin") as admin:
            pool = admin.semaphore("db-pool")
            await pool.create(limit=3, data=b"postgres://db.internal:5432")

            # Start the workers one by one so that their arrival order is known.
            finish = asyncio.Event()
            tasks = [asyncio.create_task(worker(client, "batch-job", 2, finish))]
            await wait_until(pool, lambda s: len(s.owners) == 1)
            tasks.append(asyncio.create_task(worker(client, "report", 2, finish)))
            await wait_until(pool, lambda s: len(s.waiters) == 1)
            tasks.append(asyncio.create_task(worker(client, "api", 1, finish)))
            await wait_until(pool, lambda s: len(s.waiters) == 2)

            state = await pool.describe(owners=True, waiters=True)
            print(f"pool: {state.count}/{state.limit} in use, data {state.data.decode()!r}")
            for owner in state.owners:
                print(f"  owner  {owner.data.decode():10} count={owner.count} token={owner.token}")
            for waiter in state.waiters:
                print(f"  waiter {waiter.data.decode():10} count={waiter.count}")
            # One token is free, but a newcomer may not pass the queue either:
            print(f"admin: try_acquire(1) -> {await pool.try_acquire(1)}")

            finish.set()  # batch-job releases its 2; then report and api get theirs
            await asyncio.gather(*tasks)
            state = await pool.describe()
            print(f"pool: {state.count}/{state.limit} in use")


if __name__ == "__main__":
    asyncio.run(main())
