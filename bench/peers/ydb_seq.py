"""Sequential acquire + release through the YDB face of `tenure serve` (not part of the tests).

One server (``--fsync always`` or ``off``, started as the peer comparison starts
it, with ``--ydb-port``), one session, one semaphore, one pair at a time, five
ways, alternately, ``--repeats`` times each:

* ``native``: tenure's own asyncio client (``tenure://``), a mutex;
* ``ydb-raw``: a raw ``CoordinationService/Session`` stream (the YDB SDK's
  generated messages over grpc.aio, as a YDB user without the SDK's session would
  write it): AcquireSemaphore then ReleaseSemaphore, the protocol's own cost;
* ``ydb-raw1``: the same, the release not awaited (its result read before the next
  acquire's), as tenure's own client leaves a mutex: one round trip a pair;
* ``ydb-sdk``: YDB's asyncio SDK (``session.semaphore(name).acquire()/release()``),
  which also creates the semaphore before each acquire (three round trips a pair);
* ``grpc-echo``: the raw stream against a bare grpc.aio server that answers at once
  (:mod:`bench.peers.ydb_echo`): the most a YDB face in Python could reach.

Prints pairs per second and the median latency of each, and each YDB way's rate
over native's from the same run (the machine is shared: compare the ratios).
Run: ``python -m bench.peers.ydb_seq [--pairs N] [--repeats R] [--fsync always|off]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

import grpc
import ydb._grpc.common  # noqa: F401  (picks the generated code for the installed protobuf)
from ydb._grpc.common.protos import ydb_coordination_pb2 as coordination
from ydb.aio.coordination import CoordinationClient
from ydb.aio.driver import Driver

import tenure
from bench.peers import ydb_echo
from bench.tools import systems

Pair = Callable[[], Awaitable[None]]


async def timed(pair: Pair, pairs: int) -> tuple[float, float]:
    """(pairs per second, median latency in µs) of ``pairs`` sequential pairs."""
    latencies = []
    started = time.perf_counter()
    for _ in range(pairs):
        begun = time.perf_counter()
        await pair()
        latencies.append(time.perf_counter() - begun)
    elapsed = time.perf_counter() - started
    return pairs / elapsed, statistics.median(latencies) * 1e6


async def native(port: int) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    client = await tenure.connect(f"tenure://127.0.0.1:{port}")
    await client.create_node("bench-native", exist_ok=True)
    await client.create_node("bench-ydb", exist_ok=True)  # the raw stream's node
    pair = await native_pair(client, "bench-native", "m")
    return pair, client.aclose


async def native_pair(client: tenure.Client, node: str, name: str) -> Pair:
    """A pair on mutex ``name`` of a new session of ``client`` on ``node``."""
    session = await client.session(node)
    mutex = session.mutex(name)

    async def pair() -> None:
        async with mutex:
            pass

    return pair


async def raw(ydb_port: int, *, awaited: bool = True) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{ydb_port}")
    name = "m" if awaited else "m1"
    pair, close = await raw_pair(channel, "/local/bench-ydb", name, awaited=awaited)

    async def close_all() -> None:
        await close()
        await channel.close()

    return pair, close_all


async def raw_pair(
    channel: grpc.aio.Channel, node: str, name: str, *, awaited: bool = True
) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    """A pair on semaphore ``name`` (limit 1) over a new Session stream of ``channel``:
    AcquireSemaphore, its result, ReleaseSemaphore, its result.

    Not ``awaited``: the release's result is read before the next acquire's (results
    come in the order asked), as tenure's own client sends its release with the next
    request: one round trip a pair."""
    call = channel.stream_stream(
        "/Ydb.Coordination.V1.CoordinationService/Session",
        request_serializer=coordination.SessionRequest.SerializeToString,
        response_deserializer=coordination.SessionResponse.FromString,
    )()
    request = coordination.SessionRequest
    await call.write(request(session_start={"path": node, "timeout_millis": 30000}))
    # The server ends a stream that answers no ping (docs/ydb.md), and this one idles
    # while the other ways run: a reader answers pings as YDB's SDK does, at once.
    # One write at a time: gRPC refuses a second write on a call while one is under
    # way (TOO_MANY_OPERATIONS), and a pong can come while a pair writes.
    answers: asyncio.Queue[object] = asyncio.Queue()
    writing = asyncio.Lock()

    async def write(message: object) -> None:
        async with writing:
            await call.write(message)

    async def read() -> None:
        try:
            while True:
                response = await call.read()
                if response is grpc.aio.EOF:
                    raise EOFError("the server ended the Session stream")
                kind = response.WhichOneof("response")
                if kind == "ping":
                    await write(request(pong={"opaque": response.ping.opaque}))
                elif kind != "pong":
                    answers.put_nowait(response)
        except BaseException as error:  # the pair waiting for an answer raises it
            answers.put_nowait(error)
            raise

    reader = asyncio.ensure_future(read())

    async def answer() -> object:
        response = await answers.get()
        if isinstance(response, BaseException):
            raise RuntimeError("the raw stream failed") from response
        return response

    started = await answer()
    assert started.WhichOneof("response") == "session_started", started  # type: ignore[attr-defined]
    await write(request(create_semaphore={"req_id": 1, "name": name, "limit": 1}))
    await answer()
    ids = iter(range(2, 1 << 62))

    released = 0  # releases sent whose result is not read yet

    async def pair() -> None:
        nonlocal released
        await write(request(acquire_semaphore={"req_id": next(ids), "name": name, "count": 1}))
        for _ in range(released):
            await answer()
        released = 0
        await answer()
        await write(request(release_semaphore={"req_id": next(ids), "name": name}))
        if awaited:
            await answer()
        else:
            released = 1

    async def close() -> None:
        await call.done_writing()
        reader.cancel()

    return pair, close


async def sdk(ydb_port: int) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    driver = Driver(endpoint=f"grpc://127.0.0.1:{ydb_port}", database="/local")
    await driver.wait(timeout=10, fail_fast=True)
    client = CoordinationClient(driver)
    await client.create_node("/local/bench-sdk")
    pair, close = sdk_pair(client, "/local/bench-sdk", "m")

    async def close_all() -> None:
        await close()
        await driver.stop()

    return pair, close_all


def sdk_pair(
    client: CoordinationClient, node: str, name: str
) -> tuple[Pair, Callable[[], Awaitable[None]]]:
    """A pair on semaphore ``name`` of a new session of YDB's asyncio SDK on ``node``."""
    session = client.session(node)
    semaphore = session.semaphore(name)

    async def pair() -> None:
        await semaphore.acquire()
        await semaphore.release()  # type: ignore[no-untyped-call]

    async def close() -> None:
        await session.close()  # type: ignore[no-untyped-call]

    return pair, close


@contextlib.contextmanager
def serving(fsync: str) -> Iterator[tuple[int, int, int]]:
    """A ``tenure serve --fsync FSYNC --ydb-port`` and the bare gRPC echo server
    (:mod:`bench.peers.ydb_echo`), stopped at the end: (native port, YDB port, echo port)."""
    with tempfile.TemporaryDirectory(prefix="tenure-ydb-bench-") as tmp:
        ydb_port = systems.free_port()
        extra = ("--ydb-port", str(ydb_port))
        with (
            systems.running(f"tenure-{fsync}", Path(tmp), extra_args=extra) as server,
            ydb_echo.running(systems.free_port()) as echo_port,
        ):
            yield server.port, ydb_port, echo_port


async def main(port: int, ydb_port: int, echo_port: int, pairs: int, repeats: int) -> None:
    ways = {"native": await native(port), "ydb-raw": await raw(ydb_port)}
    ways["ydb-raw1"] = await raw(ydb_port, awaited=False)
    ways["ydb-sdk"] = await sdk(ydb_port)
    ways["grpc-echo"] = await raw(echo_port)
    for pair, _ in ways.values():  # warm up
        for _ in range(50):
            await pair()
    rates: dict[str, list[float]] = {name: [] for name in ways}
    medians: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, (pair, _) in ways.items():
            rate, median = await timed(pair, pairs)
            rates[name].append(rate)
            medians[name].append(median)
    for _, close in ways.values():
        await close()
    base = statistics.median(rates["native"])
    for name in ways:
        rate = statistics.median(rates[name])
        print(
            f"{name:9} {rate:8.0f} pairs/s  median {statistics.median(medians[name]):7.0f} µs"
            f"  {rate / base:5.2f}x native"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.peers.ydb_seq", description=__doc__)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--fsync", default="always", choices=("always", "off"))
    args = parser.parse_args()
    with serving(args.fsync) as (port, ydb_port, echo_port):
        asyncio.run(main(port, ydb_port, echo_port, args.pairs, args.repeats))
