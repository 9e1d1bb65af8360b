"""Listing and identity: what operators see of nodes, semaphores, sessions; and kill.

Every backend lists nodes, a node's semaphores (by prefix) and its live sessions in
sorted pages; shows on owners and waiters who holds (the session's description,
its client's host, pid and ``client_name``) and since when (UNIX seconds by the
store's clock); describes a mutex as a mutex; and ends a session by id
(``kill_session``) as an expiry would.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

import tenure
from tenure.errors import InvalidArgumentError, NotFoundError, SessionExpiredError
from tenure.testing._clock import FakeClock

from .harness import DropAtEnd, Harness, unique
from .support import spawn, wait_for_waiters, within

#: How far a store's clock (on this machine: the tests reach loopback only) may be
#: from this process's, in seconds, when a time it reports is checked.
CLOCK_SLACK = 5.0


@asynccontextmanager
async def named_client(
    backend: Harness, state_name: str, state_clock: FakeClock | None, client_name: str
) -> AsyncIterator[tenure.Client]:
    """A client of this test's state that connected with ``client_name``."""
    client = await tenure.connect(
        backend.url(state_name), client_name=client_name, **backend.options(state_clock)
    )
    try:
        yield client
    finally:
        await client.aclose()


def assert_recent(when: float | None, started: float) -> None:
    """``when`` is a UNIX time between the test's start and now (within CLOCK_SLACK)."""
    assert when is not None
    assert started - CLOCK_SLACK <= when <= time.time() + CLOCK_SLACK, (when, started)


def this_host() -> str:
    """This host's name as a client identity carries it (at most 1024 UTF-8 bytes)."""
    return socket.gethostname().encode("utf-8", "replace")[:1024].decode("utf-8", "ignore")


async def test_nodes_are_listed_sorted(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    prefix = unique("listed")
    names = [drop_at_end(f"{prefix}-{letter}") for letter in "bac"]
    for name in names:
        await client.create_node(name)

    listed = await client.list_nodes()

    assert listed == sorted(listed)
    assert [name for name in listed if name.startswith(prefix)] == sorted(names)
    assert node in listed
    first = await client.backend.list_nodes(after=f"{prefix}-a", limit=1)
    assert first == [f"{prefix}-b"]  # ``after`` is exclusive


async def test_semaphores_are_listed_by_prefix_with_their_counts(
    client: tenure.Client, node: str
) -> None:
    async with client.session(node) as one, client.session(node) as two:
        for name in ("jobs/b", "jobs/a", "other"):
            await one.semaphore(name).create(limit=3)
        await one.semaphore("jobs/a").acquire(2)
        await two.semaphore("jobs/a").acquire(1)
        held = await one.mutex("jobs/m").lock()
        waiting = spawn(two.mutex("jobs/m").lock())
        await wait_for_waiters(one, "jobs/m", 1)

        listed = await client.list_semaphores(node, prefix="jobs/")

        assert [s.name for s in listed] == ["jobs/a", "jobs/b", "jobs/m"]
        a, b, m = listed
        assert (a.limit, a.count, a.owners, a.waiters, a.ephemeral) == (3, 3, 2, 0, False)
        assert (b.limit, b.count, b.owners, b.waiters, b.ephemeral) == (3, 0, 0, 0, False)
        assert (m.owners, m.waiters, m.ephemeral) == (1, 1, True)
        everything = await client.list_semaphores(node)
        assert [s.name for s in everything] == ["jobs/a", "jobs/b", "jobs/m", "other"]
        await held.release()
        await (await within(waiting, "the waiter's grant")).release()


async def test_listings_come_in_sorted_pages(client: tenure.Client, node: str) -> None:
    async with client.session(node) as session:
        names = [f"s{i}" for i in (4, 1, 3, 0, 2)]
        for name in names:
            await session.semaphore(name).create(limit=1)
        pages: list[list[str]] = []
        after = ""
        for _ in range(10):  # 5 names in pages of 2: 3 pages
            page = await client.backend.list_semaphores(node, prefix="", after=after, limit=2)
            pages.append([s.name for s in page])
            if len(page) < 2:
                break
            after = page[-1].name
        assert pages == [["s0", "s1"], ["s2", "s3"], ["s4"]]

        async with client.session(node) as other:
            [first] = await client.backend.list_sessions(node, after=0, limit=1)
            assert first.session_id == min(session.id, other.id)
            rest = await client.backend.list_sessions(node, after=first.session_id, limit=5)
            assert [s.session_id for s in rest] == [max(session.id, other.id)]


@pytest.mark.parametrize("limit", [0, 10_001])
async def test_a_page_size_out_of_range_is_refused(
    client: tenure.Client, node: str, limit: int
) -> None:
    with pytest.raises(InvalidArgumentError):
        await client.backend.list_nodes(after="", limit=limit)
    with pytest.raises(InvalidArgumentError):
        await client.backend.list_semaphores(node, prefix="", after="", limit=limit)
    with pytest.raises(InvalidArgumentError):
        await client.backend.list_sessions(node, after=0, limit=limit)


async def test_sessions_are_listed_with_who_runs_them_and_what_they_hold(
    backend: Harness, state_name: str, state_clock: FakeClock | None, node: str
) -> None:
    started = time.time()
    async with (
        named_client(backend, state_name, state_clock, "billing-worker") as alice,
        named_client(backend, state_name, state_clock, "") as bob,
        alice.session(node, recovery_window=30.0, description="exporter") as exporter,
        bob.session(node, recovery_window=30.0) as other,
    ):
        assert alice.identity == tenure.ClientIdentity(this_host(), os.getpid(), "billing-worker")
        await exporter.mutex("a").lock()
        await exporter.mutex("b").lock()
        waiting = spawn(other.mutex("a").lock())
        await wait_for_waiters(exporter, "a", 1)

        listed = {s.session_id: s for s in await alice.list_sessions(node)}

        mine, theirs = listed[exporter.id], listed[other.id]
        assert (mine.description, mine.identity) == ("exporter", alice.identity)
        assert (mine.holds, mine.waits, mine.timeout) == (2, 0, 30.0)
        assert (theirs.description, theirs.identity.name, theirs.identity.pid) == (
            "",
            "",
            os.getpid(),
        )
        assert (theirs.holds, theirs.waits) == (0, 1)
        for summary in (mine, theirs):
            assert_recent(summary.created_at, started)
            # None while a connection keeps it; else no more than its window.
            assert summary.expires_in is None or 0 < summary.expires_in <= 30.0 + 1.0
        waiting.cancel()


async def test_owners_and_waiters_show_who_and_since_when(
    backend: Harness, state_name: str, state_clock: FakeClock | None, node: str
) -> None:
    started = time.time()
    async with (
        named_client(backend, state_name, state_clock, "alice") as alice,
        named_client(backend, state_name, state_clock, "bob") as bob,
        alice.session(node, description="exporter") as holder,
        bob.session(node, description="backup") as waiter,
    ):
        lock = await holder.mutex("job").lock()
        waiting = spawn(waiter.mutex("job").lock())
        await wait_for_waiters(holder, "job", 1)

        described = await waiter.mutex("job").describe()

        assert (described.name, described.held, described.limit) == ("job", True, 1)
        owner = described.owner
        assert owner is not None
        assert (owner.session_id, owner.token) == (holder.id, lock.token)
        assert (owner.description, owner.identity) == ("exporter", alice.identity)
        assert_recent(owner.since, started)
        [queued] = described.waiters
        assert (queued.session_id, queued.description) == (waiter.id, "backup")
        assert queued.identity == bob.identity
        assert_recent(queued.since, started)
        semaphore = await holder.semaphore("job").describe(owners=True, waiters=True)
        assert [o.identity.name for o in semaphore.owners] == ["alice"]
        assert [w.identity.name for w in semaphore.waiters] == ["bob"]
        await lock.release()
        await (await within(waiting, "the waiter's grant")).release()


async def test_a_free_mutex_describes_as_not_held(client: tenure.Client, node: str) -> None:
    async with client.session(node) as session:
        free = await session.mutex("never-taken").describe()
        assert (free.held, free.owner, free.waiters, free.limit) == (False, None, (), 1)
        lock = await session.mutex("taken-once").lock()
        await lock.release()
        assert not (await session.mutex("taken-once").describe()).held


async def test_kill_session_ends_it_and_serves_the_next_waiter(
    client: tenure.Client, client2: tenure.Client, node: str
) -> None:
    # Not a ``with`` block: its end would raise the session's loss, which is the point.
    victim = await client.session(node)
    async with client2.session(node) as next_in_line:
        lock = await victim.mutex("job").lock()
        await victim.semaphore("pool").create(limit=1)
        await victim.semaphore("pool").acquire(1)
        waiting = spawn(next_in_line.mutex("job").lock())
        await wait_for_waiters(victim, "job", 1)

        await client2.kill_session(node, victim.id)

        reason = await within(victim.lost, "the killed session's loss")
        assert isinstance(reason, SessionExpiredError)
        assert "operator" in str(reason)
        assert isinstance(lock.lost_reason, SessionExpiredError)
        granted = await within(waiting, "the next waiter's grant")
        assert granted.token > lock.token
        assert victim.id not in [s.session_id for s in await client2.list_sessions(node)]
        pool = await next_in_line.semaphore("pool").describe(owners=True)
        assert pool.count == 0  # its holds were released
        with pytest.raises(NotFoundError):
            await client2.kill_session(node, victim.id)  # not live any more
        await granted.release()
    await victim.close()


async def test_listing_or_killing_on_a_missing_node_or_session_is_not_found(
    client: tenure.Client, node: str, drop_at_end: DropAtEnd
) -> None:
    missing = unique("missing")
    with pytest.raises(NotFoundError):
        await client.list_semaphores(missing)
    with pytest.raises(NotFoundError):
        await client.list_sessions(missing)
    with pytest.raises(NotFoundError):
        await client.kill_session(missing, 1)
    other = drop_at_end(unique("other"))
    await client.create_node(other)
    async with client.session(other) as elsewhere:
        with pytest.raises(NotFoundError):
            await client.kill_session(node, elsewhere.id)  # a session of another node
        assert elsewhere.lost_reason is None
    with pytest.raises(NotFoundError):
        await client.kill_session(node, 2**62)
