"""A mutex with fencing tokens: only the current holder can write to the storage.

Three workers, each in its own session (think: three processes), take turns on the
mutex "ledger" and write to a toy storage service. Each grant carries a fencing
token, larger than every earlier one; the storage refuses writes whose token is
older than the newest it has seen, so a holder that was paused or whose request was
delayed in the network cannot overwrite newer data. An impatient client shows
``try_lock()`` and ``lock(timeout=...)`` while the mutex is busy.

Run it with::

    python examples/mutex.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/mutex.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import os

import tenure


class StaleTokenError(Exception):
    """The storage refused a write that carried an outdated fencing token."""


class Storage:
    """The protected resource. It must check tokens itself: a lock alone cannot."""

    def __init__(self) -> None:
        self.newest_token = 0
        self.entries: list[str] = []

    def write(self, token: int, entry: str) -> None:
        # The fencing check: a token older than the newest one seen is stale.
        # (Equal is fine: the current holder may write several times.)
        if token < self.newest_token:
            raise StaleTokenError(f"token {token} is older than {self.newest_token}")
        self.newest_token = token
        self.entries.append(entry)


async def main() -> None:
    storage = Storage()
    first_holder_ready = asyncio.Event()
    tokens: dict[str, int] = {}

    async with tenure.connect(os.environ.get("TENURE_URL", "memory://")) as client:
        await client.create_node("mutex-demo")

        async def worker(name: str) -> None:
            # Waiters are served in arrival order; the block is cancelled (and raises
            # the loss error) if the lock is lost while we are inside.
            async with (
                client.session("mutex-demo", description=name) as session,
                session.mutex("ledger") as lock,
            ):
                print(f"{name}: holds 'ledger' with fencing token {lock.token}")
                tokens[name] = lock.token
                storage.write(lock.token, f"written by {name}")
                first_holder_ready.set()
                await asyncio.sleep(0.1)  # pretend to work while holding the lock

        async def impatient() -> None:
            await first_holder_ready.wait()
            async with client.session("mutex-demo", description="impatient") as session:
                mutex = session.mutex("ledger")
                if await mutex.try_lock() is None:
                    print("impatient: 'ledger' is busy, try_lock() returned None")
                try:
                    async with mutex.lock(timeout=0.02):
                        print("impatient: got the lock (unexpected)")
                except TimeoutError:
                    print("impatient: gave up after waiting 0.02 s")

        workers = [worker(f"worker-{i}") for i in range(3)]
        await asyncio.gather(*workers, impatient())

    # A write worker-0 sent while it held the lock, delayed in the network until now:
    try:
        storage.write(tokens["worker-0"], "late write from worker-0")
    except StaleTokenError as error:
        print(f"storage: refused a late write from worker-0: {error}")
    print(f"storage entries: {storage.entries}")


if __name__ == "__main__":
    asyncio.run(main())
