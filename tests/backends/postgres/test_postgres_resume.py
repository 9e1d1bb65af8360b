"""postgres://: a session taken back by ticket in another client (another process)."""

from __future__ import annotations

import asyncio

import pytest

import tenure
from tenure.errors import SessionExpiredError


async def test_a_ticket_moves_the_session_and_fences_the_old_client(pg_url: str) -> None:
    async with tenure.connect(pg_url) as old, tenure.connect(pg_url) as new:
        await old.create_node("n")
        session = await old.session("n", recovery_window=10.0)
        lock = await session.mutex("m").lock(data=b"work")
        blocker = await new.session("n")
        busy = await blocker.mutex("busy").lock()
        waiting = asyncio.ensure_future(session.mutex("busy").lock())
        await asyncio.sleep(0.2)
        text = session.ticket().to_str()

        resumed = await new.session("n", resume=tenure.SessionTicket.from_str(text))
        assert resumed.id == session.id
        [lease] = resumed.leases("m")
        assert (lease.token, lease.data) == (lock.token, b"work")

        # The old client hears it at once (a notification), and its wait is over.
        reason = await asyncio.wait_for(session.lost.wait(), 5)
        assert isinstance(reason, SessionExpiredError)
        with pytest.raises(SessionExpiredError):
            await asyncio.wait_for(waiting, 5)
        found = await blocker.semaphore("busy").describe(waiters=True)
        assert found.waiters == ()  # its queued request was withdrawn
        await busy.release()

        # The new owner releases; the next one is granted with a greater token.
        next_lock = asyncio.ensure_future(blocker.mutex("m").lock())
        await lease.release()
        granted = await asyncio.wait_for(next_lock, 5)
        assert granted.token > lock.token
