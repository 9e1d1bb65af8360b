"""Keep working across session expiry with ``client.sessions(...)``.

A worker processes jobs from a queue while holding the mutex "job-runner". Midway,
its connection drops for longer than the recovery window: the session expires,
the mutex is lost, and the ``async with`` body is cancelled with
SessionExpiredError. ``client.sessions()`` then hands out a fresh session, the
worker takes the mutex again (with a new, larger fencing token) and carries on
where it stopped. No job is lost: the body was cancelled while waiting for one.

The time here is a FakeClock, so the 5-second recovery window passes at once.

Run it with::

    python examples/sessions_loop.py
"""

from __future__ import annotations

import asyncio

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import FakeClock, disconnect

NODE = "loop-demo"


async def worker(sessions: tenure.SessionLoop, jobs: asyncio.Queue[str | None]) -> None:
    # Each step of the loop waits until the previous session has ended, then opens
    # a new one. The loop ends when a session is closed on purpose.
    async for session in sessions:
        try:
            async with session.mutex("job-runner") as lock:
                print(f"worker: session {session.id} holds the mutex, token {lock.token}")
                while (job := await jobs.get()) is not None:
                    print(f"worker: did {job} (fencing token {lock.token})")
                    jobs.task_done()
                jobs.task_done()
        except SessionExpiredError as error:
            print(f"worker: lost session {session.id}: {error}; starting over")
            continue  # the next iteration opens a new session
        break  # finished normally


async def main() -> None:
    clock = FakeClock()
    jobs: asyncio.Queue[str | None] = asyncio.Queue()
    async with tenure.connect("memory://", clock=clock) as client:
        await client.create_node(NODE)
        # ``async with`` closes the last session when the loop is left.
        async with client.sessions(NODE, recovery_window=5.0, description="worker") as sessions:
            task = asyncio.create_task(worker(sessions, jobs))
            for first in ["job-1", "job-2"]:
                await jobs.put(first)
            await jobs.join()

            # In production this is a real network loss; here we simulate it, and
            # jump over the recovery window so the server expires the session.
            assert sessions.current is not None
            print(f"main: session {sessions.current.id} loses its connection")
            disconnect(sessions.current)
            await clock.advance(5.0 + 1)

            for later in ["job-3", "job-4", None]:  # None: no more jobs
                await jobs.put(later)
            await task


if __name__ == "__main__":
    asyncio.run(main())
