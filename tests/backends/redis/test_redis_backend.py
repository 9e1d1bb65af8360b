"""The redis:// backend on a real Redis, on Redis's own clock: what the kit cannot do there.

Expiry, timeouts, lease TTLs and lock-delay run on Redis's clock (the kit skips the
tests that need a fake one), limits are checked inside one function, and the
server's settings decide what the backend declares.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
import redis.asyncio as aioredis

import tenure
from tenure.backends.redis import node_base
from tenure.errors import (
    AuthenticationError,
    LeaseLostError,
    LimitExceededError,
    PermissionDeniedError,
    SessionExpiredError,
    UnsupportedError,
)
from tests.backends.stalling import stall
from tests.redis.server import RedisServer


async def test_an_expired_session_frees_its_hold_and_the_next_waiter_is_woken(
    redis_url: str,
) -> None:
    async with tenure.connect(redis_url) as one, tenure.connect(redis_url) as two:
        await one.create_node("n")
        frozen = await one.session("n", recovery_window=0.5)
        held = await frozen.mutex("m").lock()
        stall(frozen)  # as if its process froze: its heartbeats stop
        waiter = await two.session("n")
        started = time.monotonic()
        # Nobody polls: the waiter's client arms a timer at the session's deadline
        # (Redis's clock), whose tick expires it and pushes the grant.
        lock = await asyncio.wait_for(waiter.mutex("m").lock(), 5)
        assert time.monotonic() - started >= 0.3
        assert lock.token > held.token
        # The frozen process wakes: its first call hears why its session ended.
        with pytest.raises(SessionExpiredError, match=r"not re-attached within 0\.5s"):
            await frozen.mutex("other").lock()
        assert isinstance(frozen.lost_reason, SessionExpiredError)


async def test_an_acquire_times_out_on_redis_clock(redis_url: str) -> None:
    async with tenure.connect(redis_url) as client:
        await client.create_node("n")
        holder = await client.session("n")
        await holder.mutex("m").lock()
        other = await client.session("n")
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="timed out waiting"):
            await asyncio.wait_for(other.mutex("m").lock(timeout=0.3), 5)
        assert time.monotonic() - started >= 0.25
        description = await other.semaphore("m").describe(waiters=True)
        assert description.waiters == ()  # the request was withdrawn by Redis


async def test_a_lease_ttl_runs_out_and_lock_delay_holds_the_next_grant_back(
    redis_url: str,
) -> None:
    async with tenure.connect(redis_url) as client:
        await client.create_node("n", default_lease=0.3, lock_delay=0.6)
        session = await client.session("n")
        lease = await session.mutex("m").lock()
        assert lease._grant.lease_ttl == pytest.approx(0.3)
        assert lease._renewer is not None
        lease._renewer.cancel()  # as if its holder froze: nobody renews it
        reason = await asyncio.wait_for(lease.lost.wait(), 5)
        assert isinstance(reason, LeaseLostError)
        lost_at = time.monotonic()
        other = await client.session("n")
        again = await asyncio.wait_for(other.mutex("m").lock(), 5)
        assert time.monotonic() - lost_at >= 0.4  # held back for the lock-delay
        assert again.token > lease.token
        await asyncio.sleep(0.5)  # renewed by its client meanwhile: still held
        assert again.held


async def test_two_clients_racing_for_the_last_session_place(redis_url: str) -> None:
    async with tenure.connect(redis_url) as one, tenure.connect(redis_url) as two:
        await one.create_node("n", max_sessions=1)
        results = await asyncio.gather(one.session("n"), two.session("n"), return_exceptions=True)
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(refused) == 1
        assert isinstance(refused[0], LimitExceededError)
        assert (await one.describe_node("n")).sessions == 1


async def test_two_clients_racing_for_the_last_waiter_place(redis_url: str) -> None:
    async with tenure.connect(redis_url) as one, tenure.connect(redis_url) as two:
        await one.create_node("n", max_waiters=1)
        holder = await one.session("n")
        await holder.mutex("m").lock()
        first, second = await one.session("n"), await two.session("n")
        tasks = [asyncio.ensure_future(s.mutex("m").lock()) for s in (first, second)]
        done, pending = await asyncio.wait(tasks, timeout=1)
        assert len(done) == 1
        assert len(pending) == 1
        assert isinstance(next(iter(done)).exception(), LimitExceededError)
        description = await holder.semaphore("m").describe(waiters=True)
        assert len(description.waiters) == 1
        for task in pending:
            task.cancel()


async def test_durable_only_with_fsync_always_and_never_replicated(
    redis_fresh: RedisServer,
) -> None:
    url = redis_fresh.url(0)
    async with tenure.connect(url) as client:
        assert tenure.Capability.DURABLE in client.capabilities
        assert tenure.Capability.REPLICATED not in client.capabilities
    admin = aioredis.Redis(port=redis_fresh.port)
    try:
        await admin.config_set("appendfsync", "everysec")
        async with tenure.connect(url) as client:
            assert tenure.Capability.DURABLE not in client.capabilities
            assert tenure.Capability.LOCK_DELAY in client.capabilities
        with pytest.raises(UnsupportedError, match="durable"):
            await tenure.connect(url, require={tenure.Capability.DURABLE})
    finally:
        await admin.aclose()


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-random"])
async def test_an_evicting_server_is_refused(redis_fresh: RedisServer, policy: str) -> None:
    admin = aioredis.Redis(port=redis_fresh.port)
    try:
        await admin.config_set("maxmemory-policy", policy)
        with pytest.raises(UnsupportedError, match="evict"):
            await tenure.connect(redis_fresh.url(0))
        await admin.config_set("maxmemory-policy", "volatile-lru")  # never our keys
        async with tenure.connect(redis_fresh.url(0)) as client:
            await client.create_node("n")
    finally:
        await admin.aclose()


async def test_tokens_keep_increasing_when_a_node_is_made_again(redis_url: str) -> None:
    async with tenure.connect(redis_url) as client:
        await client.create_node("n")
        async with client.session("n") as session:
            first = await session.mutex("m").lock()
        await client.drop_node("n")
        await client.create_node("n")
        async with client.session("n") as session:
            second = await session.mutex("m").lock()
            assert second.token > first.token
            assert session.id > 1  # session ids are not reused either


async def test_an_acl_user_in_the_url_and_clear_refusals(redis_fresh: RedisServer) -> None:
    admin = aioredis.Redis(port=redis_fresh.port)
    try:
        await admin.acl_setuser(
            "app", enabled=True, passwords=["+s3cret"], keys=["*"], commands=["+@all"]
        )
        await admin.acl_setuser(
            "blind", enabled=True, passwords=["+pw"], keys=["*"], commands=["+@all", "-info"]
        )
    finally:
        await admin.aclose()
    base = f"127.0.0.1:{redis_fresh.port}/0"
    async with tenure.connect(f"redis://app:s3cret@{base}") as client:
        await client.create_node("n")
        async with client.session("n") as session:
            assert (await session.mutex("m").lock()).token >= 1
    with pytest.raises(AuthenticationError):
        await tenure.connect(f"redis://app:wrong@{base}")
    with pytest.raises(PermissionDeniedError, match=r"\+info"):
        await tenure.connect(f"redis://blind:pw@{base}")


async def test_the_window_keeps_its_stored_field_and_an_old_node_reads_back(
    redis_server: RedisServer,
) -> None:
    """The settings hash names fields by short keys ('st': the recovery window, called
    session_timeout before): the rename changed nothing stored, and a node an older
    release wrote reads back with its window."""
    prefix = f"test-{uuid.uuid4().hex[:12]}:"
    admin = aioredis.Redis(port=redis_server.port)
    try:
        async with tenure.connect(f"{redis_server.url(0)}?prefix={prefix}") as client:
            await client.create_node("new", recovery_window=9.0)
            stored = await admin.hgetall(node_base(prefix, "new") + "cfg")
            assert stored[b"st"] == b"9.0"
            assert not any(b"window" in key or b"timeout" in key for key in stored)
            await client.create_node("old")
            # As the release before the rename wrote it (its config_args: repr(float)).
            await admin.hset(node_base(prefix, "old") + "cfg", mapping={"st": "12.0", "mw": "7"})
            config = (await client.describe_node("old")).config
            assert (config.recovery_window, config.max_waiters) == (12.0, 7)
            async with client.session("old") as session:
                assert session.recovery_window == 12.0
            altered = await client.alter_node("old", recovery_window=4.0)
            assert altered.config.recovery_window == 4.0
            assert await admin.hget(node_base(prefix, "old") + "cfg", "st") == b"4.0"
    finally:
        await admin.aclose()
