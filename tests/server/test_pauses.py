"""The server's own pauses are not its clients' silence (issue 37, docs/guarantees.md 6e).

A client that kept pinging while the server could not hear it (a stalled event
loop; the whole server stopped with SIGSTOP) keeps its session and its locks; a
client that truly went silent is still closed and its lock goes to the next waiter.
Raw protocol clients against a real server; every wait is bounded, nothing is
timed: the stalls are made longer than the windows, which is what is under test.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AcquireStatus,
    AttachSession,
    Command,
    CreateNode,
    CreateSession,
    Granted,
)
from tenure._protocol import (
    NEED_DATA,
    ClientConnection,
    GoingAway,
    Hello,
    Ping,
    Pong,
    Reply,
    Request,
    Welcome,
)
from tenure.server import DataDir, Journal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._serve import Server
from tenure.server._server_host import wal_host

from .wire import WAIT, Clients, ServerProcess, WireClient, bound

pytestmark = pytest.mark.timeout(60)


WINDOW = 0.4  # seconds: the recovery window of the pinging holder
STALL = 3 * WINDOW  # how long the server cannot hear: longer than the window


def stalls_logged(server: ServerProcess) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in server.lines() if line.startswith("{")]
    return [line for line in lines if line["msg"].startswith("the event loop stalled")]


async def holder_and_waiter(holder: WireClient, waiter: WireClient) -> int:
    """``holder`` holds lock m of node n with a WINDOW session; ``waiter`` queues for it."""
    await waiter.call(CreateNode("n"))
    kept = (await holder.call(CreateSession("n", b"k1", timeout=WINDOW))).session_id
    got = await holder.call(Acquire(kept, "m", MAX_COUNT, request_id=1, ephemeral=True))
    assert got.status is AcquireStatus.GRANTED
    waiting = (await waiter.call(CreateSession("n", b"k2", timeout=30.0))).session_id
    queued = await waiter.call(Acquire(waiting, "m", MAX_COUNT, request_id=2, ephemeral=True))
    assert queued.status is AcquireStatus.QUEUED
    return int(kept)


async def pongs_until(client: WireClient, nonce: int) -> None:
    """Read (bounded) until the Pong of ``nonce``; nothing else but Pongs may come."""
    while True:
        event = await client.next_event()
        assert isinstance(event, Pong), event
        if event.nonce == nonce:
            return


async def nothing_granted(waiter: WireClient) -> None:
    """A ping round trip: anything pushed to ``waiter`` before it is read by then."""
    await waiter.ping(10_000)
    assert not any(isinstance(effect, Granted) for effect in waiter.pushes)


async def test_a_pinging_holder_keeps_its_session_and_lock_through_a_sigstop(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data") as server:
        holder = await wire.connect(server.port)
        waiter = await wire.connect(server.port)
        kept = await holder_and_waiter(holder, waiter)

        server.proc.send_signal(signal.SIGSTOP)
        try:
            # The holder goes on pinging, four times a window, into a server that
            # cannot read: its frames wait in the socket.
            nonce, stopped_at = 0, time.monotonic()
            while time.monotonic() - stopped_at < STALL:
                nonce += 1
                holder.writer.write(holder.codec.send(Ping(nonce)))
                await asyncio.sleep(WINDOW / 4)
        finally:
            server.proc.send_signal(signal.SIGCONT)

        await pongs_until(holder, nonce)  # no GoingAway before the pongs
        assert (await holder.call(AttachSession(kept, b"k1", 2))).seq_no == 2  # still alive
        await nothing_granted(waiter)  # and the lock was never the waiter's
        assert not any(isinstance(event, GoingAway) for event in holder.events)

    # The stop was seen as one stall longer than a window (of three windows' length).
    assert any(stalled["stalled_for"] > WINDOW for stalled in stalls_logged(server))
    assert "silent for a recovery window; closing" not in server.output()


async def test_a_silent_holder_still_expires_after_a_sigstop(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data") as server:
        silent = await wire.connect(server.port)
        waiter = await wire.connect(server.port)
        await holder_and_waiter(silent, waiter)
        closing = asyncio.ensure_future(silent.until_closed())
        server.proc.send_signal(signal.SIGSTOP)
        try:
            await asyncio.sleep(STALL)  # (nobody sends anything: it is the stall under test)
        finally:
            server.proc.send_signal(signal.SIGCONT)
        # The holder never says anything: one window of heard time later it is
        # closed, and the waiter is granted the lock.
        granted = await waiter.next_push()
        assert isinstance(granted, Granted)
        events = await closing
        assert isinstance(events[0], GoingAway)
        assert "past the recovery window" in events[0].reason


class BlockingClient:
    """A raw client on a blocking socket, for a thread: it can send while the server's
    loop (this test's loop) is stalled."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        self.codec = ClientConnection()
        self._next_id = 0

    def send(self, message: Hello | Ping | Request) -> None:
        self.sock.sendall(self.codec.send(message))

    def next_event(self) -> Any:
        while True:
            event = self.codec.next_event()
            if event is not NEED_DATA:
                return event
            self.codec.receive_data(self.sock.recv(65536))

    def call(self, command: Command[Any]) -> Any:
        self._next_id += 1
        self.send(Request(self._next_id, command))
        while True:
            event = self.next_event()
            if isinstance(event, Reply) and event.request_id == self._next_id:
                return event.value
            assert isinstance(event, Pong), event

    def open_holding(self, window: float) -> int:
        """Handshake, then hold lock m of node n in a session of ``window``; its id."""
        self.send(Hello(client_name="test"))
        assert isinstance(self.next_event(), Welcome)
        session_id = int(self.call(CreateSession("n", b"k1", timeout=window)).session_id)
        got = self.call(Acquire(session_id, "m", MAX_COUNT, request_id=1, ephemeral=True))
        assert got.status is AcquireStatus.GRANTED
        return session_id

    def ping_for(self, seconds: float, started: threading.Event) -> int:
        """Ping four times a window for ``seconds`` (answers unread); the last nonce."""
        nonce, began = 0, time.monotonic()
        while time.monotonic() - began < seconds:
            nonce += 1
            self.send(Ping(nonce))
            started.set()
            time.sleep(WINDOW / 4)
        return nonce

    def pongs_until(self, nonce: int) -> None:
        while True:
            event = self.next_event()
            assert isinstance(event, Pong), event
            if event.nonce == nonce:
                return


def loop_factories() -> list[Any]:
    """Both loops the server runs on: they order timers and reads differently (uvloop
    fires due timers before it reads the sockets after a stalled step)."""
    factories: list[Any] = [pytest.param(asyncio.new_event_loop, id="asyncio")]
    try:
        import uvloop
    except ImportError:  # (an optional dependency: the asyncio case still runs)
        return factories
    return [*factories, pytest.param(uvloop.new_event_loop, id="uvloop")]


@asynccontextmanager
async def running(path: Path, idle_timeout: float) -> AsyncIterator[tuple[Server, int]]:
    """A real Server in this loop (so that the test can block its loop); stopped at the end."""
    journal = Journal(DataDir(path))
    engine = journal.open(asyncio.get_running_loop().time())
    config = ServeConfig(port=0, data_dir=path, idle_timeout=idle_timeout)
    server = Server(config, wal_host(config, journal, engine), bound(config), b"1" * 16)
    _, port = await server.start()
    try:
        yield server, port
    finally:
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0


@pytest.mark.parametrize("loop_factory", loop_factories())
@pytest.mark.parametrize("limit", ["window", "idle_timeout"])
def test_a_pinging_holder_keeps_its_lock_through_a_stall_of_the_servers_loop(
    tmp_path: Path, loop_factory: Callable[[], asyncio.AbstractEventLoop], limit: str
) -> None:
    """Either limit would close the holder if the stall counted: its session's window,
    or (with a long window) the server's ``--idle-timeout``."""
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        if limit == "window":
            runner.run(stall_while_pinging(tmp_path, window=WINDOW, idle_timeout=15.0))
        else:
            runner.run(stall_while_pinging(tmp_path, window=30.0, idle_timeout=WINDOW))


async def stall_while_pinging(tmp_path: Path, *, window: float, idle_timeout: float) -> None:
    """A real Server in this loop; a holder pings from a thread while one request's
    step blocks the loop (as a slow disk, a GC pause or a quadratic listing would)."""
    clients = Clients()
    try:
        async with running(tmp_path / "data", idle_timeout) as (server, port):
            execute = server.host.execute

            def slow_execute(
                command: Command[Any], actor: str = "", raw: bytes | None = None
            ) -> Any:
                if command == CreateNode("slow"):
                    time.sleep(STALL)  # blocks the loop inside a read: nothing else is read
                return execute(command, actor, raw)

            server.host.execute = slow_execute  # type: ignore[method-assign]
            waiter = await clients.connect(port)
            await waiter.call(CreateNode("n"))
            holder = BlockingClient(port)
            try:
                kept = await asyncio.to_thread(holder.open_holding, window)
                waiting = (await waiter.call(CreateSession("n", b"k2", timeout=30.0))).session_id
                queued = await waiter.call(Acquire(waiting, "m", MAX_COUNT, 2, ephemeral=True))
                assert queued.status is AcquireStatus.QUEUED

                started = threading.Event()
                pinging = asyncio.ensure_future(
                    asyncio.to_thread(holder.ping_for, STALL + WINDOW, started)
                )
                assert await asyncio.to_thread(started.wait, WAIT)
                await waiter.call(CreateNode("slow"))  # the stall, on the server's loop
                nonce = await pinging
                await asyncio.to_thread(holder.pongs_until, nonce)
                reattached = await asyncio.to_thread(holder.call, AttachSession(kept, b"k1", 2))
                assert reattached.seq_no == 2
                if window < idle_timeout:
                    await nothing_granted(waiter)
                # (Else the lock would be kept anyway for its long window, and the
                # waiter, quiet once the stall is over, may be closed as idle itself.)
                assert server.gate.pauses.stalls >= 1
            finally:
                holder.sock.close()
    finally:
        await clients.close_all()
