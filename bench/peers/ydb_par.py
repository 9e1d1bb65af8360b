"""Many sessions at once through the YDB face of `tenure serve` (not part of the tests).

The throughput twin of :mod:`bench.peers.ydb_seq`: one server (``--fsync always`` or
``off``, with ``--ydb-port``), ``--sessions`` sessions (32) each on a semaphore of its
own (nobody waits), every session doing ``--pairs`` acquire + release pairs one after
the other, all sessions at once; five ways, alternately, ``--repeats`` times each:

* ``native``: tenure's own asyncio client, one connection, a session and a mutex
  each;
* ``ydb-raw``: one gRPC channel (one HTTP/2 connection), a raw
  ``CoordinationService/Session`` stream each: AcquireSemaphore then
  ReleaseSemaphore, each awaited (two round trips a pair);
* ``ydb-raw1``: the same, the release not awaited (its result read before the next
  acquire's), as tenure's own client leaves a mutex: one round trip a pair;
* ``ydb-sdk``: YDB's asyncio SDK, one driver, a session each
  (``semaphore.acquire()/release()``, which also creates the semaphore first: three
  round trips a pair);
* ``grpc-echo``: the raw streams against a bare grpc.aio server that answers at
  once (:mod:`bench.peers.ydb_echo`): the most a YDB face in Python could reach.

Prints each way's pairs per second (all sessions together) and its rate over
native's from the same run (the machine is shared: compare the ratios). With many
streams, the YDB face's fixed cost per message (gRPC's completion-queue poller
thread waking the event loop, docs/ydb.md "Speed") is shared by the messages of one
wake, so the ratios here are what the face costs under load, and ydb_seq's are
what one client waits.
Run: ``python -m bench.peers.ydb_par [--sessions N] [--pairs P] [--repeats R]
[--fsync always|off]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import grpc
from ydb.aio.coordination import CoordinationClient
from ydb.aio.driver import Driver

import tenure
from bench.peers.ydb_seq import Pair, native_pair, raw_pair, sdk_pair, serving

Close = Callable[[], Awaitable[None]]


async def together(pairs: list[Pair], each: int) -> float:
    """Pairs per second of every session doing ``each`` pairs, all at once."""

    async def run(pair: Pair) -> None:
        for _ in range(each):
            await pair()

    started = time.perf_counter()
    async with asyncio.timeout(600):  # bounded: a lost answer must not hang the run
        await asyncio.gather(*(run(pair) for pair in pairs))
    return len(pairs) * each / (time.perf_counter() - started)


async def native(port: int, sessions: int) -> tuple[list[Pair], Close]:
    client = await tenure.connect(f"tenure://127.0.0.1:{port}")
    await client.create_node("bench-par-native", exist_ok=True)
    await client.create_node("bench-par-raw", exist_ok=True)  # the raw streams' node
    pairs = [await native_pair(client, "bench-par-native", f"m{i}") for i in range(sessions)]
    return pairs, client.aclose


async def raw(ydb_port: int, sessions: int, *, awaited: bool = True) -> tuple[list[Pair], Close]:
    # (The node is created by native(); the echo server takes any path.)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{ydb_port}")
    node, prefix = "/local/bench-par-raw", "m" if awaited else "r"
    made = [await raw_pair(channel, node, f"{prefix}{i}", awaited=awaited) for i in range(sessions)]

    async def close() -> None:
        for _, end in made:
            await end()
        await channel.close()

    return [pair for pair, _ in made], close


async def sdk(ydb_port: int, sessions: int) -> tuple[list[Pair], Close]:
    driver = Driver(endpoint=f"grpc://127.0.0.1:{ydb_port}", database="/local")
    await driver.wait(timeout=10, fail_fast=True)
    client = CoordinationClient(driver)
    await client.create_node("/local/bench-par-sdk")
    made = [sdk_pair(client, "/local/bench-par-sdk", f"m{i}") for i in range(sessions)]

    async def close() -> None:
        for _, end in made:
            await end()
        await driver.stop()

    return [pair for pair, _ in made], close


async def main(
    port: int, ydb_port: int, echo_port: int, sessions: int, each: int, repeats: int
) -> None:
    ways = {"native": await native(port, sessions), "ydb-raw": await raw(ydb_port, sessions)}
    ways["ydb-raw1"] = await raw(ydb_port, sessions, awaited=False)
    ways["ydb-sdk"] = await sdk(ydb_port, sessions)
    ways["grpc-echo"] = await raw(echo_port, sessions)
    for pairs, _ in ways.values():  # warm up (and start every SDK session)
        await together(pairs, 5)
    rates: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, (pairs, _) in ways.items():
            rates[name].append(await together(pairs, each))
    for _, close in ways.values():
        await close()
    base = statistics.median(rates["native"])
    print(f"{sessions} sessions at once, {each} pairs each")
    for name in ways:
        rate = statistics.median(rates[name])
        print(f"{name:9} {rate:8.0f} pairs/s  {rate / base:5.2f}x native")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.peers.ydb_par", description=__doc__)
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--pairs", type=int, default=100, help="pairs per session")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fsync", default="always", choices=("always", "off"))
    args = parser.parse_args()
    with serving(args.fsync) as (port, ydb_port, echo_port):
        asyncio.run(main(port, ydb_port, echo_port, args.sessions, args.pairs, args.repeats))
