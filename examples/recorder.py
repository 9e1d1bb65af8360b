"""Checking what code did with its locks: ``tenure.testing.Recorder``.

A recorder is an observer of the client (``tenure.connect(url, observers=[...])``,
or every client with ``tenure.add_observer``): it writes down when each acquire
started, when it was granted, and when each hold ended. Then
``assert_never_overlap()`` checks that no two holds of a name were held at once,
and ``assert_fifo()`` that waiters were served in the order they came. The pytest
plugin hands one out as the ``tenure_recorder`` fixture, with ``tenure_client``
(``memory://`` on a FakeClock): docs/integrations.md, "Test fixtures".

Here, four workers export a report under a mutex: the history passes both checks.
Then the same workers under a "lock" that is a semaphore of two tokens (a bug: two
may hold it at once), and ``assert_never_overlap()`` says so.

Run it with::

    python examples/recorder.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/recorder.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import tenure
from tenure.testing import Recorder

#: What takes "the lock" in a session (a mutex's lock, or, the bug, one token of two).
Lock = Callable[[tenure.Session], AbstractAsyncContextManager[object]]


async def main() -> None:
    recorder = Recorder()
    url = os.environ.get("TENURE_URL", "memory://")
    async with tenure.connect(url, observers=[recorder]) as client:
        await client.create_node("recorder-demo", exist_ok=True)

        async def export(worker: int, lock: Lock) -> None:
            async with (
                client.session("recorder-demo", description=f"worker-{worker}") as session,
                lock(session),
            ):
                await asyncio.sleep(0.01)  # the export

        def mutex(session: tenure.Session) -> tenure.client.Opening[tenure.Lock]:
            return session.mutex("export").lock()

        await asyncio.gather(*(export(worker, mutex) for worker in range(4)))
        for hold in recorder.holds("export"):
            print(f"hold: {hold}")
        recorder.assert_never_overlap()
        recorder.assert_fifo()
        print("the mutex: never two holders at once, served first come, first served")

        recorder.clear()
        async with client.session("recorder-demo") as session:
            await session.semaphore("export-2").create(2, exist_ok=True)

        def two_tokens(session: tenure.Session) -> tenure.client.Opening[tenure.Lease]:
            return session.acquire("export-2")  # one token of two: not a lock

        await asyncio.gather(*(export(worker, two_tokens) for worker in range(4)))
        try:
            recorder.assert_never_overlap()
        except AssertionError as error:
            print(f"the semaphore of 2: {error}")
        else:
            raise SystemExit("two holders at once went unnoticed")


if __name__ == "__main__":
    asyncio.run(main())
