"""The ceiling: a raw echo server and client, one round trip per request.

No lock service does less per request than echoing it, so this is the most a
Python server (and client) can reach on this machine: one round trip at a time,
and ``clients`` connections at once. Both sides use asyncio Protocols (no stream
layer); the server runs on plain asyncio or uvloop, the client on uvloop, as the
lock clients do.

``python -m bench.peers.ceiling serve --loop uvloop|asyncio`` prints ``listening PORT``;
``python -m bench.peers.ceiling client --port P --n N [--server-pid PID]`` prints
Measures (JSON); given the server's pid, also the server's CPU time per round trip of
the sequential part (``seq_server_cpu_us``, read around it as
:mod:`bench.peers.lockload` reads a lock server's): the cost of a lone request to a
server that does nothing but answer it, beside which tenure's is judged.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections import deque
from typing import cast

from bench.peers.lockload import new_loop
from bench.tools.cpu import ServerCpu
from bench.tools.results import Measure, dumps

#: One request (and its echo): about the size of a lock request on the wire.
MESSAGE = b"x" * 63 + b"\n"


class _Echo(asyncio.Protocol):
    """Server side: write back whatever arrives."""

    transport: asyncio.Transport

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.transport.write(data)


async def serve(port: int) -> None:
    """Echo on 127.0.0.1:``port`` (0: any) until killed; print the port first."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(_Echo, "127.0.0.1", port)
    print(f"listening {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


class _Caller(asyncio.Protocol):
    """Client side: one request at a time, answered when its whole echo is back."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiting: deque[asyncio.Future[None]] = deque()
        self.buffered = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffered += len(data)
        while self.buffered >= len(MESSAGE) and self.waiting:
            self.buffered -= len(MESSAGE)
            self.waiting.popleft().set_result(None)

    async def call(self) -> None:
        assert self.transport is not None
        done = asyncio.get_running_loop().create_future()
        self.waiting.append(done)
        self.transport.write(MESSAGE)
        await done


async def _connect(port: int) -> _Caller:
    loop = asyncio.get_running_loop()
    _transport, caller = await loop.create_connection(_Caller, "127.0.0.1", port)
    return caller


async def _round_trips(callers: list[_Caller], n: int) -> tuple[float, list[float]]:
    """``n`` round trips over ``callers`` (one at a time on each): rate, latencies."""
    latencies: list[float] = []
    clock = time.perf_counter

    async def work(index: int, caller: _Caller) -> None:
        for _ in range(index, n, len(callers)):
            t0 = clock()
            await caller.call()
            latencies.append(clock() - t0)

    started = clock()
    await asyncio.gather(*(work(i, c) for i, c in enumerate(callers)))
    return len(latencies) / (clock() - started), latencies


async def client(
    port: int, n: int, clients: int, server: ServerCpu | None = None
) -> list[tuple[str, float, str]]:
    """Sequential round trips on one connection, then ``clients`` connections at once.

    ``server``: the echo server's processes, whose CPU time over the sequential
    round trips is reported per round trip (``seq_server_cpu_us``).
    """
    one = await _connect(port)
    many = [await _connect(port) for _ in range(clients)]
    outcome = []
    for label, callers in (("seq", [one]), ("par", many)):
        before = server.read() if server is not None and label == "seq" else None
        rate, latencies = await _round_trips(callers, n)
        spent = ServerCpu.spent(before, server.read()) if server and before is not None else None
        q = statistics.quantiles(latencies, n=100, method="inclusive")
        outcome += [
            (f"{label}_rt_per_s", rate, "round trips/s"),
            (f"{label}_p50_ms", q[49] * 1e3, "ms"),
            (f"{label}_p99_ms", q[98] * 1e3, "ms"),
        ]
        if spent is not None:
            outcome.append(("seq_server_cpu_us", spent / len(latencies) * 1e6, "µs/round trip"))
    for caller in [one, *many]:
        assert caller.transport is not None
        caller.transport.close()
    return outcome


def main(argv: list[str] | None = None) -> int:
    """``serve`` or ``client``; see the module docstring."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.ceiling", description=__doc__)
    sub = parser.add_subparsers(dest="role", required=True)
    srv = sub.add_parser("serve")
    srv.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    srv.add_argument("--port", type=int, default=0)
    cli = sub.add_parser("client")
    cli.add_argument("--port", type=int, required=True)
    cli.add_argument("--n", type=int, default=20_000)
    cli.add_argument("--clients", type=int, default=32)
    cli.add_argument("--system", default="echo-uvloop", help="the name the Measures carry")
    cli.add_argument("--timeout", type=float, default=120.0)
    cli.add_argument("--server-pid", type=int, help="the echo server's, to read its CPU time")
    args = parser.parse_args(argv)
    if args.role == "serve":
        with asyncio.Runner(loop_factory=new_loop(args.loop)) as runner:
            runner.run(serve(args.port))
        return 0

    async def bounded() -> list[tuple[str, float, str]]:
        async with asyncio.timeout(args.timeout):
            server = ServerCpu(args.server_pid) if args.server_pid else None
            return await client(args.port, args.n, args.clients, server)

    try:
        with asyncio.Runner(loop_factory=new_loop("uvloop")) as runner:
            outcome = runner.run(bounded())
    except TimeoutError:
        print(f"timeout: the run took more than {args.timeout:g}s", file=sys.stderr)
        return 2
    note = f"client: uvloop, pid {os.getpid()}"
    print(dumps([Measure("ceiling", args.system, m, v, u, [v], note) for m, v, u in outcome]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
