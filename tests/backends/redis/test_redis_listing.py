"""Listing, identity and kill_session on a real Redis: what the kit cannot reach.

Pages of nodes walk the database with SCAN (more keys than one SCAN batch here),
semaphores and sessions come from the node's sorted indexes (made again from the
older layout's sets on first use: an upgrade in place), times are Redis's TIME,
and kill_session ends a session as its expiry would, also one whose client is cut
off.
"""

from __future__ import annotations

import msgpack
import redis.asyncio as aioredis

import tenure
from tenure._core.values import ClientIdentity
from tenure.backends.redis import node_base
from tenure.backends.redis._listing import SCAN_BATCH
from tests.backends.store_listing import (
    TRICKY_NAMES,
    all_nodes,
    check_identity_and_times,
    check_kill_partitioned,
    check_kill_session,
    check_nodes_in_order,
    check_semaphores_by_prefix,
)
from tests.netproxy import NetProxy


def _prefix(url: str) -> str:
    return url.split("prefix=", 1)[1]


def _raw(url: str) -> aioredis.Redis:
    return aioredis.Redis.from_url(url.split("?", 1)[0])


async def test_nodes_are_listed_in_code_point_order(redis_url: str) -> None:
    await check_nodes_in_order(redis_url)


async def test_a_node_listing_spans_scan_batches_and_skips_keys_inside_nodes(
    redis_url: str,
) -> None:
    async with tenure.connect(redis_url) as client:
        await client.create_node("b")
        await client.create_node("c")
        # More keys than one SCAN batch, named like a node's settings but inside one
        # (a semaphore "x}:cfg" of node b has the key "<prefix>{b}:m:x}:cfg").
        raw = _raw(redis_url)
        try:
            async with raw.pipeline(transaction=False) as pipe:
                for i in range(SCAN_BATCH + 500):
                    pipe.set(f"{node_base(_prefix(redis_url), 'b')}filler:{i}}}:cfg", "x")
                await pipe.execute()
        finally:
            await raw.aclose()
        session = await client.session("b")
        await session.semaphore("x}:cfg").create(limit=1)
        assert await all_nodes(client, 1) == ["b", "c"]


async def test_semaphores_page_by_prefix_with_counts(redis_url: str) -> None:
    await check_semaphores_by_prefix(redis_url)


async def test_owners_waiters_and_sessions_carry_identity_and_redis_time(redis_url: str) -> None:
    await check_identity_and_times(redis_url)


async def test_an_older_layout_is_upgraded_in_place(redis_url: str) -> None:
    """A node written before the indexes and identities: its fields read as defaults and
    its indexes are made again on the first listing."""
    async with tenure.connect(redis_url) as client:
        backend = client.backend
        await client.create_node("n")
        session = await client.session("n", description="old")
        lease = await session.mutex("m").lock()
        for name in TRICKY_NAMES:
            await session.semaphore(name).create(limit=2)
        base = node_base(_prefix(redis_url), "n")
        raw = _raw(redis_url)
        try:
            # What the previous library kept: no indexes, no identity or creation
            # time, owner records of six fields.
            await raw.delete(f"{base}semz", f"{base}sidz")
            await raw.hdel(f"{base}s:{session.id}", "host", "pid", "cn", "at")
            for field, value in (await raw.hgetall(f"{base}r:m")).items():
                await raw.hset(f"{base}r:m", field, msgpack.packb(msgpack.unpackb(value)[:6]))
        finally:
            await raw.aclose()
        listed = await backend.list_semaphores("n", prefix="", after="", limit=100)
        assert [s.name for s in listed] == sorted([*TRICKY_NAMES, "m"])
        (old,) = await backend.list_sessions("n", after=0, limit=9)
        assert (old.session_id, old.description) == (session.id, "old")
        assert old.identity == ClientIdentity()
        assert old.created_at is None
        (owner,) = (await session.semaphore("m").describe(owners=True)).owners
        assert owner.token == lease.token
        assert owner.since is None
        await lease.release()  # the old record still works
        assert [
            s.name for s in await backend.list_semaphores("n", prefix="m", after="", limit=9)
        ] == []


async def test_kill_session_ends_it_as_expiry_with_lock_delay(redis_url: str) -> None:
    await check_kill_session(redis_url, lock_delay=0.5)


async def test_kill_session_of_a_partitioned_client(redis_url: str) -> None:
    port = int(redis_url.split("//", 1)[1].split(":", 1)[1].split("/", 1)[0])
    async with NetProxy("127.0.0.1", port) as proxy:
        through = redis_url.replace(f":{port}/", f":{proxy.port}/")
        await check_kill_partitioned(proxy, through, redis_url)
