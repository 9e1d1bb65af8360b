"""Listing, identity and kill_session checks the store backends' tests share.

Each check takes the URL of a store of the test's own (a key prefix, a schema) and
runs against the real server; ``tests/backends/{etcd,redis,postgres}/`` call them
and add what only their store has (an upgrade of its layout, its own costs).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

import tenure
from tenure._core.values import ClientIdentity
from tenure.errors import InvalidArgumentError, NotFoundError, SessionExpiredError
from tests.netproxy import NetProxy

#: Node and semaphore names whose escaped forms (etcd's %-encoding, Redis's hash-tag
#: escapes) sort differently from the names: pages are in code point order anyway.
TRICKY_NAMES = ["a:b", "a9", "a}b", "x%7B", "é", "b", "a{", "a/b", "a.b", "z"]


class Quiet:
    """A listener for a backend session opened directly (nothing is lost there)."""

    def session_lost(self, error: BaseException) -> None:
        raise AssertionError(f"unexpected loss: {error}")

    def lease_lost(self, name: str, token: int, error: BaseException) -> None:
        raise AssertionError(f"unexpected lease loss of {name}: {error}")


async def until(probe: Callable[[], Awaitable[Any]], wanted: Any, seconds: float = 5) -> None:
    """Wait until ``probe()`` answers ``wanted`` (polling every 20 ms, at most ``seconds``)."""
    for _ in range(int(seconds / 0.02)):
        if await probe() == wanted:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{probe} never answered {wanted!r}")


async def all_nodes(client: tenure.Client, limit: int) -> list[str]:
    """Every node, read page by page."""
    names: list[str] = []
    for _ in range(1000):
        page = await client.backend.list_nodes(after=names[-1] if names else "", limit=limit)
        names += page
        if len(page) < limit:
            return names
    raise AssertionError("more pages than nodes")


async def waiters_of(client: tenure.Client, node: str, name: str) -> int:
    """How many requests wait for ``name`` (from a listing)."""
    found = await client.backend.list_semaphores(node, prefix=name, after="", limit=1)
    return found[0].waiters if found else 0


async def lost(session: tenure.Session) -> bool:
    """Whether ``session`` was lost."""
    return session.lost_reason is not None


async def check_nodes_in_order(url: str, page: int = 3) -> None:
    """Nodes with tricky names list in code point order, page by page."""
    async with tenure.connect(url) as client:
        for name in TRICKY_NAMES:
            await client.create_node(name)
        assert await all_nodes(client, page) == sorted(TRICKY_NAMES)
        after_a9 = [name for name in sorted(TRICKY_NAMES) if name > "a9"][:2]
        assert await client.backend.list_nodes(after="a9", limit=2) == after_a9
        assert await client.backend.list_nodes(after="é", limit=5) == []
        with pytest.raises(InvalidArgumentError):
            await client.backend.list_nodes(after="", limit=0)
        with pytest.raises(InvalidArgumentError):
            await client.backend.list_nodes(after="", limit=10_001)


async def check_semaphores_by_prefix(url: str, count: int = 25, page: int = 4) -> None:
    """Semaphores page by prefix and ``after``, with their counts; a missing node is
    NotFoundError."""
    async with tenure.connect(url) as client:
        backend = client.backend
        await client.create_node("n")
        one, two = await client.session("n"), await client.session("n")
        for i in range(count):
            await one.semaphore(f"job:{i:03d}").create(limit=3)
        for name in TRICKY_NAMES:
            await one.semaphore(name).create(limit=1)
        await one.semaphore("job:003").acquire(count=2)
        await two.semaphore("job:003").acquire(count=1)
        await one.mutex("job:eph").lock()
        queued = asyncio.create_task(two.semaphore("job:003").acquire(count=2))
        try:
            await until(lambda: waiters_of(client, "n", "job:003"), 1)
            names, after = [], ""
            for _ in range(count):
                found = await backend.list_semaphores("n", prefix="job:", after=after, limit=page)
                names += [s.name for s in found]
                if len(found) < page:
                    break
                after = found[-1].name
            assert names == [f"job:{i:03d}" for i in range(count)] + ["job:eph"]
            everything = await backend.list_semaphores("n", prefix="", after="", limit=10_000)
            assert [s.name for s in everything] == sorted(names + TRICKY_NAMES)
            (three,) = await backend.list_semaphores("n", prefix="job:003", after="", limit=10)
            assert (three.limit, three.count, three.owners, three.waiters) == (3, 3, 2, 1)
            assert not three.ephemeral
            (eph,) = await backend.list_semaphores("n", prefix="job:eph", after="", limit=10)
            assert (eph.owners, eph.waiters, eph.ephemeral) == (1, 0, True)
            with pytest.raises(NotFoundError, match="node 'missing'"):
                await backend.list_semaphores("missing", prefix="", after="", limit=1)
            with pytest.raises(NotFoundError, match="node 'missing'"):
                await backend.list_sessions("missing", after=0, limit=1)
            with pytest.raises(InvalidArgumentError):
                await backend.list_sessions("n", after=-1, limit=1)
        finally:
            queued.cancel()


async def check_identity_and_times(url: str, *, store_clock: bool = True) -> None:
    """Owners, waiters and sessions carry description, identity and times; sessions
    list by id with their holds and waits."""
    async with tenure.connect(url) as client, tenure.connect(url) as other_client:
        backend = client.backend
        await client.create_node("n")
        who = ClientIdentity("host-a", 4242, "billing-worker")
        holder = await backend.open_session(
            "n", timeout=5.0, description="exporter", listener=Quiet(), identity=who
        )
        before = time.time()
        grant = await holder.acquire("m", count=1, data=b"", timeout=None, ephemeral=True)
        assert grant is not None
        waiter = await other_client.session("n", description="second")
        waiting = asyncio.create_task(waiter.mutex("m").lock())
        try:
            await until(lambda: waiters_of(client, "n", "m"), 1)
            described = await holder.describe_semaphore("m", owners=True, waiters=True)
            (owner,) = described.owners
            assert (owner.description, owner.identity) == ("exporter", who)
            assert owner.since is not None
            assert abs(owner.since - before) < 5
            (queued,) = described.waiters
            assert queued.description == "second"
            assert queued.since is not None
            assert queued.since >= owner.since - (0 if store_clock else 1)
            sessions = await backend.list_sessions("n", after=0, limit=10)
            assert [s.session_id for s in sessions] == sorted(s.session_id for s in sessions)
            mine = next(s for s in sessions if s.session_id == holder.session_id)
            assert (mine.identity, mine.description, mine.holds, mine.waits) == (
                who,
                "exporter",
                1,
                0,
            )
            assert mine.timeout == holder.recovery_window
            assert mine.created_at is not None
            assert abs(mine.created_at - before) < 5
            assert mine.expires_in is not None
            assert 0 <= mine.expires_in <= holder.recovery_window + 1
            theirs = next(s for s in sessions if s.session_id == waiter.id)
            assert (theirs.holds, theirs.waits) == (0, 1)
            later = await backend.list_sessions("n", after=holder.session_id, limit=10)
            assert all(s.session_id > holder.session_id for s in later)
        finally:
            waiting.cancel()
            await holder.close()


async def check_kill_session(url: str, *, lock_delay: float) -> None:
    """kill_session ends a session as its expiry would: the waiter is granted (after
    the lock-delay), the victim's client hears SessionExpiredError naming an operator;
    a missing session or node is NotFoundError."""
    async with tenure.connect(url) as client, tenure.connect(url) as ops:
        await client.create_node("n", lock_delay=lock_delay)
        victim = await client.session("n")
        held = await victim.mutex("m").lock()
        waiter = await client.session("n")
        waiting = asyncio.create_task(waiter.mutex("m").lock())
        await until(lambda: waiters_of(ops, "n", "m"), 1)
        killed_at = time.monotonic()
        await ops.backend.kill_session("n", victim.id)
        lease = await asyncio.wait_for(waiting, 10)
        assert time.monotonic() - killed_at >= lock_delay * 0.8
        assert lease.token > held.token
        await until(lambda: lost(victim), True)
        assert isinstance(victim.lost_reason, SessionExpiredError)
        assert "operator" in str(victim.lost_reason)
        with pytest.raises(SessionExpiredError):
            await victim.mutex("x").lock()
        with pytest.raises(NotFoundError, match="session"):
            await ops.backend.kill_session("n", victim.id)
        with pytest.raises(NotFoundError, match="node 'nope'"):
            await ops.backend.kill_session("nope", 1)


async def check_kill_partitioned(proxy: NetProxy, through: str, url: str) -> None:
    """The victim's client is cut off (``through`` goes by ``proxy``): the waiter is
    granted at once, and the victim hears why when the partition heals, within its
    window."""
    async with tenure.connect(through, request_timeout=0.5) as cut_off, tenure.connect(url) as ops:
        await ops.create_node("n")
        victim = await cut_off.session("n", recovery_window=10)
        held = await victim.mutex("m").lock()
        waiter = await ops.session("n")
        waiting = asyncio.create_task(waiter.mutex("m").lock())
        await until(lambda: waiters_of(ops, "n", "m"), 1)
        proxy.stall()
        await ops.backend.kill_session("n", victim.id)
        lease = await asyncio.wait_for(waiting, 5)
        assert lease.token > held.token
        assert victim.lost_reason is None  # it cannot know yet
        await asyncio.sleep(0.5)
        proxy.resume()
        await until(lambda: lost(victim), True, seconds=8)
        assert isinstance(victim.lost_reason, SessionExpiredError)
        assert "operator" in str(victim.lost_reason)
