"""bench's client shapes and seq's CPU columns, against a real redis-server.

"client each" must really give every session a connection of its own (else the two
shapes of the report would measure the same thing); seq must report the client's
and the server's CPU per pair. Values are checked for meaning, never for speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import redis.asyncio
from bench.peers.clients import lock_client

from tests.redis.server import RedisServer

REPO = Path(__file__).resolve().parents[2]
SESSIONS = 4


async def _connections(url: str) -> int:
    probe = redis.asyncio.Redis.from_url(url)
    try:
        return len(await probe.client_list())
    finally:
        await probe.aclose()


async def _concurrent_holds(url: str, *, shared: bool, prefix: str) -> int:
    """Connections on the server while SESSIONS sessions each hold a lock at once."""
    client = lock_client("redis", url, 10.0, shared=shared)
    await client.open()
    try:
        sessions = [await client.session() for _ in range(SESSIONS)]
        handles = [await s.acquire(f"{prefix}-{i}") for i, s in enumerate(sessions)]
        count = await _connections(url)
        for s, h in zip(sessions, handles, strict=True):
            await s.release(h)
        return count
    finally:
        await client.close()


async def test_client_each_gives_every_redis_session_its_own_connection(
    redis_server: RedisServer,
) -> None:
    url = redis_server.url(7)
    before = await _connections(url)  # includes the probe's own connection
    each = await _concurrent_holds(url, shared=False, prefix="shape-each")
    # The shared client's ping connection plus one per session, plus the probe.
    assert each - before >= SESSIONS
    shared = await _concurrent_holds(url, shared=True, prefix="shape-one")
    # Locks taken one after the other reuse the one pooled connection.
    assert shared - before == 1
    assert await _connections(url) == before  # everything was closed


def test_seq_reports_client_and_server_cpu_per_pair(redis_server: RedisServer) -> None:
    argv = [sys.executable, "-m", "bench.peers.lockload", "--system", "redis"]
    argv += ["--url", redis_server.url(7), "--workload", "seq", "--n", "200"]
    argv += ["--timeout", "60", "--server-pid", str(redis_server.pid)]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=90, check=True)
    found = {m["metric"]: m for m in json.loads(done.stdout)}
    for metric in ("client_cpu_us", "server_cpu_us"):
        assert found[metric]["unit"] == "µs/pair"
        # A pair costs both processes some CPU; a second per pair would be a unit slip.
        assert 0 < found[metric]["value"] < 1e6, found[metric]
    without = [*argv[: argv.index("--server-pid")]]
    done = subprocess.run(without, cwd=REPO, capture_output=True, text=True, timeout=90, check=True)
    metrics = {m["metric"] for m in json.loads(done.stdout)}
    assert "client_cpu_us" in metrics
    assert "server_cpu_us" not in metrics
