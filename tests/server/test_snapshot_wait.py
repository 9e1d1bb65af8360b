"""A due snapshot waits for the writer thread instead of blocking the loop on its fsync.

With ``--fsync always`` the writer thread makes each turn's records durable while the
loop goes on serving. A snapshot must start with nothing in flight (the log's new
segment starts after every record handed over); before, the loop drained the writer
there, blocking every client for the writer's write and fsync, and a tenant's writes
make snapshots frequent (issue 37, the fault suite's finding 3). Now the snapshot
starts when the writer reports its last batch durable.

A real Server in this process (so the test can read its host between turns): clients
pipeline CreateNode requests with a small ``compact_every``; every snapshot started
found the writer with nothing in flight, and nothing it acknowledged is missing after
a restart from those snapshots.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tenure._core import CreateNode, ListNodes, NodePage
from tenure._protocol import Reply
from tenure.server import DataDir, Journal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.fsync_modes import WriterThread
from tenure.server._durability.storage import FsyncMode
from tenure.server._durability.writer import DRAIN_TIMEOUT
from tenure.server._serve import Server
from tenure.server._server_host import wal_host

from .wire import WAIT, Clients, bound

pytestmark = pytest.mark.timeout(120)

CLIENTS = 4
BURSTS = 60
COMPACT_EVERY = 40


async def _serve(path: Path) -> tuple[Server, Journal, int]:
    journal = Journal(DataDir(path), compact_every=COMPACT_EVERY)
    engine = journal.open(asyncio.get_running_loop().time())
    config = ServeConfig(port=0, data_dir=path, fsync=FsyncMode.ALWAYS)
    server = Server(config, wal_host(config, journal, engine), bound(config), b"1" * 16)
    _, port = await server.start()
    return server, journal, port


async def test_a_due_snapshot_starts_when_the_writer_has_nothing_in_flight(
    tmp_path: Path, wire: Clients
) -> None:
    server, journal, port = await _serve(tmp_path)
    commit = server.served.commit
    # (handed, durable) of the group commit each time a snapshot starts, and each time
    # the loop drains the writer thread (the wait this test is about).
    starts: list[tuple[int, int]] = []
    drains: list[tuple[int, int]] = []
    assert isinstance(commit.writer, WriterThread)
    start_snapshot, writer = journal.start_snapshot, commit.writer.thread
    drain = writer.drain

    def recording_start(engine: object) -> int | None:
        starts.append((commit._handed, commit._durable))
        return start_snapshot(server.host.engine)

    def recording_drain(timeout: float = DRAIN_TIMEOUT) -> None:
        drains.append((commit._handed, commit._durable))
        drain(timeout)

    journal.start_snapshot = recording_start  # type: ignore[method-assign]
    writer.drain = recording_drain  # type: ignore[method-assign]
    acknowledged: set[str] = set()
    try:
        clients = [await wire.connect(port) for _ in range(CLIENTS)]
        for burst in range(BURSTS):  # pipelined: batches handed over while others sync
            names = [f"c{index}-{burst:03}" for index in range(CLIENTS)]
            sent = [
                (client, client.send(CreateNode(name)), name)
                for client, name in zip(clients, names, strict=True)
            ]
            for client, request_id, name in sent:
                assert isinstance(await client.answer(request_id), Reply)
                acknowledged.add(name)
    finally:
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0
    assert len(acknowledged) == CLIENTS * BURSTS
    assert starts, "no snapshot fell due: the test did not test anything"
    in_flight = [(handed, durable) for handed, durable in starts + drains if handed != durable]
    assert not in_flight, f"a snapshot waited on the loop for batches in flight: {in_flight}"

    server, journal, port = await _serve(tmp_path)
    try:
        client = await wire.connect(port)
        page = await client.call(ListNodes(limit=CLIENTS * BURSTS + 1))
        assert isinstance(page, NodePage)
        assert set(page.names) == acknowledged
    finally:
        server.stop()
        assert await asyncio.wait_for(server.wait(), WAIT) == 0
