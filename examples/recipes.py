"""Six recipes on one backend: readers-writer lock, all-or-none locks, rate limiter,
barrier, latch and counter, each used by two sessions (two processes, as it were).
The others have programs of their own: groups.py (groups and partitions),
reentrant.py, leader.py, cache.py, deadlock.py and claims.py.

The same code runs on every backend (docs/recipes.md has the table of which backend
has what, made from the conformance kit's results); point it at one with
``TENURE_URL``.

Run it with::

    python examples/recipes.py                                       # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/recipes.py    # against tenure serve
    TENURE_URL=etcd://127.0.0.1:2379 python examples/recipes.py      # or redis://, postgres://
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import tenure

NODE = "recipes-demo"


async def queued(session: tenure.Session, name: str, count: int) -> None:
    """Until ``count`` requests wait for ``name`` (a watch yields the state first)."""
    states = session.semaphore(name).watch(waiters=True)
    async with contextlib.aclosing(states):
        async for state in states:
            if len(state.waiters) >= count:
                return


async def readers_and_writers(a: tenure.Session, b: tenure.Session) -> None:
    """Two readers at once; a writer waits for both, then goes alone."""

    async def write() -> int:
        async with b.rwlock("catalog").write(timeout=10) as w:
            return w.token

    async with (
        a.rwlock("catalog").read(timeout=5) as r1,
        b.rwlock("catalog").read(timeout=5) as r2,
    ):
        print("rwlock: two readers hold 'catalog' at once")
        writing = asyncio.create_task(write())
        await queued(a, "catalog", 1)
        print(f"rwlock: the writer waits for them: {not writing.done()}")
        # FIFO: a reader who comes after the waiting writer waits too (no starvation).
        # (Another task: a task may not take one lock twice; locks are not reentrant.)
        late = await asyncio.create_task(a.rwlock("catalog").try_read())
        print(f"rwlock: a reader who comes after the waiting writer waits too: {late is None}")
    token = await writing
    above = token > max(r1.token, r2.token)
    print(f"rwlock: the writer went alone, its token above the readers': {above}")


async def all_or_none(a: tenure.Session, b: tenure.Session) -> None:
    """Both accounts or neither; opposite orders never deadlock."""
    async with a.lock_all(["acct/1", "acct/7"], timeout=5) as held:
        tokens = held.tokens
        ascending = tokens["acct/1"] < tokens["acct/7"]
        print(f"lock_all: holds acct/1 and acct/7, a token each, in order: {ascending}")
        try:
            await b.lock_all(["acct/7", "acct/1"], timeout=0)
        except TimeoutError:
            print("lock_all: the other session cannot have either now (TimeoutError)")

    async def transfers(session: tenure.Session, names: list[str]) -> None:
        for _ in range(10):
            async with session.lock_all(names, timeout=30):
                await asyncio.sleep(0)

    await asyncio.gather(transfers(a, ["acct/1", "acct/7"]), transfers(b, ["acct/7", "acct/1"]))
    print("lock_all: 20 sets in opposite orders, one after another, no deadlock")


async def rate_limit(a: tenure.Session, b: tenure.Session) -> None:
    """50 units a second, bursts of 100, shared by both sessions."""
    mine = a.rate_limiter("partner-api", rate=50.0, burst=100)
    theirs = b.rate_limiter("partner-api", rate=50.0, burst=100)
    print(f"rate limiter: a burst of 100 goes at once: {await mine.try_acquire(100)}")
    print(f"rate limiter: 50 more now, from the other session: {await theirs.try_acquire(50)}")
    # Each waits its turn (FIFO); acquire returns when its units went, by the store's
    # clock: the bucket, empty, gives 50 units in 1 s, then 25 more in 0.5 s.
    first = await theirs.acquire(50, timeout=2)
    last = await mine.acquire(25, timeout=2)
    print(f"rate limiter: 50 went when their turn came, 25 more {last - first:.1f} s later")


async def barrier_and_latch(a: tenure.Session, b: tenure.Session) -> None:
    """Two parties go together; a latch opens after three count-downs."""
    first = asyncio.create_task(a.barrier("stage-2", parties=2).wait(timeout=60))
    await asyncio.sleep(0.2)
    print(f"barrier: the first party waits alone: {not first.done()}")
    await b.barrier("stage-2", parties=2).wait(timeout=60)
    await first
    print("barrier: both parties went on together")

    latch = a.latch("warmup", count=3)
    waiting = asyncio.create_task(latch.wait(timeout=30))
    for _ in range(3):
        await b.latch("warmup", count=3).count_down()
    await waiting
    print(f"latch: open after 3 count-downs, {await latch.remaining()} left")


async def counting(a: tenure.Session, b: tenure.Session) -> None:
    """One counter, two sessions; compare-and-set wins once."""
    await asyncio.gather(*(s.counter("jobs-done").add(1) for s in (a, b, a, b)))
    value = await a.counter("jobs-done").get()
    print(f"counter: {value} after four add(1) from two sessions")
    won = await a.counter("jobs-done").compare_and_set(value, 100)
    lost = await b.counter("jobs-done").compare_and_set(value, 7)
    print(f"counter: compare_and_set({value}, 100) {won}, then ({value}, 7) {lost}")
    print(f"counter: now {await b.counter('jobs-done').get()}")


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://recipes"
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node(NODE)
        a, b = await one.session(NODE), await two.session(NODE)
        await readers_and_writers(a, b)
        await all_or_none(a, b)
        await rate_limit(a, b)
        await barrier_and_latch(a, b)
        await counting(a, b)
        await a.close()
        await b.close()
        await one.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
