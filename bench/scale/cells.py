"""Cells of one service: par's throughput from one cell and from N, and each cell's CPU.

:func:`measure` starts one etcd member and N cells of one service (``tenure serve
--cluster etcd://.../NAME --cell cK``, one member each: its leader), waits until the
first cell knows them all (its ClusterStatus lists N cells), then runs the shards'
client processes (:func:`bench.scale.shards.work`: :data:`~bench.scale.shards.CLIENTS`
processes, each with sessions on nodes of its own, locking and releasing distinct
mutexes) with a URL of every cell's door: the client learns the cells and creates
each node on the cell rendezvous hashing picks (docs/cluster.md, "Cells"). It
returns the pairs per second of all clients together, the pairs' p50 and p99, the
leaders' CPU per pair (all cells), and the busiest cell's CPU per pair of its own
nodes (the pairs the clients counted on the nodes it holds): the figure that must
not grow with N for cells to project onto N machines (docs/scale.md).

``python -m bench.scale.cells N`` prints one measure (by hand).

Internals: the tests' harness (tests.cluster, tests.etcd) to run etcd and the members,
and ClusterStatus and ListNodes over the raw protocol (tests.server.wire) to see which
cell holds which node.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
from tests.cluster.harness import TenureCluster, until
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import WireClient

from bench.scale.shards import CLIENTS, REPO
from tenure._core import ListNodes
from tenure._protocol.cluster import ClusterStatus, ClusterView

#: Seconds the clients get to open their sessions before the CPU window starts.
OPENING = 1.0


async def _ask(host: str, port: int, command: Any) -> Any:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        client = WireClient(reader, writer)
        await client.hello()
        return await client.call(command)
    finally:
        writer.close()


async def all_known(cells: list[TenureCluster]) -> None:
    """Until the first cell's first member knows every cell of ``cells`` (with members)."""
    first = cells[0].servers[0]

    async def known() -> bool:
        view = await _ask(first.host, first.port, ClusterStatus())
        assert isinstance(view, ClusterView)
        return sum(1 for cell in view.cells if cell.members) == len(cells)

    await until(known, "the first cell knows every cell")


def _cpu(pid: int | None) -> float:
    assert pid is not None, "a leader died"
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def measure(count: int, workdir: Path, seconds: float) -> dict[str, Any]:
    """par over ``count`` cells for ``seconds`` (module docstring)."""
    name = f"cells{uuid.uuid4().hex[:8]}"
    with EtcdCluster(1, root=workdir / "etcd") as etcd:
        cells = [
            TenureCluster(
                workdir / f"c{k}", etcd.endpoints, size=1, name=name, extra=("--cell", f"c{k}")
            )
            for k in range(count)
        ]
        opened: list[TenureCluster] = []
        clients: list[subprocess.Popen[str]] = []
        try:
            for cell in cells:
                opened.append(cell.open())
            asyncio.run(all_known(cells))
            url = "tenure://" + ",".join(cell.servers[0].address for cell in cells)
            for index in range(CLIENTS):
                cmd = [sys.executable, "-m", "bench.scale.shards", "worker", "--url", url]
                cmd += ["--seconds", str(seconds), "--index", str(index)]
                clients.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=REPO))
            time.sleep(OPENING)  # (the clients open their sessions; the window is theirs)
            leaders = [cell.servers[0] for cell in cells]
            before = [_cpu(leader.pid) for leader in leaders]
            outputs = [c.communicate(timeout=seconds + 60)[0] for c in clients]
            spent = [_cpu(leader.pid) - cpu for leader, cpu in zip(leaders, before, strict=True)]
            held = [
                set(asyncio.run(_ask(s.host, s.port, ListNodes("", 10_000))).names) for s in leaders
            ]
        finally:
            for client in clients:
                if client.poll() is None:
                    client.kill()
            for cell in opened:
                cell.close()
    results = [json.loads(out.strip().splitlines()[-1]) for out in outputs]
    pairs = sum(r["pairs"] for r in results)
    # Each cell's own pairs: those of the nodes it holds (the clients count per node:
    # closed loops do fewer pairs on a slower cell than its share of the nodes).
    cell_pairs = [
        sum(count for r in results for node, count in r["per_node"].items() if node in names)
        for names in held
    ]
    per_cell = [1e6 * cpu / max(1, done) for cpu, done in zip(spent, cell_pairs, strict=True)]
    return {
        "pairs_per_s": sum(r["pairs"] / r["seconds"] for r in results),
        "par_p50_ms": statistics.median(r["p50_ms"] for r in results),
        "par_p99_ms": max(r["p99_ms"] for r in results),
        # (the CPU window brackets the clients' run, their opening included: an upper bound)
        "server_cpu_us_per_pair": 1e6 * sum(spent) / pairs,
        "cell_cpu_us_per_pair": max(per_cell),
        "nodes_per_cell": [len(names) for names in held],
        "pairs_per_cell": cell_pairs,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.scale.cells N [--seconds S]``: one measure, printed as JSON."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale.cells", description=__doc__)
    parser.add_argument("cells", type=int)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        print(json.dumps(measure(args.cells, Path(scratch), args.seconds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
