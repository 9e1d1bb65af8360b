"""Baseline numbers for the engine and the memory:// client (not part of the tests).

Run: ``python -m bench.micro.memory_baseline [--pairs N]``

Internals: ``tenure._core``'s ``Engine`` and its commands, to time the engine
alone (no client, no server) beside the public ``memory://`` client built on it.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc

import tenure
from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Engine, Release


def engine_pairs(pairs: int) -> float:
    """Acquire + release of distinct mutexes straight on the engine: pairs/s."""
    engine = Engine()
    engine.apply(CreateNode("bench"), 0.0)
    sid = engine.apply(CreateSession("bench", b"k"), 0.0).session_id
    started = time.perf_counter()
    for i in range(pairs):
        name = f"k{i}"
        engine.apply(Acquire(sid, name, MAX_COUNT, i, ephemeral=True), 0.0)
        engine.apply(Release(sid, name), 0.0)
        engine.take_effects()
    return pairs / (time.perf_counter() - started)


async def client_seq(pairs: int) -> tuple[float, float, float]:
    """One session, lock + release of distinct mutexes: pairs/s, p50 and p99 µs per pair."""
    async with tenure.connect("memory://") as client:
        await client.create_node("bench")
        session = await client.session("bench")
        latencies = []
        started = time.perf_counter()
        for i in range(pairs):
            t0 = time.perf_counter()
            lock = await session.mutex(f"k{i}").lock()
            await lock.release()
            latencies.append(time.perf_counter() - t0)
        rate = pairs / (time.perf_counter() - started)
        q = statistics.quantiles(latencies, n=100)
        return rate, q[49] * 1e6, q[98] * 1e6


async def client_contended(grants: int, clients: int) -> float:
    """``clients`` sessions on one mutex, lock → release in a loop: grants/s."""
    async with tenure.connect("memory://") as client:
        await client.create_node("bench")
        sessions = [await client.session("bench") for _ in range(clients)]
        remaining = grants

        async def worker(session: tenure.Session) -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                lock = await session.mutex("hot").lock()
                await lock.release()

        started = time.perf_counter()
        await asyncio.gather(*(worker(s) for s in sessions))
        return grants / (time.perf_counter() - started)


async def bytes_per_held_lock(count: int) -> float:
    """Python heap growth per mutex held (engine + client objects), via tracemalloc."""
    async with tenure.connect("memory://") as client:
        await client.create_node("bench", max_semaphores=count + 10)
        session = await client.session("bench")
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        locks = [await session.mutex(f"k{i}").lock() for i in range(count)]
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        assert len(locks) == count
        return (after - before) / count


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.memory_baseline", description=__doc__
    )
    parser.add_argument("--pairs", type=int, default=20_000)
    args = parser.parse_args()
    print(f"engine, acquire+release pairs/s:         {engine_pairs(args.pairs):>10,.0f}")
    rate, p50, p99 = asyncio.run(client_seq(args.pairs))
    print(
        f"memory:// client, seq pairs/s:           {rate:>10,.0f}"
        f"  (p50 {p50:.0f} µs, p99 {p99:.0f} µs)"
    )
    grants = asyncio.run(client_contended(args.pairs // 2, 32))
    print(f"memory:// client, 32 on one key grants/s: {grants:>10,.0f}")
    per_lock = asyncio.run(bytes_per_held_lock(10_000))
    print(f"memory:// bytes per held lock (10,000):   {per_lock:>10,.0f}")


if __name__ == "__main__":
    main()
