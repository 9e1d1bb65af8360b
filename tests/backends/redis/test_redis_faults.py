"""The redis:// backend when the network or the server fails: nothing acknowledged is lost.

A TCP proxy (tests/netproxy.py) between a client and Redis cuts answers and
partitions the client; a server of the test's own is killed with SIGKILL and
started again (``appendfsync always``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import tenure
from tenure.errors import SessionExpiredError
from tests.netproxy import NetProxy
from tests.redis.server import RedisServer


@contextlib.asynccontextmanager
async def proxied(redis_url: str) -> AsyncIterator[tuple[NetProxy, str]]:
    """A proxy in front of the test's Redis, and the URL that goes through it."""
    port = int(redis_url.split("//", 1)[1].split(":", 1)[1].split("/", 1)[0])
    async with NetProxy("127.0.0.1", port) as proxy:
        yield proxy, redis_url.replace(f":{port}/", f":{proxy.port}/")


async def test_an_acquire_whose_answers_were_lost_is_granted_once(redis_url: str) -> None:
    """Redis applies the acquire, its answers are lost, the client sends it again: the
    retry is answered as the first try was (its request key), never applied twice."""
    async with (
        proxied(redis_url) as (proxy, through),
        tenure.connect(through, request_timeout=0.3) as client,
        tenure.connect(redis_url) as other_client,
    ):
        await client.create_node("n")
        other = await other_client.session("n")
        session = await client.session("n", recovery_window=30)
        proxy.lose_downstream()  # requests reach Redis; no answer comes back
        try:
            acquire = asyncio.create_task(session.semaphore("s").acquire(ephemeral=True))
            await asyncio.sleep(1.0)  # applied, and sent again, unanswered
            owners = (await other.semaphore("s").describe(owners=True)).owners
            assert [o.session_id for o in owners] == [session.id]
        finally:
            proxy.lose_downstream(False)
            proxy.drop()
        lease = await asyncio.wait_for(acquire, 10)
        owners = (await other.semaphore("s").describe(owners=True)).owners
        assert [(o.session_id, o.token) for o in owners] == [(session.id, lease.token)]
        await lease.release()
        taken = await other.mutex("s").lock(timeout=5)  # nothing of it was left
        assert taken.token > lease.token


async def test_an_update_whose_answers_were_lost_is_not_applied_again_after_another(
    redis_url: str,
) -> None:
    """Found by the fault suite's linearizable scenario (on tenure://, then looked for
    here): an update sent again after its answers were lost was applied a second time
    after another client's update, undoing it. It now carries a request key, so the
    retry is answered as the first try was."""
    async with (
        proxied(redis_url) as (proxy, through),
        tenure.connect(through, request_timeout=0.3) as client,
        tenure.connect(redis_url) as other_client,
    ):
        await client.create_node("n")
        other = await other_client.session("n")
        session = await client.session("n", recovery_window=30)
        await other.semaphore("r").create(limit=1, data=b"0")
        proxy.lose_downstream()  # requests reach Redis; no answer comes back
        try:
            updating = asyncio.create_task(session.semaphore("r").update(b"mine"))
            await asyncio.sleep(0.5)  # applied, and sent again, unanswered
            assert (await other.semaphore("r").describe()).data == b"mine"
            await other.semaphore("r").update(b"theirs")
            await asyncio.sleep(0.5)  # sent again meanwhile
        finally:
            proxy.lose_downstream(False)
            proxy.drop()
        await asyncio.wait_for(updating, 10)
        assert (await other.semaphore("r").describe()).data == b"theirs"


async def test_a_partition_within_the_window_loses_nothing(redis_url: str) -> None:
    """The client is cut off for less than its window: its session carries on, and a
    grant pushed meanwhile is read from its inbox once the partition heals."""
    async with (
        proxied(redis_url) as (proxy, through),
        tenure.connect(through, request_timeout=0.5) as client,
        tenure.connect(redis_url) as other_client,
    ):
        await client.create_node("n")
        other = await other_client.session("n")
        blocker = await other.mutex("m").lock()
        session = await client.session("n", recovery_window=3)
        kept = await session.mutex("kept").lock()
        waiting = asyncio.create_task(session.mutex("m").lock())
        for _ in range(100):  # until the request is queued
            if (await other.semaphore("m").describe(waiters=True)).waiters:
                break
            await asyncio.sleep(0.02)
        proxy.stall()
        proxy.drop()
        await blocker.release()  # granted to the cut-off session: pushed to its inbox
        await asyncio.sleep(1.5)  # well inside the 3 s window
        proxy.resume()
        lease = await asyncio.wait_for(waiting, 10)
        assert lease.token > blocker.token
        assert kept.held
        assert session.lost_reason is None
        owners = (await other.semaphore("kept").describe(owners=True)).owners
        assert [o.token for o in owners] == [kept.token]


async def test_a_killed_server_restarts_with_every_acknowledged_hold(
    redis_fresh: RedisServer,
) -> None:
    """kill -9 and restart (appendfsync always): holds, queues and the token counter
    survive; the session re-attaches by itself and the queue moves on."""
    url = redis_fresh.url(0)
    async with tenure.connect(url, request_timeout=1) as client:
        await client.create_node("n")
        session = await client.session("n", recovery_window=10)
        other = await client.session("n", recovery_window=10)
        held = await session.mutex("m").lock()
        waiting = asyncio.create_task(other.mutex("m").lock())
        for _ in range(100):
            if (await session.semaphore("m").describe(waiters=True)).waiters:
                break
            await asyncio.sleep(0.02)
        await redis_fresh.akill()
        await redis_fresh.astart()
        description = await session.semaphore("m").describe(owners=True, waiters=True)
        assert [o.token for o in description.owners] == [held.token]
        assert [w.session_id for w in description.waiters] == [other.id]
        await held.release()  # the grant is pushed to the waiter's inbox, read anew
        lease = await asyncio.wait_for(waiting, 10)
        assert lease.token > held.token
        fresh = await session.mutex("n2").lock()
        assert fresh.token > lease.token
        assert session.lost_reason is None
        assert other.lost_reason is None


async def test_a_release_redis_does_not_answer_is_sent_until_the_session_ends(
    redis_url: str,
) -> None:
    """A release is never given up while its session may live on: a hold left in Redis
    would be restated, old token and all, by the session's next acquire of the name.
    Cut off for good, the release ends with the session's loss (which ``release()``
    takes quietly), never with UnavailableError."""
    async with (
        proxied(redis_url) as (proxy, through),
        tenure.connect(through, request_timeout=0.3) as client,
    ):
        await client.create_node("n")
        session = await client.session("n", recovery_window=2)
        lock = await session.mutex("m").lock()
        proxy.stall()
        proxy.drop()
        try:
            await asyncio.wait_for(lock.release(), 10)
            assert isinstance(session.lost_reason, SessionExpiredError)
        finally:
            proxy.resume()
