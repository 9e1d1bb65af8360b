"""Groups and partitions: workers join with their addresses, everyone sees who comes
and goes, and a key space is shared out among them, moving only what must move.

The same code runs on every backend; point it at one with ``TENURE_URL``::

    python examples/groups.py                                       # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/groups.py    # against tenure serve
    TENURE_URL=etcd://127.0.0.1:2379 python examples/groups.py      # or redis://, postgres://
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, Callable

import tenure

NODE = "groups-demo"
ORDERS = [f"order-{i}" for i in range(1000)]


async def next_view(
    views: AsyncGenerator[tenure.GroupView, None], wanted: Callable[[tenure.GroupView], bool]
) -> tenure.GroupView:
    """The first view that is ``wanted`` (a busy watcher may get changes together)."""
    async for view in views:
        if wanted(view):
            return view
    raise RuntimeError("the watch ended")


def shown(view: tenure.GroupView) -> str:
    members = ", ".join(f"{i}={data.decode()}" for i, data in view.members.items())
    return f"members [{members}] joined {sorted(view.joined)} left {sorted(view.left)}"


async def membership(a: tenure.Session, b: tenure.Session, c: tenure.Session) -> None:
    """Workers join with their address; a watcher sees joins, an update and a leave."""
    group = a.group("workers")
    me = await group.join("worker-1", data=b"10.0.0.5:8080")
    try:
        await b.group("workers").join("worker-1", data=b"10.0.0.9:8080")
    except tenure.errors.AlreadyExistsError:
        print("group: worker-1 is taken: AlreadyExistsError")
    views = c.group("workers").watch()
    async with contextlib.aclosing(views):
        print(f"group: first view: {shown(await anext(views))}")
        two = await b.group("workers").join("worker-2", data=b"10.0.0.6:8080")
        print(f"group: {shown(await next_view(views, lambda v: 'worker-2' in v.members))}")
        await me.update(b"10.0.0.5:9090")
        moved = await next_view(views, lambda v: v.members.get("worker-1") == b"10.0.0.5:9090")
        print(f"group: {shown(moved)}")
        await two.leave()
        print(f"group: {shown(await next_view(views, lambda v: 'worker-2' not in v.members))}")
    print(f"group: members() {await b.group('workers').members()}")
    await me.leave()


def owned(parts: list[tenure.Partition]) -> dict[str, str]:
    """Each order's owner, as the members see it (every member says the same)."""
    owners = {key: parts[0].owners(key)[0] for key in ORDERS}
    assert all(part.owners(key)[0] == owners[key] for part in parts for key in ORDERS)
    return owners


async def all_see(parts: list[tenure.Partition]) -> None:
    """Until every member's view has exactly the members of ``parts``."""
    ids = {part.id for part in parts}
    for part in parts:
        changes = part.changes()  # (the current view first, then each new one)
        async with contextlib.aclosing(changes):
            async for view in changes:
                if set(view.weights) == ids:
                    break


async def partitions(a: tenure.Session, b: tenure.Session, c: tenure.Session) -> None:
    """1000 orders shared out by weight; one member leaves: only its orders move."""
    one = await a.group("shards").partition("shard-a", weight=1)
    two = await b.group("shards").partition("shard-b", weight=1)
    big = await c.group("shards").partition("shard-c", weight=2)
    await all_see([one, two, big])
    before = owned([one, two, big])
    counts = {
        part.id: sum(1 for owner in before.values() if owner == part.id) for part in (one, two, big)
    }
    print(f"partition: orders per member (weights 1, 1, 2): {counts}")
    replicas = one.owners("order-17", replicas=2)
    print(f"partition: order-17 is {before['order-17']}'s; with a replica: {replicas}")
    changes = one.changes()
    async with contextlib.aclosing(changes):
        await anext(changes)
        await two.leave()
        view = await anext(changes)
        print(
            f"partition: a new assignment: left {sorted(view.left)}, members {sorted(view.weights)}"
        )
    await all_see([one, big])
    after = owned([one, big])
    moved = {key for key in ORDERS if before[key] != after[key]}
    only_its_own = moved == {key for key in ORDERS if before[key] == "shard-b"}
    print(f"partition: {len(moved)} orders moved, only shard-b's: {only_its_own}")
    await one.leave()
    await big.leave()


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://groups"
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node(NODE)
        a, b, c = await one.session(NODE), await two.session(NODE), await one.session(NODE)
        await membership(a, b, c)
        await partitions(a, b, c)
        for session in (a, b, c):
            await session.close()
        await one.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
