"""Keep working across session expiry with ``client.sessions(...)``.

A worker processes jobs from a queue while holding the mutex "job-runner". Midway,
its connection drops for longer than the recovery window: the session expires,
the mutex is lost, and the ``async with`` body is cancelled with
SessionExpiredError. ``client.sessions()`` then hands out a fresh session, the
worker takes the mutex again (with a new, larger fencing token) and carries on
where it stopped. No job is lost: the body was cancelled while waiting for one.

In-process (``memory://``) the time is a FakeClock, so the 2-second recovery window
passes at once. With ``TENURE_URL`` it runs against that server, on the wall clock:
the worker talks to the server through a cable (a TCP forwarder) that is pulled out
for longer than the window, a real network loss.

Run it with::

    python examples/sessions_loop.py                                      # in-process
    TENURE_URL=tenure://127.0.0.1:6388 python examples/sessions_loop.py   # against tenure serve
"""

from __future__ import annotations

import asyncio
import contextlib
import os

import tenure
from tenure.errors import SessionExpiredError
from tenure.testing import Cable, FakeClock, disconnect

NODE = "loop-demo"
RECOVERY_WINDOW = 2.0


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
    url = os.environ.get("TENURE_URL")
    clock = None if url else FakeClock()
    jobs: asyncio.Queue[str | None] = asyncio.Queue()
    async with contextlib.AsyncExitStack() as stack:
        cable = None
        if url is None:
            client = await stack.enter_async_context(tenure.connect("memory://", clock=clock))
        else:  # through a cable we can pull, for a real network loss
            cable = Cable(url)
            client = await stack.enter_async_context(
                tenure.connect(await stack.enter_async_context(cable))
            )
        await client.create_node(NODE, exist_ok=True)
        # ``async with`` closes the last session when the loop is left.
        async with client.sessions(
            NODE, recovery_window=RECOVERY_WINDOW, description="worker"
        ) as sessions:
            task = asyncio.create_task(worker(sessions, jobs))
            for first in ["job-1", "job-2"]:
                await jobs.put(first)
            await jobs.join()

            # In production this is a real network loss; the session expires once
            # its recovery window has passed without a word from the worker.
            session = sessions.current
            assert session is not None
            print(f"main: session {session.id} loses its connection")
            if cable is not None:
                cable.unplug()  # the wall clock runs the window out
                await asyncio.wait_for(session.lost.wait(), 10 * RECOVERY_WINDOW)
                cable.plug()  # back: the loop's next session connects
            else:
                disconnect(session)
                assert clock is not None
                await clock.advance(RECOVERY_WINDOW + 1)

            for later in ["job-3", "job-4", None]:  # None: no more jobs
                await jobs.put(later)
            await task
        await client.drop_node(NODE)


if __name__ == "__main__":
    asyncio.run(main())
