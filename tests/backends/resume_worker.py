"""A worker process for the crash tests of resume (tests/backends/test_resume_crash.py).

``take URL NODE``: open a session, lock ``job``, print ``token ticket``, then wait
to be killed. ``resume URL NODE TICKET``: resume the ticket's session, print
``resumed token held session_id``, wait for a line on stdin, release the lock,
print ``released`` and close the session.
"""

from __future__ import annotations

import asyncio
import sys

import tenure


async def take(url: str, node: str) -> None:
    """Hold ``job`` and say so with the session's ticket; never let go (be killed)."""
    client = await tenure.connect(url)
    session = await client.session(node, recovery_window=30.0)
    lock = await session.mutex("job").lock()
    print(lock.token, session.ticket().to_str(), flush=True)
    await asyncio.Event().wait()


async def resume(url: str, node: str, ticket: str) -> None:
    """Take the session back, report the lock, release it when told."""
    async with tenure.connect(url) as client:
        session = await client.session(node, resume=ticket)
        [lease] = session.leases("job")
        print("resumed", lease.token, lease.held, session.id, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        await lease.release()
        print("released", flush=True)
        await session.close()


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    asyncio.run(take(*args) if command == "take" else resume(*args))
