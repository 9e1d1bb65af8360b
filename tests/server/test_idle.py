"""Idle and handshake timeouts (docs/protocol.md section 12) against a real ``tenure serve``.

No timing assertions: the tests only wait (bounded) for what the server must do, and
check what it must not do while the client keeps its side of the contract.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tenure._core import MAX_COUNT, Acquire, AcquireStatus, CreateNode, CreateSession, Granted
from tenure._protocol import ConnectionClosed, GoingAway, Pong, Refused, Welcome
from tenure.errors import ErrorCode

from .wire import WAIT, Clients, ServerProcess, WireClient

pytestmark = pytest.mark.timeout(60)

IDLE = 0.5  # seconds; short so the tests are quick, long enough to ping within


async def keep_pinging(client: WireClient, until: Callable[[], bool]) -> None:
    """Ping every IDLE / 5 seconds, as a client must, until ``until()`` (bounded by WAIT)."""
    nonce = 0
    async with asyncio.timeout(WAIT):
        while not until():
            nonce += 1
            assert (await client.ping(nonce)).nonce == nonce
            await asyncio.sleep(IDLE / 5)


async def test_silent_client_is_closed_and_its_session_detached(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data", "--idle-timeout", str(IDLE)) as server:
        waiter = await wire.connect(server.port)
        assert waiter.welcome is not None
        assert waiter.welcome.idle_timeout == IDLE
        await waiter.call(CreateNode("n"))
        silent = await wire.connect(server.port)
        # A window longer than IDLE: the idle timeout acts first (a shorter one
        # would close the connection sooner, see test_silence.py).
        held = (await silent.call(CreateSession("n", b"k1", timeout=0.8))).session_id
        got = await silent.call(Acquire(held, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert got.status is AcquireStatus.GRANTED
        waiting = (await waiter.call(CreateSession("n", b"k2", timeout=60.0))).session_id
        queued = await waiter.call(Acquire(waiting, "m", MAX_COUNT, request_id=2, ephemeral=True))
        assert queued.status is AcquireStatus.QUEUED

        # The waiter pings (as clients must) until it is granted the lock; the
        # silent client hears GoingAway, then the end of the stream.
        pinger = asyncio.ensure_future(keep_pinging(waiter, lambda: bool(waiter.pushes)))
        try:
            events = await silent.until_closed()
            assert isinstance(events[0], GoingAway)
            assert events[0].code is ErrorCode.UNAVAILABLE
            assert events[0].reason == f"idle for {IDLE:g} s"
            assert isinstance(events[-1], ConnectionClosed)
        finally:
            # Its session was detached (not closed): it expires 0.8 s after the
            # silent client's last frame, and the waiter is granted the lock.
            await pinger
        assert isinstance(waiter.pushes[0], Granted)
        assert waiter.pushes[0].session_id == waiting
        assert not any(isinstance(event, GoingAway) for event in waiter.events)
        server.wait_log(f'"sessions": [{held}]')  # detached as a lost connection's


async def test_pinging_client_is_never_closed(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--idle-timeout", str(IDLE)) as server:
        client = await wire.connect(server.port)
        silent = await wire.connect(server.port)
        done = asyncio.Event()
        pinger = asyncio.ensure_future(keep_pinging(client, done.is_set))
        try:
            # The silent one is closed; meanwhile the pinging one lived through
            # well over one idle_timeout of its own.
            events = await silent.until_closed()
            assert isinstance(events[0], GoingAway)
            again = await wire.connect(server.port)  # and one more idle_timeout
            assert isinstance((await again.until_closed())[0], GoingAway)
        finally:
            done.set()
            await asyncio.wait_for(pinger, WAIT)
        assert [type(e) for e in client.events if not isinstance(e, Pong)] == [Welcome]
        assert await client.call(CreateNode("still-here")) is None


async def test_requests_count_as_activity(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--idle-timeout", str(IDLE)) as server:
        client = await wire.connect(server.port)
        silent = await wire.connect(server.port)
        closing = asyncio.ensure_future(silent.until_closed())
        n = 0
        while not closing.done():  # busy with requests (no pings) while the other idles
            n += 1
            await client.call(CreateNode(f"n{n}"))
            await asyncio.sleep(IDLE / 5)
        assert isinstance((await closing)[0], GoingAway)
        assert await client.call(CreateNode("last")) is None


async def test_no_hello_within_handshake_timeout_is_refused(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--handshake-timeout", "0.3") as server:
        mute = await wire.connect(server.port, hello=False)
        half = await wire.connect(server.port, hello=False)
        half.writer.write(b"\x00\x00\x00\x10\x95\x01")  # the start of a Hello, never finished
        for client in (mute, half):
            events = await client.until_closed()
            assert isinstance(events[0], Refused)
            assert events[0].code is ErrorCode.PROTOCOL
            assert events[0].message == "no Hello within 0.3 s"
            assert isinstance(events[-1], ConnectionClosed)
        # Connections that say Hello in time are served, and the handshake timeout
        # does not apply to them once they are in.
        good = await wire.connect(server.port)
        await asyncio.sleep(0.4)
        assert (await good.ping(7)).nonce == 7
