"""A prefix mirrored in the client: a config tree kept current by pushes (``client.cache``).

An operator's session writes the tree ``config/`` (each key a semaphore, its value
the semaphore's data); the app mirrors it with ``client.cache(node,
prefix="config/")``: once entered, ``cache.get`` and ``cache.items`` read it without a
round trip, and ``cache.changes()`` tells each change as the backend pushes it: a
new value, a key that appears, a key held by someone (its owners), a key deleted.

The same code runs on every backend; point it at one with ``TENURE_URL``::

    python examples/cache.py                                       # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/cache.py    # against tenure serve
    TENURE_URL=etcd://127.0.0.1:2379 python examples/cache.py      # or redis://, postgres://
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator

import tenure

NODE = "cache-demo"


def value(view: tenure.SemaphoreDescription | None) -> str:
    return "(none)" if view is None else view.data.decode()


async def next_change(changes: AsyncIterator[tenure.CacheChange]) -> tenure.CacheChange:
    """The next change the cache applies (bounded: an example must not hang)."""
    return await asyncio.wait_for(anext(changes), 30)


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://cache-demo"
    async with tenure.connect(url) as operator, tenure.connect(url) as app:
        await operator.create_node(NODE)
        writer = await operator.session(NODE, description="operator")
        await writer.semaphore("config/db").create(1, b"postgres://db-1/app")
        await writer.semaphore("config/cache").create(1, b"redis://cache-1")
        await writer.semaphore("jobs/nightly").create(1, b"not under config/")

        async with app.cache(NODE, prefix="config/") as cache:
            tree = ", ".join(f"{name}={value(view)}" for name, view in cache.items())
            print(f"cache: {tree}")
            changes = cache.changes()

            await writer.semaphore("config/db").update(b"postgres://db-2/app")
            change = await next_change(changes)
            print(f"change: {change.name} is now {value(change.view)}")
            print(f"get: config/db = {value(cache.get('config/db'))}")

            await writer.semaphore("config/feature-x").create(1, b"on")
            change = await next_change(changes)
            print(f"change: {change.name} appeared: {value(change.view)}")

            lease = await writer.semaphore("config/db").acquire(data=b"migrating")
            change = await next_change(changes)
            assert change.view is not None
            holders = [(o.session_id == writer.id, o.data.decode()) for o in change.view.owners]
            print(f"change: {change.name} held by the operator's session: {holders}")
            await lease.release()
            change = await next_change(changes)
            free = change.view is not None and not change.view.owners
            print(f"change: {change.name} free again: {free}")

            await writer.semaphore("config/cache").delete()
            change = await next_change(changes)
            print(f"change: {change.name} deleted: {change.view is None}")
            print(f"cache: names {[name for name, _ in cache.items()]}")
        await writer.close()
        await operator.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
