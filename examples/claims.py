"""Claims: once per slot, not merely not at the same time.

A lock released when a nightly job ends lets a replica whose clock is late run the
same night again. A claim holds its name for at least ``at_least`` seconds after its
grant, even once released, and at most ``at_most``, whatever its holder does; both
timed by the store, never by a client. Here:

* two workers (two clients, as two replicas of a cron job) race for ten nightly
  slots: each slot is claimed once;
* a worker done early releases its slot: it stays claimed until ``at_least``;
* a producer claims a task and hands its id on; the claim outlives the producer's
  session, and a worker with no session releases it by id (celery-once's pattern);
* a claim whose holder runs on past ``at_most`` ends there all the same.

Point it at a backend with ``TENURE_URL``::

    python examples/claims.py                                       # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/claims.py    # against tenure serve
    TENURE_URL=etcd://127.0.0.1:2379 python examples/claims.py      # or redis://, postgres://
"""

from __future__ import annotations

import asyncio
import os

import tenure

NODE = "claims-demo"
SLOTS = [f"report/2026-01-{day:02d}" for day in range(1, 11)]


async def nightly(a: tenure.Session, b: tenure.Session) -> None:
    """Two replicas race for each night's report: one runs it, the other skips."""

    async def replica(session: tenure.Session) -> list[tenure.Claim]:
        won = []
        for slot in SLOTS:
            claim = await session.claim(slot, at_least=60, at_most=600, data=b"report job")
            if claim is not None:
                won.append(claim)
        return won

    first, second = await asyncio.gather(replica(a), replica(b))
    names = [claim.name for claim in first + second]
    print(f"race: {len(SLOTS)} slots, each claimed once: {sorted(names) == SLOTS}")
    tokens = [claim.token for claim in first + second]
    print(f"race: every claim has a token of its own: {len(set(tokens)) == len(SLOTS)}")
    # Done early: released, the slot stays claimed until at_least after the grant.
    done = next(claim for claim in first + second if claim.name == SLOTS[0])
    print(f"release: released {done.name!r}: {await done.release()}")
    late = await b.claim(done.name, at_least=60, at_most=600)
    print(f"release: a late replica still finds it claimed: {late is None}")


async def hand_off(client: tenure.Client, worker: tenure.Client) -> None:
    """The producer claims a task and hands its id on; a worker releases it by id."""
    async with client.session(NODE) as producer:
        claim = await producer.claim("task/17", at_least=0, at_most=600, data=b"task 17")
        assert claim is not None
        print(f"producer: claimed {claim.name!r}, hands its id on (its session ends)")
    task_id = claim.id  # (sent with the task to the worker: a queue message, say)
    async with worker.session(NODE) as other:
        taken = await other.claim("task/17", at_least=0, at_most=600)
        print(f"worker: the task is claimed while it runs: {taken is None}")
    released = await worker.release_claim(NODE, "task/17", task_id)  # no session needed
    print(f"worker: done, released it by id: {released}")
    async with worker.session(NODE) as other:
        again = await other.claim("task/17", at_least=0, at_most=600)
        print(f"worker: the task may be claimed again: {again is not None}")


async def at_most(a: tenure.Session, b: tenure.Session) -> None:
    """A holder that runs past at_most loses the name there: the next one gets it."""
    claim = await a.claim("slow-job", at_least=0.5, at_most=1)
    assert claim is not None
    async with claim:  # (released when the block ends: it ended at at_most already)
        for _ in range(200):  # (bounded: the store ends it after 1 s, etcd after 2 or 3)
            taken = await b.claim("slow-job", at_least=0.5, at_most=1)
            if taken is not None:
                break
            await asyncio.sleep(0.05)
        print(f"at_most: the next claim got it while the first ran on: {taken is not None}")
        if taken is not None:
            print(f"at_most: its token is above the first's: {taken.token > claim.token}")


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://claims"
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node(NODE)
        a, b = await one.session(NODE), await two.session(NODE)
        await nightly(a, b)
        await hand_off(one, two)
        await at_most(a, b)
        await a.close()
        await b.close()
        await one.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
