"""A client's close ends on the server the sessions it gave up (issue 47, the soak's pool).

A tenure client gives its session up one recovery window after the server last
answered (docs/guarantees.md, 6a), and closes it on the server once it can reach it
again. A program that closes its client meanwhile (the usual reaction to the loss)
used to drop those closes: the server kept the session, and its locks, for another
window, and a restart in between gave it a fresh one. Now the client's close waits,
within ``close_wait``, for a connection and closes them there, as etcd's session
close revokes its lease.

A real ``tenure serve`` stopped with SIGSTOP for longer than the window: the
client's keepalive drops the connection first (it waits half a window for a Pong),
so when the session is given up there is no connection to close it on. Nothing is
timed: every wait is bounded, and what is asserted is that the session is gone from
the server, and its lock free, as soon as the close returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import tenure
import tenure.sync
from tenure.backends._shard import Shard
from tenure.backends.remote import TenureBackend
from tenure.errors import InvalidArgumentError, SessionExpiredError, TenureError
from tests.api.support import eventually

from .wire import ServerProcess

pytestmark = pytest.mark.timeout(90)

#: The recovery window: over four times the keepalive's least patience (2 s), so the
#: connection is dropped (half a window without a Pong) before the session is given up.
WINDOW = 5.0
#: Bound of every wait; also the clients' ``close_wait``.
WAIT = 20.0


def shard_of(client: tenure.Client) -> Shard:
    backend = client.backend
    assert isinstance(backend, TenureBackend)
    return backend.shards[0]


def started(closing: asyncio.Future[None], shard: Shard) -> Callable[[], Awaitable[bool]]:
    """Whether the client's close is over, or its closes of sessions are under way."""

    async def check() -> bool:
        return closing.done() or bool(shard._tasks)

    return check


async def session_ids(client: tenure.Client) -> set[int]:
    return {summary.session_id for summary in await client.list_sessions("n")}


async def close_while_stopped(
    server: ServerProcess,
    shard: Shard,
    given_up: Callable[[], Awaitable[None]],
    close: Callable[[], Awaitable[None]],
) -> None:
    """Stop the server (SIGSTOP), wait (``given_up``) for the client to give its session
    up, and ``close`` the client: the close must wait, its closes of sessions under way
    with the server still stopped; then let the server go on and await the close."""
    server.proc.send_signal(signal.SIGSTOP)
    try:
        await given_up()
        closing = asyncio.ensure_future(close())
        # Before: the close returned at once, the session dropped. Now it
        # waits for a connection, its close under way (the server still stopped).
        await eventually(started(closing, shard), "the close started")
    finally:
        server.proc.send_signal(signal.SIGCONT)
    async with asyncio.timeout(WAIT):
        await closing


async def assert_closed_and_free(other: tenure.Client, session_id: int, held: int) -> None:
    """Gone from the server when the close returns: the next holder takes the lock (held
    with fencing token ``held``) now, not a recovery window later."""
    assert session_id not in await session_ids(other)
    mine = await other.session("n")
    taken = await mine.mutex("job").try_lock()
    assert taken is not None
    assert taken.token > held


@dataclass
class Holding:
    """A server, another client of it, and a client whose session holds ``job``."""

    server: ServerProcess
    other: tenure.Client
    client: tenure.Client
    session: tenure.Session
    lock: tenure.Lock
    shard: Shard


@asynccontextmanager
async def holding(tmp_path: Path) -> AsyncIterator[Holding]:
    """A :class:`Holding` (node ``n``; the holder's window :data:`WINDOW`, its close
    bounded by :data:`WAIT`); the other client closed at the end, the server stopped."""
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as other:
            await other.create_node("n")
            client = await tenure.connect(url, close_wait=WAIT)
            session = await client.session("n", recovery_window=WINDOW)
            lock = await session.mutex("job").lock()
            yield Holding(server, other, client, session, lock, shard_of(client))


async def test_closing_the_client_closes_the_session_it_gave_up(tmp_path: Path) -> None:
    async with holding(tmp_path) as it:

        async def given_up() -> None:
            async with asyncio.timeout(WAIT):
                reason = await it.session.lost  # given up on the client's clock
            assert isinstance(reason, SessionExpiredError)
            assert not it.shard.link.connected  # nothing to close it on now

        await close_while_stopped(it.server, it.shard, given_up, it.client.aclose)
        await assert_closed_and_free(it.other, it.session.id, it.lock.token)


async def test_a_close_during_the_reconnection_that_closes_a_session_given_up_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The session given up is closed by the next connection's set-up (Shard.connected).
    # A client's close that began meanwhile found nothing left to close (that set-up
    # had taken it) and closed the link under it: the session was left to expire.
    async with holding(tmp_path) as it:
        closing: list[asyncio.Future[None]] = []
        close_all_began = asyncio.Event()
        close_all = Shard._close_all
        close_after_attach = Shard._close_after_attach

        async def noted_close_all(self: Shard) -> None:
            close_all_began.set()
            await close_all(self)

        async def close_begins_first(self: Shard, store: Any) -> None:
            # The set-up is closing the session given up: the client's close begins.
            closing.append(asyncio.ensure_future(it.client.aclose()))
            async with asyncio.timeout(WAIT):
                await close_all_began.wait()
            await close_after_attach(self, store)

        monkeypatch.setattr(Shard, "_close_all", noted_close_all)
        monkeypatch.setattr(Shard, "_close_after_attach", close_begins_first)
        it.server.proc.send_signal(signal.SIGSTOP)
        try:
            async with asyncio.timeout(WAIT):
                await it.session.lost  # given up on the client's clock
            assert not it.shard.link.connected
        finally:
            it.server.proc.send_signal(signal.SIGCONT)
        with contextlib.suppress(TenureError):  # closed under it, or answered
            await it.client.list_sessions("n")  # connects: the set-up closes the session
        assert len(closing) == 1
        async with asyncio.timeout(WAIT):
            await closing[0]
        await assert_closed_and_free(it.other, it.session.id, it.lock.token)


async def test_the_sync_face_closes_the_session_it_gave_up(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        async with tenure.connect(url) as other:
            await other.create_node("n")
            client = await asyncio.to_thread(tenure.sync.connect, url, close_wait=WAIT)
            session = await asyncio.to_thread(client.session, "n", recovery_window=WINDOW)
            lock = await asyncio.to_thread(session.mutex("job").lock)
            shard = shard_of(client._client)
            lost = threading.Event()
            session.on_lost(lambda _reason: lost.set())

            async def given_up() -> None:
                assert await asyncio.to_thread(lost.wait, WAIT)
                assert isinstance(session.lost_reason, SessionExpiredError)

            async def close() -> None:
                await asyncio.to_thread(client.close)

            await close_while_stopped(server, shard, given_up, close)
            await assert_closed_and_free(other, session.id, lock.token)


async def test_a_close_that_cannot_reach_the_server_gives_up_at_close_wait(
    tmp_path: Path,
) -> None:
    # The server stays stopped: the close waits its close_wait for a connection, then
    # drops the session (left to expire on the server) rather than hang.
    with ServerProcess(tmp_path / "data", "--fsync", "off") as server:
        url = f"tenure://127.0.0.1:{server.port}"
        client = await tenure.connect(url, close_wait=0.5)
        await client.create_node("n")
        session = await client.session("n", recovery_window=WINDOW)
        await session.mutex("job").lock()
        shard = shard_of(client)
        server.proc.send_signal(signal.SIGSTOP)
        try:
            async with asyncio.timeout(WAIT):
                await session.lost
                await client.aclose()
            assert shard.link.closing
            assert not shard._tasks
        finally:
            server.proc.send_signal(signal.SIGCONT)


@pytest.mark.parametrize("value", ["0", "-1", "soon", "3601"])
async def test_a_bad_close_wait_is_refused(value: str) -> None:
    with pytest.raises(InvalidArgumentError, match="close_wait"):
        await tenure.connect(f"tenure://127.0.0.1:1?close_wait={value}")
