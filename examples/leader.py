"""A leader that keeps running: ``client.lead(node, name, work)``, the runner of issue 35.

Two hosts run the same code: ``await client.lead("leader-demo", "scheduler", work)``.
One leads and runs ``work`` (its fencing token in hand); the other waits its turn.
host-a's work does its three rounds and returns: it resigns, and, run without
requeue, its ``lead()`` returns. host-b takes over with a greater token. Then an
operator kills host-b's session: its work is cancelled at once, and its runner,
which outlives the loss, campaigns again in a new session and leads again. Leaving
(cancelling the runner) resigns and closes its session.

The same code runs on every backend; point it at one with ``TENURE_URL``.

Run it with::

    python examples/leader.py                                        # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/leader.py     # against tenure serve
    TENURE_URL=etcd://127.0.0.1:2379 python examples/leader.py       # or redis://, postgres://
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import tenure

NODE = "leader-demo"


class Host:
    """One host's runner: what its work saw, term by term."""

    def __init__(self, name: str, client: tenure.Client) -> None:
        self.name = name
        self.client = client
        self.terms: asyncio.Queue[tenure.Leadership] = asyncio.Queue()
        self.rounds = 0  # how many rounds its work should do before returning; 0: forever
        self.go = asyncio.Event()  # when to start them

    async def work(self, leadership: tenure.Leadership) -> None:
        """What runs while this host leads (cancelled at once if leadership is lost)."""
        await self.terms.put(leadership)
        try:
            if self.rounds:
                await self.go.wait()
            for done in range(1, self.rounds + 1):
                # The token goes with every write the leader makes (docs/fencing.md).
                print(f"{self.name}: round {done} of the schedule, token {leadership.token}")
                await asyncio.sleep(0)
            if self.rounds:
                return  # done: returning resigns
            await asyncio.Event().wait()  # leads until lost or stopped
        except asyncio.CancelledError:
            why = type(leadership.lost_reason).__name__ if leadership.lost_reason else "stopped"
            print(f"{self.name}: work cancelled ({why})")
            raise


async def candidates(observer: tenure.Session, count: int) -> None:
    """Until ``count`` candidates wait behind the leader (a watch yields the state first)."""
    states = observer.semaphore("scheduler").watch(waiters=True)
    async with contextlib.aclosing(states):
        async for state in states:
            if len(state.waiters) >= count:
                return


async def main() -> None:
    # (memory://NAME: both clients share one in-process engine; a bare memory:// is private.)
    url = os.environ.get("TENURE_URL") or "memory://leader-demo"
    async with tenure.connect(url) as one, tenure.connect(url) as two:
        await one.create_node(NODE)
        observer = await one.session(NODE)
        a, b = Host("host-a", one), Host("host-b", two)

        a.rounds = 3
        running_a = asyncio.create_task(
            one.lead(NODE, "scheduler", a.work, data=b"host-a", requeue=False)
        )
        first = await a.terms.get()
        print(f"host-a: leading, token {first.token}")
        running_b = asyncio.create_task(two.lead(NODE, "scheduler", b.work, data=b"host-b"))
        await candidates(observer, 1)
        print("host-b: waiting its turn")
        a.go.set()

        await running_a  # host-a's work returned: it resigned, and lead() returned
        print("host-a: work done, resigned, lead() returned")
        second = await b.terms.get()
        print(f"host-b: leading, token {second.token}, greater: {second.token > first.token}")
        leader = await observer.election("scheduler").leader()
        print(f"observer: the leader is {leader.data.decode() if leader else None}")

        await one.kill_session(NODE, second.session.id)  # an operator ends its session
        third = await b.terms.get()
        new_session = third.session.id != second.session.id
        print(f"host-b: leading again, token {third.token}, in a new session: {new_session}")

        running_b.cancel()  # leaving: resigns and closes the session
        with contextlib.suppress(asyncio.CancelledError):
            await running_b
        print(f"observer: the leader is {await observer.election('scheduler').leader()}")
        await observer.close()
        await one.drop_node(NODE, force=True)


if __name__ == "__main__":
    asyncio.run(main())
