"""Deadlock detection: two transfers lock two accounts in opposite orders.

Task A locks acct/1 then waits for acct/2; task B holds acct/2 and asks for acct/1.
Waiting would close a cycle (each waits for the other, forever), so B's acquire
fails at once with DeadlockError naming it; B lets go of acct/2 and tries again,
A goes on. Both run in one session: the store tells its tasks apart.

    python examples/deadlock.py                      # memory://
    TENURE_URL=tenure://127.0.0.1:6388 python examples/deadlock.py
"""

from __future__ import annotations

import asyncio
import os

import tenure
from tenure.errors import DeadlockError

URL = os.environ.get("TENURE_URL", "memory://")
NODE = "bank"


async def main() -> None:
    # require=: refuse a backend that would let the two wait until their timeouts.
    async with tenure.connect(URL, require=[tenure.Capability.DEADLOCK_DETECTION]) as client:
        await client.create_node(NODE, exist_ok=True)
        async with client.session(NODE, description="transfers") as session:
            b_holds = asyncio.Event()

            async def task_a() -> None:
                await b_holds.wait()
                async with session.mutex("acct/1").lock():
                    print("A holds acct/1, waits for acct/2")
                    async with session.mutex("acct/2").lock():
                        print("A moved 10 from acct/1 to acct/2")

            async def task_b() -> None:
                async with session.mutex("acct/2").lock():
                    b_holds.set()
                    await waiting_for("acct/2", session)  # A holds acct/1 and waits
                    try:
                        async with session.mutex("acct/1").lock():
                            raise AssertionError("B should have been refused")
                    except DeadlockError as error:
                        print("B holds acct/2, refused acct/1 at once:", type(error).__name__)
                print("B let go of acct/2, tries again")
                async with session.mutex("acct/2").lock(), session.mutex("acct/1").lock():
                    print("B moved 5 from acct/2 to acct/1")

            await asyncio.gather(task_a(), task_b())
        described = await client.describe_node(NODE)
        print(f"node {NODE!r} remembers {len(described.deadlocks)} broken deadlock(s)")
        for broken in described.deadlocks:
            print("  it waited for", broken.cycle.split(" waits for ", 1)[1].split(" held")[0])
        await client.drop_node(NODE, force=True)


async def waiting_for(name: str, session: tenure.Session) -> None:
    """Until somebody waits for ``name`` (task A, behind B's hold): a watch, no polling."""
    watch = session.semaphore(name).watch(waiters=True)
    async for state in watch:
        if state.waiters:
            break
    await watch.aclose()


if __name__ == "__main__":
    asyncio.run(main())
