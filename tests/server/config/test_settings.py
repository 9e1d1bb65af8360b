"""What each former server constant does now that it is a setting, against real servers.

``idle_timeout`` and ``handshake_timeout`` are in test_idle.py; parsing and
precedence of every setting in test_config.py.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import pytest

from tenure._core import (
    MAX_COUNT,
    Acquire,
    AttachSession,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DeleteSemaphore,
    DescribeNode,
    DescribeSemaphore,
    Release,
)
from tenure._protocol import ConnectionClosed, GoingAway, Request
from tenure.errors import ErrorCode
from tenure.server import DataDir, Journal, ServeConfig, Server, wal_host
from tenure.server._durability.fsync_modes import LoopCommit
from tenure.server._durability.storage import FsyncMode

from ..wire import WAIT, Clients, ServerProcess, bound

pytestmark = pytest.mark.timeout(60)


async def test_max_queued_pushes_closes_an_overflowing_session(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data", "--max-queued-pushes", "1") as server:
        first = await wire.connect(server.port)
        await first.call(CreateNode("n"))
        s1 = (await first.call(CreateSession("n", b"k1"))).session_id
        second = await wire.connect(server.port)
        s2 = (await second.call(CreateSession("n", b"k2"))).session_id
        await first.call(Acquire(s1, "m", MAX_COUNT, request_id=1, ephemeral=True))
        await second.call(Acquire(s2, "x", 1, request_id=1, ephemeral=True))
        await second.call(Acquire(s2, "m", MAX_COUNT, request_id=2, ephemeral=True))
        await second.close()
        server.wait_log(f'"sessions": [{s2}]')  # detached
        assert await first.call(Release(s1, "m")) is True  # Granted: the one queued push
        await first.call(DeleteSemaphore(s1, "x", force=True))  # LeaseLost: one too many
        server.wait_log(f"session {s2} overflowed its push queue; closing it")
        again = await wire.connect(server.port)
        failure = await again.fail(AttachSession(s2, b"k2", 2))
        assert failure.code is ErrorCode.SESSION_EXPIRED
        assert (await again.call(DescribeNode("n"))).sessions == 1


async def test_max_unread_disconnects_a_client_that_does_not_read(
    tmp_path: Path, wire: Clients
) -> None:
    with ServerProcess(tmp_path / "data", "--max-unread", "65536") as server:
        other = await wire.connect(server.port)
        await other.call(CreateNode("n"))
        hog = await wire.connect(server.port)
        session = (await hog.call(CreateSession("n", b"k"))).session_id
        await hog.call(CreateSemaphore(session, "big", 1, b"x" * 60_000))
        # 300 describes in one write, ~18 MB of replies, and the client reads none.
        hog.writer.write(
            b"".join(
                hog.codec.send(Request(1000 + n, DescribeSemaphore(session, "big")))
                for n in range(300)
            )
        )
        server.wait_log("does not read its replies; disconnecting")
        server.wait_log(f'"sessions": [{session}]')  # detached, not lost
        assert (await other.call(DescribeNode("n"))).sessions == 1
        again = await wire.connect(server.port)
        assert (await again.call(AttachSession(session, b"k", 2))).seq_no == 2


async def test_shutdown_grace_waits_for_clients_to_hang_up(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--shutdown-grace", "3600") as server:
        client = await wire.connect(server.port)
        server.proc.send_signal(signal.SIGTERM)
        event = await client.next_event()
        assert isinstance(event, GoingAway)
        assert server.proc.poll() is None  # still waiting for this client to hang up
        await client.close()
        assert server.proc.wait(timeout=WAIT) == 0


async def test_shutdown_grace_zero_closes_at_once(tmp_path: Path, wire: Clients) -> None:
    with ServerProcess(tmp_path / "data", "--shutdown-grace", "0") as server:
        client = await wire.connect(server.port)
        server.proc.send_signal(signal.SIGTERM)
        events = await client.until_closed()  # the server hangs up, not the client
        assert isinstance(events[0], GoingAway)
        assert isinstance(events[-1], ConnectionClosed)
        assert server.proc.wait(timeout=WAIT) == 0


class CountingDataDir(DataDir):
    """Counts the commits that fsync (the server under test is real)."""

    synced = 0

    def commit(self, *, sync: bool | None = None) -> None:
        super().commit(sync=sync)
        if sync:
            self.synced += 1


async def test_batch_interval_syncs_batches(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    data_dir = CountingDataDir(tmp_path / "data", FsyncMode.BATCH)
    journal = Journal(data_dir)
    engine = journal.open(loop.time())
    config = ServeConfig(port=0, data_dir=data_dir.path, fsync=FsyncMode.BATCH, batch_interval=0.01)
    server = Server(config, wal_host(config, journal, engine), bound(config), b"2" * 16)
    writer = server.served.commit.writer
    assert isinstance(writer, LoopCommit)
    assert writer.sync_every == 0.01
    _, port = await server.start()
    clients = Clients()
    try:
        client = await clients.connect(port)
        for n in range(3):
            before = data_dir.synced
            await client.call(CreateNode(f"n{n}"))
            for _ in range(int(WAIT / 0.005)):  # until the syncer made it durable
                if data_dir.synced > before:
                    break
                await asyncio.sleep(0.005)
            assert data_dir.synced > before
    finally:
        await clients.close_all()
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0


@pytest.mark.parametrize("choice", ["asyncio", "uvloop", "auto"])
async def test_event_loop_is_chosen_and_reported(
    tmp_path: Path, wire: Clients, choice: str
) -> None:
    with ServerProcess(tmp_path / "data", "--event-loop", choice) as server:
        client = await wire.connect(server.port)
        await client.call(CreateNode("n"))
        assert (await client.call(DescribeNode("n"))).name == "n"
        used = "asyncio" if choice == "asyncio" else "uvloop"  # uvloop is a dependency
        assert f'"event_loop": "{used}"' in server.output()


def test_an_unknown_event_loop_is_refused(tmp_path: Path) -> None:
    process = ServerProcess(tmp_path / "data", "--event-loop", "trio")
    try:
        assert process.proc.wait(timeout=WAIT) == 2
        assert "asyncio, uvloop" in process.output()
    finally:
        process.kill()
