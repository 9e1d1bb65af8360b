"""A ``tenure://`` request's deadline (``request_timeout``) against a server that answers
Pings but no request (issue 58): ``session()``, ``lock()`` and the end of an
``async with`` block settle, with RequestTimeoutError where a call fails, and the
connection is made again; a queued acquire is never cut short by it.

The server is a scripted in-process member (tests/backends/fake_cluster.py) that speaks
the real codec and serves on a real engine; ``deaf = True`` makes it read requests and
answer none, while it still answers every Ping (so the keepalive never gives up on it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import TypeVar

import pytest

import tenure
import tenure.sync
from tenure._protocol.messages import STANDALONE
from tenure.backends._link_deadline import REQUEST_TIMEOUT
from tenure.backends._link_dial import LinkOptions
from tenure.backends._remote_url import parse
from tenure.backends.remote import TenureBackend
from tenure.errors import InvalidArgumentError, RequestTimeoutError, UnavailableError
from tests.api.support import spawn, wait_for_waiters
from tests.backends.fake_cluster import FakeCluster, FakeMember

pytestmark = pytest.mark.timeout(120)

T = TypeVar("T")

#: The bound of every wait here: only a hang reaches it (a busy machine never does).
HANG = 30.0
#: The ``request_timeout`` of the clients here, in seconds.
DEADLINE = 1.0
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture
async def member() -> AsyncIterator[FakeMember]:
    """A single server (standalone) on a free loopback port, answering everything."""
    cluster = FakeCluster()
    server = await FakeMember("t1", cluster, role=STANDALONE).start()
    try:
        yield server
    finally:
        await server.close()
        cluster.close()


async def settled(awaitable: Awaitable[T], what: str) -> T:
    """``awaitable``'s outcome; an AssertionError naming ``what`` if it hangs."""
    try:
        async with asyncio.timeout(HANG):
            return await awaitable
    except TimeoutError:
        raise AssertionError(f"{what} did not settle in {HANG:g} s") from None


def backend(client: tenure.Client) -> TenureBackend:
    assert isinstance(client.backend, TenureBackend)
    return client.backend


def epoch(client: tenure.Client) -> int:
    """Which connection of the client's link is up (1 for the first)."""
    return backend(client).shards[0].link.epoch


# -- the option -----------------------------------------------------------------------


def test_the_default_is_thirty_seconds_as_the_docs_say() -> None:
    assert REQUEST_TIMEOUT == 30.0
    assert LinkOptions().request_timeout == REQUEST_TIMEOUT
    assert parse("tenure://127.0.0.1:6388", {}).link.request_timeout == REQUEST_TIMEOUT
    said = (DOCS / "guarantees.md").read_text()
    assert "`request_timeout` (seconds, default 30," in " ".join(said.split())
    assert "`request_timeout`, 30 s by default" in " ".join(
        (DOCS / "protocol.md").read_text().split()
    )


def test_the_url_and_the_keyword_set_it_the_keyword_winning() -> None:
    assert parse("tenure://h:1?request_timeout=2.5", {}).link.request_timeout == 2.5
    assert parse("tenure://h:1", {"request_timeout": 4}).link.request_timeout == 4.0
    both = parse("tenure://h:1?request_timeout=2.5", {"request_timeout": "7"})
    assert both.link.request_timeout == 7.0


@pytest.mark.parametrize("value", ["0", "-1", "soon", "nan", "inf", "3601", ""])
async def test_a_bad_request_timeout_is_refused_naming_it(value: str) -> None:
    said = r"^request_timeout must be (a number of seconds|in \(0, 3600\] seconds, got)"
    with pytest.raises(InvalidArgumentError, match=said):
        await tenure.connect(f"tenure://127.0.0.1:1?request_timeout={value}")
    with pytest.raises(InvalidArgumentError, match=said):
        await tenure.connect("tenure://127.0.0.1:1", request_timeout=value)


# -- a server that answers Pings but no request ----------------------------------------


async def test_session_raises_request_timeout_and_the_connection_is_made_again(
    member: FakeMember,
) -> None:
    async with tenure.connect(f"tenure://{member.address}", request_timeout=DEADLINE) as client:
        await client.create_node("n")
        member.deaf = True
        with pytest.raises(RequestTimeoutError) as raised:
            await settled(client.session("n"), "session()")
        assert isinstance(raised.value, UnavailableError)
        assert not isinstance(raised.value, TimeoutError)  # (not a lock found busy)
        assert str(raised.value) == (
            f"{member.address} did not answer CreateSession within 1 s (request_timeout): "
            "it may or may not have been applied; the connection was closed and is made again"
        )
        assert member.requests[-1] == "CreateSession"
        member.deaf = False  # served again: the new connection carries the next session
        async with await settled(client.session("n"), "session() once answered") as session:
            assert not session.closed
        assert epoch(client) >= 2


async def test_lock_raises_request_timeout_and_the_session_comes_back(
    member: FakeMember,
) -> None:
    async with tenure.connect(f"tenure://{member.address}", request_timeout=DEADLINE) as client:
        await client.create_node("n")
        session = await client.session("n")
        first = epoch(client)
        member.deaf = True
        with pytest.raises(RequestTimeoutError, match="did not answer Acquire within 1 s"):
            await settled(session.mutex("job").lock(), "lock()")
        member.deaf = False
        # The session re-attaches on a new connection (within its window) and locks.
        lock = await settled(session.mutex("job").lock(), "lock() once answered")
        assert epoch(client) > first
        assert not session.closed
        await settled(lock.release(), "release()")


async def test_the_end_of_an_async_with_block_and_the_close_settle(member: FakeMember) -> None:
    client = await tenure.connect(f"tenure://{member.address}", request_timeout=DEADLINE)
    await client.create_node("n")

    async def blocks() -> None:
        async with client.session("n") as session, session.mutex("job"):
            member.deaf = True  # the release and the session's close are never answered

    await settled(blocks(), "the end of the async with blocks")
    await settled(client.aclose(), "the client's close")
    assert "Release" in member.requests  # (sent, never answered)


async def test_the_sync_face_passes_request_timeout_through(member: FakeMember) -> None:
    member.deaf = True

    def session_of_a_deaf_server() -> None:
        url = f"tenure://{member.address}"
        with (
            tenure.sync.connect(url, request_timeout=DEADLINE) as client,
            pytest.raises(RequestTimeoutError, match="CreateSession within 1 s"),
        ):
            client.session("n")

    await settled(asyncio.to_thread(session_of_a_deaf_server), "the sync session()")


# -- what the deadline does not bound ---------------------------------------------------


async def test_a_queued_acquire_waits_past_the_deadline_for_its_grant(member: FakeMember) -> None:
    # QUEUED is the acquire's answer, at once; its grant is a push, which no deadline
    # bounds: the lock waits in its queue as long as its holder keeps it.
    deadline = 0.3
    async with tenure.connect(f"tenure://{member.address}", request_timeout=deadline) as client:
        await client.create_node("n")
        holder = await client.session("n")
        waiter = await client.session("n")
        held = await holder.mutex("job").lock()
        queued = spawn(waiter.mutex("job").lock())
        await wait_for_waiters(holder, "job", 1)
        before = epoch(client)
        await asyncio.sleep(4 * deadline)  # (time for a wrongly applied deadline to pass)
        assert not queued.done()
        assert epoch(client) == before  # no connection replaced
        await held.release()
        lock = await settled(queued, "the queued lock()")
        assert lock.token > held.token
        await lock.release()
