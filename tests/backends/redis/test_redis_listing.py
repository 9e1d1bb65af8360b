"""Listing, identity and kill_session on a real Redis: what the kit cannot reach.

Pages of nodes walk the database with SCAN (more keys than one SCAN batch here),
semaphores and sessions come from the node's sorted indexes (made again from the
older layout's sets on first use: an upgrade in place), times are Redis's TIME,
and kill_session ends a session as its expiry would, also one whose client is cut
off.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import redis.asyncio as aioredis

import tenure
from tenure._core.values import ClientIdentity
from tenure.backends.redis import RedisBackend, node_base
from tenure.backends.redis._listing import SCAN_BATCH
from tenure.errors import InvalidArgumentError, NotFoundError, SessionExpiredError
from tests.netproxy import NetProxy


def _backend(client: tenure.Client) -> RedisBackend:
    backend = client.backend
    assert isinstance(backend, RedisBackend)
    return backend


def _prefix(url: str) -> str:
    return url.split("prefix=", 1)[1]


async def _all_nodes(backend: RedisBackend, limit: int) -> list[str]:
    names: list[str] = []
    for _ in range(100):
        page = await backend.list_nodes(after=names[-1] if names else "", limit=limit)
        names += page
        if len(page) < limit:
            return names
    raise AssertionError("more pages than nodes")


async def test_nodes_are_listed_in_order_across_scan_batches(redis_url: str) -> None:
    names = ["a:b", "a9", "a}b", "x%7B", "é", "b", "a{", "z"]
    async with tenure.connect(redis_url) as client:
        backend = _backend(client)
        for name in names:
            await client.create_node(name)
        # More keys than one SCAN batch, some of them inside a node and named like
        # a node's settings (a semaphore "x}:cfg" has the key "...{b}:m:x}:cfg").
        raw = aioredis.Redis.from_url(redis_url.split("?", 1)[0])
        try:
            prefix = _prefix(redis_url)
            async with raw.pipeline(transaction=False) as pipe:
                for i in range(SCAN_BATCH + 500):
                    pipe.set(f"{node_base(prefix, 'b')}filler:{i}}}:cfg", "x")
                await pipe.execute()
        finally:
            await raw.aclose()
        session = await client.session("b")
        await session.semaphore("x}:cfg").create(limit=1)
        assert await _all_nodes(backend, 3) == sorted(names)
        assert await backend.list_nodes(after="a9", limit=2) == sorted(names)[1:3]
        with pytest.raises(InvalidArgumentError):
            await backend.list_nodes(after="", limit=0)


async def test_semaphores_page_by_prefix_with_counts(redis_url: str) -> None:
    async with tenure.connect(redis_url) as client:
        backend = _backend(client)
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        for i in range(25):
            await one.semaphore(f"job:{i:02d}").create(limit=3)
        await one.semaphore("other").create(limit=1)
        await one.semaphore("job:03").acquire(count=2)
        await two.semaphore("job:03").acquire(count=1)
        queued = asyncio.create_task(two.semaphore("job:03").acquire(count=2))
        try:
            await _until(lambda: _waiters(backend, "job:03"), 1)
            names, after = [], ""
            for _ in range(10):
                page = await backend.list_semaphores("n", prefix="job:", after=after, limit=4)
                names += [s.name for s in page]
                if len(page) < 4:
                    break
                after = page[-1].name
            assert names == [f"job:{i:02d}" for i in range(25)]
            (three,) = await backend.list_semaphores("n", prefix="job:03", after="", limit=10)
            assert (three.limit, three.count, three.owners, three.waiters) == (3, 3, 2, 1)
            assert not three.ephemeral
            with pytest.raises(NotFoundError, match="node 'missing'"):
                await backend.list_semaphores("missing", prefix="", after="", limit=1)
        finally:
            queued.cancel()


async def _waiters(backend: RedisBackend, name: str) -> int:
    (found,) = await backend.list_semaphores("n", prefix=name, after="", limit=1)
    return found.waiters


async def _until(probe: object, wanted: int) -> None:
    for _ in range(200):
        if await probe() == wanted:  # type: ignore[operator]
            return
        await asyncio.sleep(0.02)
    raise AssertionError("never reached")


async def test_owners_waiters_and_sessions_carry_identity_and_redis_time(redis_url: str) -> None:
    async with (
        tenure.connect(redis_url) as client,
        tenure.connect(redis_url) as other_client,
    ):
        backend = _backend(client)
        await client.create_node("n")
        who = ClientIdentity("host-a", 4242, "billing-worker")
        holder = await backend.open_session(
            "n", timeout=5.0, description="exporter", listener=_Quiet(), identity=who
        )
        before = time.time()
        grant = await holder.acquire("m", count=1, data=b"", timeout=None, ephemeral=True)
        assert grant is not None
        waiter = await other_client.session("n", description="second")
        waiting = asyncio.create_task(waiter.mutex("m").lock())
        try:
            await _until(lambda: _waiters(backend, "m"), 1)
            described = await holder.describe_semaphore("m", owners=True, waiters=True)
            (owner,) = described.owners
            assert (owner.description, owner.identity) == ("exporter", who)
            assert owner.since is not None
            assert abs(owner.since - before) < 5
            (queued,) = described.waiters
            assert queued.description == "second"
            assert queued.since is not None
            assert queued.since >= owner.since
            sessions = await backend.list_sessions("n", after=0, limit=10)
            mine = next(s for s in sessions if s.session_id == holder.session_id)
            assert (mine.identity, mine.description, mine.holds, mine.waits) == (
                who,
                "exporter",
                1,
                0,
            )
            assert mine.timeout == 5.0
            assert mine.created_at is not None
            assert abs(mine.created_at - before) < 5
            assert mine.expires_in is not None
            assert 0 < mine.expires_in <= 5.0
            theirs = next(s for s in sessions if s.session_id == waiter.id)
            assert (theirs.holds, theirs.waits) == (0, 1)
            assert [s.session_id for s in sessions] == sorted(s.session_id for s in sessions)
            after = await backend.list_sessions("n", after=holder.session_id, limit=10)
            assert holder.session_id not in [s.session_id for s in after]
        finally:
            waiting.cancel()
            await holder.close()


async def test_an_older_layout_is_upgraded_in_place(redis_url: str) -> None:
    """A node written before the indexes and identities: its fields read as defaults and
    its indexes are made again on the first listing."""
    async with tenure.connect(redis_url) as client:
        backend = _backend(client)
        await client.create_node("n")
        session = await client.session("n", description="old")
        lease = await session.mutex("m").lock()
        await session.semaphore("s").create(limit=2)
        base = node_base(_prefix(redis_url), "n")
        raw = aioredis.Redis.from_url(redis_url.split("?", 1)[0])
        try:
            # What the previous library kept: no indexes, no identity or creation time,
            # owner records of six fields.
            await raw.delete(f"{base}semz", f"{base}sidz")
            await raw.hdel(f"{base}s:{session.id}", "host", "pid", "cn", "at")
            import msgpack

            records = await raw.hgetall(f"{base}r:m")
            for field, value in records.items():
                await raw.hset(f"{base}r:m", field, msgpack.packb(msgpack.unpackb(value)[:6]))
        finally:
            await raw.aclose()
        names = [s.name for s in await backend.list_semaphores("n", prefix="", after="", limit=9)]
        assert names == ["m", "s"]
        (listed,) = await backend.list_sessions("n", after=0, limit=9)
        assert (listed.session_id, listed.description) == (session.id, "old")
        assert listed.identity == ClientIdentity()
        assert listed.created_at is None
        (owner,) = (await session.semaphore("m").describe(owners=True)).owners
        assert owner.token == lease.token
        assert owner.since is None
        await lease.release()  # the old record still works


async def test_kill_session_ends_it_as_expiry_with_lock_delay(redis_url: str) -> None:
    async with tenure.connect(redis_url) as client, tenure.connect(redis_url) as ops:
        await client.create_node("n", lock_delay=0.5)
        victim = await client.session("n")
        held = await victim.mutex("m").lock()
        waiter = await client.session("n")
        waiting = asyncio.create_task(waiter.mutex("m").lock())
        await _until(lambda: _waiters(_backend(ops), "m"), 1)
        killed_at = time.monotonic()
        await _backend(ops).kill_session("n", victim.id)
        lease = await asyncio.wait_for(waiting, 5)
        assert time.monotonic() - killed_at >= 0.4  # lock-delay, as on expiry
        assert lease.token > held.token
        await _until(lambda: _lost(victim), 1)
        assert isinstance(victim.lost_reason, SessionExpiredError)
        assert "operator" in str(victim.lost_reason)
        with pytest.raises(SessionExpiredError, match="operator"):
            await victim.mutex("x").lock()
        with pytest.raises(NotFoundError, match="session"):
            await _backend(ops).kill_session("n", victim.id)
        with pytest.raises(NotFoundError, match="node 'nope'"):
            await _backend(ops).kill_session("nope", 1)


async def _lost(session: tenure.Session) -> int:
    return int(session.lost_reason is not None)


async def test_kill_session_of_a_partitioned_client(redis_url: str) -> None:
    """Its client cannot hear it; the waiter is granted at once, and the client hears
    why when the partition heals (within its window)."""
    port = int(redis_url.split("//", 1)[1].split(":", 1)[1].split("/", 1)[0])
    async with NetProxy("127.0.0.1", port) as proxy:
        through = redis_url.replace(f":{port}/", f":{proxy.port}/")
        async with (
            tenure.connect(through, request_timeout=0.5) as cut_off,
            tenure.connect(redis_url) as ops,
        ):
            await ops.create_node("n")
            victim = await cut_off.session("n", recovery_window=10)
            held = await victim.mutex("m").lock()
            waiter = await ops.session("n")
            waiting = asyncio.create_task(waiter.mutex("m").lock())
            await _until(lambda: _waiters(_backend(ops), "m"), 1)
            proxy.stall()
            await _backend(ops).kill_session("n", victim.id)
            lease = await asyncio.wait_for(waiting, 5)  # at once: no lock-delay here
            assert lease.token > held.token
            assert victim.lost_reason is None  # it cannot know yet
            proxy.resume()
            await _until(lambda: _lost(victim), 1)
            assert isinstance(victim.lost_reason, SessionExpiredError)
            assert "operator" in str(victim.lost_reason)


class _Quiet:
    """A listener for a backend session opened directly (nothing is lost here)."""

    def session_lost(self, error: BaseException) -> None:
        raise AssertionError(f"unexpected loss: {error}")

    def lease_lost(self, name: str, token: int, error: BaseException) -> None:
        raise AssertionError(f"unexpected lease loss: {name}")
