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
from tenure._core import Acquire, CreateNode, CreateSession, NodeConfig
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


async def test_a_restart_from_a_snapshot_counts_the_loaded_state_for_a_budget(
    tmp_path: Path,
) -> None:
    """The journal loads a snapshot without counting it (the most of a restart at a
    million holds): a server with a memory budget counts it when it sets the budget,
    one without leaves it paused."""
    data = tmp_path / "data"
    journal = Journal(DataDir(data, FsyncMode.OFF))
    engine = journal.open(0.0)
    for command in (CreateNode("n", NodeConfig()), CreateSession("n", b"k" * 16, 3_600.0)):
        engine.apply(command, 0.0)
        journal.log_command(command, 0.0)
    sid = max(engine.sessions)
    held = Acquire(sid, "m", 1, 1, b"held", None, True)
    engine.apply(held, 0.0)
    journal.log_command(held, 0.0)
    journal.snapshot(engine)
    journal.close()
    expected = load(dump(engine)).ledger.usage[""].counts
    for budget, counting in ((10**9, True), (0, False)):
        config = ServeConfig(port=0, data_dir=data, fsync=FsyncMode.OFF, memory_budget=budget)
        journal = Journal(DataDir(data, FsyncMode.OFF))
        reopened = journal.open(asyncio.get_running_loop().time())
        assert not reopened.ledger.counting  # (nothing counted at the load)
        server = Server(config, wal_host(config, journal, reopened), bound(config), b"1" * 16)
        try:
            ledger = server.host.engine.ledger
            assert ledger.counting is counting
            if counting:
                assert ledger.usage[""].counts == expected
            assert ledger.estimate() == load(dump(engine)).ledger.estimate() > 0
        finally:
            server.stop()
            await server.wait()
