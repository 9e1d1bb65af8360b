"""The tenure:// client against a real `tenure serve` (not part of the tests).

Two workloads of the benchmark issue, through the public API
(``session.mutex(name).lock()`` then ``release()``), with the client in this
process and the server in another:

* seq: one session, acquire + release of distinct mutexes, one pair at a time;
* par: 32 sessions on one connection, distinct keys, all at once.

Run: ``python bench/client_loop.py [--pairs N] [--fsync off always]``. The machine
is noisy: compare numbers from one run, never across runs.
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

from tests.server.wire import ServerProcess

import tenure


async def seq(url: str, pairs: int) -> tuple[float, float, float]:
    async with tenure.connect(url) as client:
        await client.create_node("seq", exist_ok=True)
        async with client.session("seq") as session:
            latencies = []
            started = time.perf_counter()
            for i in range(pairs):
                t0 = time.perf_counter()
                lock = await session.mutex(f"k{i}").lock()
                await lock.release()
                latencies.append(time.perf_counter() - t0)
            rate = pairs / (time.perf_counter() - started)
    q = statistics.quantiles(latencies, n=100)
    return rate, q[49] * 1e3, q[98] * 1e3


async def par(url: str, pairs: int, workers: int = 32) -> tuple[float, float]:
    async with tenure.connect(url) as client:
        await client.create_node("par", exist_ok=True)
        sessions = [await client.session("par") for _ in range(workers)]
        latencies: list[float] = []

        async def work(index: int, session: tenure.Session) -> None:
            for i in range(pairs // workers):
                t0 = time.perf_counter()
                lock = await session.mutex(f"w{index}-{i}").lock()
                await lock.release()
                latencies.append(time.perf_counter() - t0)

        started = time.perf_counter()
        await asyncio.gather(*(work(i, s) for i, s in enumerate(sessions)))
        rate = len(latencies) / (time.perf_counter() - started)
        for session in sessions:
            await session.close()
    return rate, statistics.quantiles(latencies, n=100)[98] * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=2_000)
    parser.add_argument("--fsync", nargs="+", default=["off", "always"])
    args = parser.parse_args()
    for fsync in args.fsync:
        with (
            tempfile.TemporaryDirectory() as tmp,
            ServerProcess(Path(tmp) / "data", "--fsync", fsync) as server,
        ):
            url = f"tenure://127.0.0.1:{server.port}"
            rate, p50, p99 = asyncio.run(seq(url, args.pairs))
            print(
                f"seq  --fsync {fsync:6}: {rate:>8,.0f} pairs/s"
                f"  (p50 {p50:.2f} ms, p99 {p99:.2f} ms per pair)"
            )
            rate, p99 = asyncio.run(par(url, args.pairs * 5))
            print(f"par  --fsync {fsync:6}: {rate:>8,.0f} pairs/s  (p99 {p99:.2f} ms per pair)")


if __name__ == "__main__":
    main()
