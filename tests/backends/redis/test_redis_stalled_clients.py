"""redis:// clients whose timers stalled: Redis expires their sessions, and they must hear it.

A client whose event loop does not run its timers (a process paused by GC or
swap, a monotonic clock that jumped back: its sleeps are then far away) sends no
heartbeat and does not see its own deadline pass, while Redis's clock, which
decides, expires its session and hands its locks to others. What still reaches
it is I/O: the push of its session's end to its inbox. These tests stop a
session's heartbeat task (which also runs the client's own deadline check: exactly
what stalled timers do) and check that the push is heard.
"""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

import tenure
from tenure.backends.redis import RedisBackend
from tenure.errors import SessionExpiredError
from tests.backends.stalling import stall

#: The stalled sessions' recovery window (seconds): Redis expires them this long
#: after their last heartbeat.
WINDOW = 1.0
#: How long a test waits for what must happen within a window or two.
BOUND = 10.0


async def test_a_stalled_holder_hears_redis_expire_its_session_while_its_body_runs(
    redis_url: str,
) -> None:
    """Its body is cancelled with the loss once Redis hands the lock to another."""
    async with tenure.connect(redis_url) as one, tenure.connect(redis_url) as two:
        await one.create_node("n")
        holder = await one.session("n", recovery_window=WINDOW)
        other = await two.session("n")
        lock = await holder.mutex("m").lock()
        stall(holder)
        waiting = asyncio.ensure_future(other.mutex("m").lock())
        never = asyncio.Event()
        with pytest.raises(SessionExpiredError):
            async with lock:
                await asyncio.wait_for(never.wait(), BOUND)  # the body: until cancelled
        taken = await asyncio.wait_for(waiting, BOUND)
        assert taken.token > lock.token
        assert isinstance(lock.lost_reason, SessionExpiredError)
        assert isinstance(holder.lost_reason, SessionExpiredError)


async def test_a_stalled_waiter_hears_its_session_expired_and_goes_on_with_a_new_one(
    redis_url: str,
) -> None:
    """Its queued acquire fails with the loss (it does not wait for ever); a new session
    of the same client then gets the lock, its grant pushed to the same inbox."""
    async with tenure.connect(redis_url) as one, tenure.connect(redis_url) as two:
        await one.create_node("n")
        blocker = await two.session("n")
        held = await blocker.mutex("m").lock()
        stalled = await one.session("n", recovery_window=WINDOW)
        waiting = asyncio.ensure_future(stalled.mutex("m").lock())
        for _ in range(100):  # until the request is queued
            if (await blocker.semaphore("m").describe(waiters=True)).waiters:
                break
            await asyncio.sleep(0.02)
        stall(stalled)
        with pytest.raises(SessionExpiredError):
            await asyncio.wait_for(waiting, BOUND)
        fresh = await one.session("n")
        again = asyncio.ensure_future(fresh.mutex("m").lock())
        await asyncio.sleep(0.1)
        await held.release()
        lock = await asyncio.wait_for(again, BOUND)
        assert lock.token > held.token
        assert fresh.lost_reason is None


async def test_an_expired_clients_inbox_stays_for_it_and_a_closed_ones_goes(
    redis_url: str,
) -> None:
    """The inbox of a client whose last session expired keeps the news (an orphan, until
    the client opens another session or closes); a client that closed its last
    session has none left."""
    prefix = redis_url.split("prefix=", 1)[1]
    admin = aioredis.Redis.from_url(redis_url.split("?", 1)[0])
    base = f"{prefix}{{n}}:"
    try:
        async with tenure.connect(redis_url) as one, tenure.connect(redis_url) as two:
            await one.create_node("n")
            backend = one.backend
            assert isinstance(backend, RedisBackend)
            inbox = f"{base}in:{backend.client_id}"
            expiring = await one.session("n", recovery_window=WINDOW)
            stall(expiring)
            watcher = await two.session("n")
            for _ in range(int(BOUND / 0.1)):  # another client's calls expire it
                await watcher.semaphore("x").create(limit=1, exist_ok=True)
                if expiring.lost_reason is not None:
                    break
                await asyncio.sleep(0.1)
            assert isinstance(expiring.lost_reason, SessionExpiredError)
            assert await admin.exists(inbox) == 1
            assert await admin.zscore(f"{base}orph", backend.client_id) is not None
            closing = await one.session("n")
            assert await admin.zscore(f"{base}orph", backend.client_id) is None
            await closing.close()
            assert await admin.exists(inbox) == 0
            assert await admin.hexists(f"{base}inseq", backend.client_id) == 0
    finally:
        await admin.aclose()
