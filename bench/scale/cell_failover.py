"""One cell's failover, seen from another cell: its probe's p99 before and during.

:func:`measure` starts one etcd member and two cells of one service, ``c0`` and
``c1``, of two members each (a leader and a standby), and waits until both know each
other. A session on a node that cell ``c1`` serves (created through ``c1``'s doors, on
the cell rendezvous hashing picks for its name) locks and releases a mutex, one pair
after another, for ``seconds``: the baseline. A session of ``c0`` holds a lock there
meanwhile (a failover has a session to resume). Then ``c0``'s leader is killed
(SIGKILL): its standby takes over after the lease's TTL, and ``c1``'s probe goes on
for as long as the baseline ran, or until ``c0`` leads again if that takes longer.
Returned: the probe's p50 and p99 in each window, the ratio of the two p99s (the
target: at most 1.2, issue 61), how long ``c0`` had no leader, and that ``c0``'s
holder kept its lock.

``python -m bench.scale.cell_failover [--seconds S]`` prints one measure (by hand).

Internals: the tests' harness (tests.cluster, tests.etcd) to run etcd and the members;
the probe and the holder use the public client.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from tests.cluster.harness import TenureCluster, until
from tests.etcd.cluster import EtcdCluster

import tenure
from bench.scale.cells import all_known
from tenure._core.rendezvous import hash64

CELLS = ("c0", "c1")


def _name_on(cell: str, stem: str) -> str:
    """A node name that a client creates on ``cell`` (rendezvous hashing over CELLS)."""
    for n in range(10_000):
        name = f"{stem}-{n}"
        if max(CELLS, key=lambda c: hash64(c, name)) == cell:
            return name
    raise AssertionError("no name hashes there")


def _quantiles(latencies: list[float]) -> tuple[float, float]:
    """The p50 and p99 of ``latencies`` (seconds), in milliseconds."""
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return 1e3 * statistics.median(latencies), 1e3 * cuts[98]


async def _probe(url: str, node: str, stop: asyncio.Event, seen: list[tuple[float, float]]) -> None:
    """Lock and release a mutex of ``node`` one pair after another until ``stop``: each
    pair's (start, seconds) in ``seen``."""
    async with tenure.connect(url) as client:
        await client.create_node(node, exist_ok=True)
        async with client.session(node) as session:
            mutex = session.mutex("probe")
            while not stop.is_set():
                started = time.monotonic()
                async with mutex:
                    pass
                seen.append((started, time.monotonic() - started))


async def _measure(cells: list[TenureCluster], seconds: float) -> dict[str, Any]:
    await all_known(cells)
    doors = {
        name: "tenure://" + ",".join(s.address for s in cell.servers)
        for name, cell in zip(CELLS, cells, strict=True)
    }
    holder_node, probe_node = _name_on("c0", "held"), _name_on("c1", "probed")
    async with tenure.connect(doors["c0"]) as holder_client:
        await holder_client.create_node(holder_node, exist_ok=True, recovery_window=60)
        holder = await holder_client.session(holder_node, recovery_window=60)
        await holder.mutex("kept").lock()
        stop, seen = asyncio.Event(), list[tuple[float, float]]()
        probe = asyncio.ensure_future(_probe(doors["c1"], probe_node, stop, seen))
        await until(partial(_ready, seen), "the probe runs")
        started = time.monotonic()
        await asyncio.sleep(seconds)  # (the baseline window: a bench, not a test)
        old = cells[0].leader()
        killed = time.monotonic()
        await asyncio.to_thread(old.kill)
        await asyncio.to_thread(cells[0].leader, excluding=old)
        led = time.monotonic()
        await asyncio.sleep(max(0.0, killed + max(seconds, led - killed) - time.monotonic()))
        stop.set()
        await probe
        ended = time.monotonic()
        kept = (await holder.mutex("kept").describe()).held
    before = [s for t, s in seen if started <= t < killed]
    during = [s for t, s in seen if killed <= t < ended]
    (p50_before, p99_before), (p50_during, p99_during) = _quantiles(before), _quantiles(during)
    return {
        "baseline_pairs": len(before),
        "during_pairs": len(during),
        "baseline_p50_ms": p50_before,
        "baseline_p99_ms": p99_before,
        "during_p50_ms": p50_during,
        "during_p99_ms": p99_during,
        "p99_ratio": p99_during / p99_before,
        "leaderless_s": led - killed,
        "holder_kept_lock": kept,
    }


async def _ready(seen: list[tuple[float, float]]) -> bool:
    return len(seen) >= 10


def measure(workdir: Path, seconds: float) -> dict[str, Any]:
    """The probe of one cell while the other fails over (module docstring)."""
    name = f"failover{uuid.uuid4().hex[:8]}"
    with EtcdCluster(1, root=workdir / "etcd") as etcd:
        cells = [
            TenureCluster(workdir / cell, etcd.endpoints, size=2, name=name, extra=("--cell", cell))
            for cell in CELLS
        ]
        opened: list[TenureCluster] = []
        try:
            for cell in cells:
                opened.append(cell.open())
            return asyncio.run(_measure(cells, seconds))
        finally:
            for cell in opened:
                cell.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.scale.cell_failover [--seconds S]``: one measure, as JSON."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale.cell_failover", description=__doc__
    )
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        print(json.dumps(measure(Path(scratch), args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
