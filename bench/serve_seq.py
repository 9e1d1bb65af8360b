"""Sequential acquire/release against a real `tenure serve` (not part of the tests).

One connection, one session, lock + release of distinct mutexes over the raw
native protocol (no client library yet): the starting point for the benchmark
issue. Run: ``python bench/serve_seq.py [--pairs N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.server.wire import Clients, ServerProcess

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release


async def run(port: int, pairs: int) -> tuple[float, float, float]:
    clients = Clients()
    try:
        client = await clients.connect(port)
        await client.call(CreateNode("bench"))
        session = (await client.call(CreateSession("bench", b"key"))).session_id
        latencies = []
        started = time.perf_counter()
        for i in range(pairs):
            t0 = time.perf_counter()
            await client.call(Acquire(session, f"k{i}", MAX_COUNT, i + 1, ephemeral=True))
            await client.call(Release(session, f"k{i}"))
            latencies.append(time.perf_counter() - t0)
        rate = pairs / (time.perf_counter() - started)
        q = statistics.quantiles(latencies, n=100)
        return rate, q[49] * 1e3, q[98] * 1e3
    finally:
        await clients.close_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=2_000)
    args = parser.parse_args()
    for fsync in ("off", "always"):
        with (
            tempfile.TemporaryDirectory() as tmp,
            ServerProcess(Path(tmp) / "data", "--fsync", fsync) as server,
        ):
            rate, p50, p99 = asyncio.run(run(server.port, args.pairs))
            print(
                f"tenure serve --fsync {fsync:6}: {rate:>8,.0f} pairs/s"
                f"  (p50 {p50:.2f} ms, p99 {p99:.2f} ms per pair)"
            )


if __name__ == "__main__":
    main()
