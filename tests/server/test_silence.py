"""A connection silent for its sessions' recovery window is closed and they are detached.

ZooKeeper's rule (docs/protocol.md section 12, docs/guarantees.md 6): a session
expires one recovery window after the server last heard from its client, whether
or not the connection still looks open. Raw protocol clients against a real
``tenure serve`` with its default idle timeout (15 s), far longer than the windows
here; every wait is bounded, nothing is timed.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    AttachSession,
    CreateNode,
    CreateSession,
    Granted,
)
from tenure._protocol import ConnectionClosed, GoingAway
from tenure.errors import ErrorCode

from .wire import WAIT, Clients, ServerProcess

pytestmark = pytest.mark.timeout(60)

WINDOW = 0.3  # seconds: the shortest recovery window of the silent client


def log_lines(server: ServerProcess, msg: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in server.lines() if line.startswith("{")]
    return [line for line in lines if line["msg"] == msg]


async def test_a_silent_holder_is_detached_one_window_after_its_last_frame(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        waiter = await wire.connect(server.port)
        await waiter.call(CreateNode("n"))
        silent = await wire.connect(server.port)
        short = (await silent.call(CreateSession("n", b"k1", timeout=WINDOW))).session_id
        long = (await silent.call(CreateSession("n", b"k2", timeout=30.0))).session_id
        got = await silent.call(Acquire(short, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert got.status is AcquireStatus.GRANTED
        waiting = (await waiter.call(CreateSession("n", b"k3", timeout=30.0))).session_id
        queued = await waiter.call(Acquire(waiting, "m", MAX_COUNT, request_id=2, ephemeral=True))
        assert queued.status is AcquireStatus.QUEUED

        # The holder says nothing more (a partition would look the same to the
        # server: the connection stays open). It hears GoingAway, then the end.
        events = await silent.until_closed()
        assert isinstance(events[0], GoingAway)
        assert events[0].code is ErrorCode.UNAVAILABLE
        assert "past the recovery window" in events[0].reason
        assert isinstance(events[-1], ConnectionClosed)
        granted = await waiter.next_push()  # within WAIT, far short of the idle timeout
        assert isinstance(granted, Granted)
        assert granted.session_id == waiting

    assert log_lines(server, "idle; closing") == []
    (closed,) = log_lines(server, "silent for a recovery window; closing")
    assert closed["window"] == WINDOW
    (detached,) = log_lines(server, "connection lost; sessions detached")
    assert detached["sessions"] == [short, long]
    assert isinstance(detached["silent_for"], float)
    assert detached["silent_for"] >= WINDOW


async def test_a_longer_window_runs_on_from_the_last_frame_and_can_be_reattached(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        silent = await wire.connect(server.port)
        await silent.call(CreateNode("n"))
        short = (await silent.call(CreateSession("n", b"k1", timeout=WINDOW))).session_id
        long = (await silent.call(CreateSession("n", b"k2", timeout=30.0))).session_id
        assert isinstance((await silent.until_closed())[0], GoingAway)
        again = await wire.connect(server.port)
        expired = await again.fail(AttachSession(short, b"k1", 2))
        assert expired.code is ErrorCode.SESSION_EXPIRED
        assert (await again.call(AttachSession(long, b"k2", 2))).seq_no == 2


async def test_a_quiet_client_that_pings_keeps_its_short_window_sessions(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        pinging = await wire.connect(server.port)
        await pinging.call(CreateNode("n"))
        kept = (await pinging.call(CreateSession("n", b"k1", timeout=WINDOW))).session_id
        got = await pinging.call(Acquire(kept, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert got.status is AcquireStatus.GRANTED
        # A silent neighbour is closed after one window; meanwhile the pinging
        # client (four pings per window, as the tenure client does) lives through
        # two windows of its own.
        silent = await wire.connect(server.port)
        await silent.call(CreateSession("n", b"k2", timeout=WINDOW))
        closing = asyncio.ensure_future(silent.until_closed())
        nonce = 0
        async with asyncio.timeout(WAIT):
            while not closing.done():
                nonce += 1
                await pinging.ping(nonce)
                await asyncio.sleep(WINDOW / 4)
        assert isinstance((await closing)[0], GoingAway)
        again = await wire.connect(server.port)  # and one more window, pinging
        await again.call(CreateSession("n", b"k3", timeout=WINDOW))
        closing = asyncio.ensure_future(again.until_closed())
        async with asyncio.timeout(WAIT):
            while not closing.done():
                nonce += 1
                await pinging.ping(nonce)
                await asyncio.sleep(WINDOW / 4)
        assert not any(isinstance(event, GoingAway) for event in pinging.events)
        assert await pinging.call(AttachSession(kept, b"k1", 2)) is not None  # still alive
