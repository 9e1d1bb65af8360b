"""Sequential acquire/release against a real `tenure serve` (not part of the tests).

One connection, one session, lock + release of distinct mutexes over the raw
native protocol (no client library yet): the starting point for the benchmark
issue. Run: ``python -m bench.micro.serve_seq [--pairs N]``.

``--metrics`` measures what ``--http-port`` (the Prometheus metrics, updated on
every request, grant and commit) costs: each fsync mode runs with the endpoint off
and on, alternately, ``--repeats`` times, one after the other (sequential round
trips) and pipelined (``--window`` pairs in flight: the server's CPU is the limit,
so its per-request cost shows), and the median rates are compared as on/off.

Internals: ``tenure._core``'s commands and ``tenure._protocol``'s ``Reply``, sent
raw by the tests' wire client (``tests.server.wire``): the server's cost alone,
without tenure's client library.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.server.wire import Clients, ServerProcess, free_port

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release
from tenure._protocol import Reply


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


async def run_pipelined(port: int, pairs: int, window: int) -> float:
    """Pairs per second with ``window`` pairs in flight at a time on one connection."""
    clients = Clients()
    try:
        client = await clients.connect(port)
        await client.call(CreateNode("piped"))
        session = (await client.call(CreateSession("piped", b"key"))).session_id
        started = time.perf_counter()
        for base in range(0, pairs, window):
            sent = []
            for i in range(base, min(base + window, pairs)):
                sent.append(
                    client.send(Acquire(session, f"k{i}", MAX_COUNT, i + 1, ephemeral=True))
                )
                sent.append(client.send(Release(session, f"k{i}")))
            for request_id in sent:
                answer = await client.answer(request_id)
                assert isinstance(answer, Reply), answer
        return pairs / (time.perf_counter() - started)
    finally:
        await clients.close_all()


async def counted(http_port: int) -> float:
    """The acquires ``/metrics`` counted (to be sure the endpoint was on and counting)."""
    from prometheus_client.parser import text_string_to_metric_families
    from tests.server.http import get

    status, text = await get(http_port, "/metrics")
    assert status == 200, text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "tenure_requests_total" and sample.labels["command"] == "acquire"
    )


def server_cpu(server: ServerProcess) -> float:
    """CPU seconds (user + system) the server process has used so far."""
    import psutil  # the bench extra

    times = psutil.Process(server.proc.pid).cpu_times()
    return float(times.user + times.system)


def metrics_cost(args: argparse.Namespace) -> None:
    """Rates and server CPU per pair with the HTTP endpoint off and on (module docstring).

    The rates move with whatever else the machine runs; the server's CPU time per
    pair (from /proc, its own process only) is the steadier measure of the cost.
    """
    for fsync in ("off", "always"):
        rates: dict[tuple[str, bool], list[float]] = {}
        for _ in range(args.repeats):
            for metrics in (False, True):
                http_port = free_port()
                extra = ["--http-port", str(http_port)] if metrics else []
                with (
                    tempfile.TemporaryDirectory() as tmp,
                    ServerProcess(Path(tmp) / "data", "--fsync", fsync, *extra) as server,
                ):
                    seq, _, _ = asyncio.run(run(server.port, args.pairs))
                    cpu = server_cpu(server)
                    piped = asyncio.run(run_pipelined(server.port, args.pipelined, args.window))
                    cpu = (server_cpu(server) - cpu) / args.pipelined
                    if metrics:
                        seen = asyncio.run(counted(http_port))
                        assert seen == args.pairs + args.pipelined, seen
                rates.setdefault(("seq", metrics), []).append(seq)
                rates.setdefault(("pipelined", metrics), []).append(piped)
                rates.setdefault(("cpu", metrics), []).append(cpu)
        for kind in ("seq", "pipelined"):
            off = statistics.median(rates[(kind, False)])
            on = statistics.median(rates[(kind, True)])
            print(
                f"--fsync {fsync:6} {kind:9}: metrics off {off:>8,.0f} pairs/s, "
                f"on {on:>8,.0f} pairs/s: on/off {on / off:.3f}"
            )
        off, on = (statistics.median(rates[("cpu", metrics)]) for metrics in (False, True))
        print(
            f"--fsync {fsync:6} server CPU per pipelined pair: metrics off {off * 1e6:.1f} us, "
            f"on {on * 1e6:.1f} us: on/off {on / off:.3f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.micro.serve_seq", description=__doc__)
    parser.add_argument("--pairs", type=int, default=2_000)
    parser.add_argument("--metrics", action="store_true", help="the cost of --http-port")
    parser.add_argument("--repeats", type=int, default=3, help="with --metrics")
    parser.add_argument("--pipelined", type=int, default=20_000, help="with --metrics: pairs")
    parser.add_argument("--window", type=int, default=64, help="with --metrics: in flight")
    args = parser.parse_args()
    if args.metrics:
        metrics_cost(args)
        return
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
