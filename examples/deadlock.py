"""Deadlock detection: two transfers lock two accounts in opposite orders.

Task A locks acct/1 then waits for acct/2; task B holds acct/2 and asks for acct/1.
Waiting would close a cycle (each waits for the other, forever). A backend with
``Capability.DEADLOCK_DETECTION`` (memory://, tenure://, redis://) refuses B's
acquire at once with DeadlockError naming the cycle; one without it (etcd://,
postgres://) lets B wait like any other waiter, and B's timeout is what ends the
wait. Either way B lets go of acct/2 and tries again, and A goes on. Both tasks run
in one session: the store tells its tasks apart. Code that counts on detection
insists on it: ``connect(url, require=[Capability.DEADLOCK_DETECTION])`` refuses a
backend without it.

    python examples/deadlock.py                      # memory://
    TENURE_URL=tenure://127.0.0.1:6388 python examples/deadlock.py
    TENURE_URL=postgres://user@127.0.0.1/db python examples/deadlock.py
"""

from __future__ import annotations

import asyncio
import os
from urllib.parse import urlsplit

import tenure
from tenure import Capability
from tenure.errors import DeadlockError, UnsupportedError

URL = os.environ.get("TENURE_URL", "memory://")
NODE = "bank"
#: B's timeout on its second lock: where nothing detects the deadlock, this ends it.
GIVE_UP = 0.5


async def main() -> None:
    scheme = urlsplit(URL).scheme
    async with tenure.connect(URL) as client:
        detects = Capability.DEADLOCK_DETECTION in client.capabilities
        print(f"{scheme}:// detects deadlocks: {detects}")
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
                        async with session.mutex("acct/1").lock(timeout=GIVE_UP):
                            raise AssertionError("B cannot hold acct/1: A holds it")
                    except DeadlockError as error:
                        print("B holds acct/2, refused acct/1 at once:", type(error).__name__)
                    except TimeoutError:
                        print(f"B holds acct/2, gave up on acct/1 after {GIVE_UP} s: TimeoutError")
                    print("B lets go of acct/2, tries again")
                async with session.mutex("acct/2").lock(), session.mutex("acct/1").lock():
                    print("B moved 5 from acct/2 to acct/1")

            await asyncio.gather(task_a(), task_b())
        described = await client.describe_node(NODE)
        print(f"node {NODE!r} remembers {len(described.deadlocks)} broken deadlock(s)")
        for broken in described.deadlocks:
            print("  it waited for", broken.cycle.split(" waits for ", 1)[1].split(" held")[0])
        await client.drop_node(NODE, force=True)

    # Code that must not wait out a deadlock says so: a backend without it is refused.
    try:
        async with tenure.connect(URL, require=[Capability.DEADLOCK_DETECTION]):
            print("require=[DEADLOCK_DETECTION]: connected")
    except UnsupportedError as error:
        print("require=[DEADLOCK_DETECTION]: refused:", error)


async def waiting_for(name: str, session: tenure.Session) -> None:
    """Until somebody waits for ``name`` (task A, behind B's hold): a watch, no polling."""
    watch = session.semaphore(name).watch(waiters=True)
    async for state in watch:
        if state.waiters:
            break
    await watch.aclose()


if __name__ == "__main__":
    asyncio.run(main())
