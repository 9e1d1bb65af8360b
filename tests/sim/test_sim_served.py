"""tenure's own server and client on the simulated loop and network: a real
``Server`` (as ``tenure serve`` composes it, ``--fsync off``) and a real
``tenure.connect`` client, in one process, on simulated time."""

from __future__ import annotations

import asyncio
import hashlib
import socket
from pathlib import Path
from typing import cast

import tenure
from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, Server, wal_host
from tenure.server._reception import Sockets
from tenure.testing.sim import SimLoop
from tests.sim.test_sim_loop import run

PORT = 6388


async def _served(loop: SimLoop, data: Path) -> list[str]:
    config = ServeConfig(port=PORT, data_dir=data, fsync=FsyncMode.OFF, idle_timeout=0)
    journal = Journal(DataDir(config.data_dir, FsyncMode.OFF))
    engine = journal.open(loop.time())
    listener = loop.network.listen("server", PORT)
    # (A simulated socket stands in for the bound socket the server is given.)
    sockets = Sockets([cast("socket.socket", listener)])
    server = Server(config, wal_host(config, journal, engine), sockets, b"1" * 16)
    await server.start()
    trace: list[str] = []
    try:
        async with tenure.connect(f"tenure://server:{PORT}") as client:
            await client.create_node("n")

            async def worker(name: str) -> None:
                async with client.session("n") as session:
                    for _ in range(3):
                        async with session.mutex("m").lock() as lock:
                            trace.append(f"{name}:{lock.token}@{loop.time():.6f}")
                            await asyncio.sleep(0.01)

            await asyncio.gather(*(worker(name) for name in "abc"))
    finally:
        server.stop()
        await server.wait()
        listener.close()
    return trace


def test_a_real_server_and_client_run_on_simulated_time(tmp_path: Path) -> None:
    trace = run(1, lambda loop: _served(loop, tmp_path / "one"))
    tokens = [int(entry.split(":")[1].split("@")[0]) for entry in trace]
    assert len(tokens) == 9
    assert tokens == sorted(tokens)  # one holder at a time, each token greater
    assert len(set(tokens)) == 9


def test_a_seed_replays_the_served_run(tmp_path: Path) -> None:
    def digest(seed: int, name: str) -> str:
        trace = run(seed, lambda loop: _served(loop, tmp_path / name))
        return hashlib.sha256("\n".join(trace).encode()).hexdigest()

    assert digest(5, "a") == digest(5, "b")
