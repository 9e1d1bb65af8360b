"""A server with no quota and no memory budget keeps no per-owner counts (issue 49).

``Server`` pauses its engine's quota ledger unless a quota or ``--memory-budget`` is
set (``QuotaLedger.pause_counting``): its blocks then call nothing of the quota
module, and the estimate its metrics show is counted from the state when asked, the
same as a counting engine's. A server in this process, as ``tenure serve`` composes it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import tenure
from tenure._core.snapshot import dump, load
from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, Server, wal_host

from .wire import bound


async def _served(config: ServeConfig) -> tuple[bool, int, int]:
    """Whether the served engine counts, its estimate and a counting copy's (a
    snapshot's load counts), while a session holds a mutex with data."""
    journal = Journal(DataDir(config.data_dir, FsyncMode.OFF))
    engine = journal.open(asyncio.get_running_loop().time())
    server = Server(config, wal_host(config, journal, engine), bound(config), b"1" * 16)
    _, port = await server.start()
    try:
        async with tenure.connect(f"tenure://127.0.0.1:{port}") as client:
            await client.create_node("n")
            async with client.session("n", description="d") as session:
                lock = await session.mutex("m").lock(data=b"held")
                async with lock:
                    counting = server.host.engine.ledger.counting
                    estimate = server.host.engine.ledger.estimate()
                    counted = load(dump(server.host.engine)).ledger.estimate()
    finally:
        server.stop()
        await server.wait()
    return counting, estimate, counted


async def test_a_server_without_quotas_or_budget_counts_from_the_state(tmp_path: Path) -> None:
    config = ServeConfig(port=0, data_dir=tmp_path / "data", fsync=FsyncMode.OFF)
    counting, estimate, counted = await _served(config)
    assert not counting
    assert estimate == counted > 0


async def test_a_server_with_a_memory_budget_counts_as_it_goes(tmp_path: Path) -> None:
    config = ServeConfig(
        port=0, data_dir=tmp_path / "data", fsync=FsyncMode.OFF, memory_budget=10**9
    )
    counting, estimate, counted = await _served(config)
    assert counting
    assert estimate == counted > 0
