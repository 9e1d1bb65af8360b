"""Reads from standbys against reads from the leader, on one ``tenure serve --cluster``.

``python -m bench.micro.standby_reads`` starts one etcd member and three ``tenure
serve --cluster`` members over it (the tests' harness: loopback, free ports), makes
``--names`` semaphores in one node, and then, for each way of reading, runs
``--readers`` tasks that list the node's semaphores (``list_semaphores``: one page,
a read of the whole node) for ``--seconds`` seconds, each on a client of its own:

* ``leader``: no staleness allowed, every read the leader's (as every read was);
* ``standbys S``: ``max_staleness=S`` (``--staleness``, comma-separated: ``0`` makes
  each standby confirm its state with etcd for each read it cannot share; ``1``
  lets one confirmation serve a second of reads);
* ``standbys S + writes``: the same while one more client changes a semaphore's
  data in a loop, so each read allows only the time since its client last heard from
  the leader (read-your-writes), when that client is a writer too (``--mixed``: the
  readers write too, one write per ``--mixed`` reads).

It prints, per way: reads per second (all readers), p50 and p99 latency, and the
share of reads the standbys answered (the rest the leader's). Compare within one
run: the machine is noisy. The CPU of the three members is apart from this process's
only when the machine has the cores for it; the figure is the service's throughput
as one client process sees it.

Internals: the tests' harness (tests.cluster, tests.etcd) to run the servers, and
the remote backend's ``standby_reads.answered`` to count who answered each read; the
reads themselves use the public API only (``tenure.connect``, ``max_staleness=``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tests.cluster.harness import TenureCluster
from tests.compiled import compiled_build
from tests.etcd.cluster import EtcdCluster

import tenure
from tenure.backends.remote import TenureBackend

NODE = "bench-reads"


async def _fill(url: str, names: int) -> None:
    async with tenure.connect(url) as client:
        await client.create_node(NODE, exist_ok=True)
        async with client.session(NODE) as session:
            for i in range(names):
                await session.semaphore(f"s{i:05d}").create(2, exist_ok=True)


async def _way(
    url: str, readers: int, seconds: float, staleness: float | None, mixed: int
) -> tuple[list[float], int, int]:
    """Latencies of every read, and how many the standbys and the leader answered."""
    latencies: list[float] = []
    answered = [0, 0]  # standbys, leader
    deadline = time.monotonic() + seconds

    async def reader() -> None:
        async with tenure.connect(url) as client:
            backend = client.backend
            assert isinstance(backend, TenureBackend)
            session = await client.session(NODE) if mixed else None
            reads = 0
            try:
                while time.monotonic() < deadline:
                    t0 = time.perf_counter()
                    await client.list_semaphores(NODE, max_staleness=staleness)
                    latencies.append(time.perf_counter() - t0)
                    reads += 1
                    if session is not None and reads % mixed == 0:
                        await session.semaphore("s00000").update(str(reads).encode())
            finally:
                if session is not None:
                    await session.close()
            counts = backend.standby_reads.answered if backend.standby_reads else {}
            answered[1] += counts.get("", 0) if staleness is not None else reads
            answered[0] += sum(n for door, n in counts.items() if door)

    await asyncio.gather(*(reader() for _ in range(readers)))
    return latencies, answered[0], answered[1]


def _line(name: str, seconds: float, figures: tuple[list[float], int, int]) -> str:
    latencies, standbys, leader = figures
    q = statistics.quantiles(latencies, n=100, method="inclusive")
    share = standbys / max(1, standbys + leader)
    return (
        f"{name:<24} {len(latencies) / seconds:9.0f} reads/s   p50 {q[49] * 1e3:6.2f} ms   "
        f"p99 {q[98] * 1e3:6.2f} ms   standbys answered {share:6.1%}"
    )


async def _run(args: argparse.Namespace) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="bench-standby-reads-") as tmp,
        EtcdCluster(1) as etcd,
        TenureCluster(Path(tmp) / "cluster", etcd.endpoints) as cluster,
    ):
        url = cluster.url()
        await _fill(url, args.names)
        build = "compiled" if compiled_build() else "pure"
        print(
            f"{args.readers} readers, {args.names} semaphores, {args.seconds:g} s a way, "
            f"three members over one etcd, the {build} build"
        )
        ways: list[tuple[str, float | None, int]] = [("leader", None, 0)]
        for given in args.staleness.split(","):
            seconds = float(given)
            ways.append((f"standbys {seconds:g}", seconds, 0))
            ways.append((f"standbys {seconds:g} + writes", seconds, args.mixed))
        for name, staleness, mixed in ways:
            figures = await _way(url, args.readers, args.seconds, staleness, mixed)
            print(_line(name, args.seconds, figures))


def main() -> None:
    """The command line (see the module docstring)."""
    command_line = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    command_line.add_argument("--readers", type=int, default=8)
    command_line.add_argument("--names", type=int, default=100)
    command_line.add_argument("--seconds", type=float, default=5.0, help="per way")
    command_line.add_argument("--staleness", default="0,1", help="seconds, comma-separated")
    command_line.add_argument("--mixed", type=int, default=10, help="a write every N reads")
    asyncio.run(_run(command_line.parse_args()))


if __name__ == "__main__":
    main()
