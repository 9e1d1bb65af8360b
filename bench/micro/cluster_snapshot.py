"""How long a cluster leader's snapshots keep its clients waiting: a probe's longest answer.

``python -m bench.micro.cluster_snapshot [--holds N] [--churn N] [--probe-ms MS]``

One etcd member and three ``tenure serve --cluster`` members (the test suite's
harness, ``--fsync off``). The leader is given ``--holds`` held mutexes (one session,
pipelined over the wire client), then, while a probe client asks the leader a cheap
question (``DescribeNode``) every ``--probe-ms`` from a process of its own and
times each answer, another connection makes ``--churn`` changes (an acquire and a
release of a mutex of their own, pipelined a batch at a time), so that snapshots fall
due (a snapshot is due
after ``--snapshot-every`` records and a quarter of the state's size). It prints the
snapshots the leader logged in that window (``snapshot_written``: the log index, the
bytes, the seconds from its start to its use) and the probe's p50, p99 and max.

Before issue 50's change the leader dumped its engine on its event loop for each
snapshot (85 ms at 100,000 holds, 877 ms at 1,000,000: every client waited that
long); now a process of its own does (``tenure.server._cluster.state_process``). To
compare, run it once on each tree: ``PYTHONPATH=OTHER/src python -m
bench.micro.cluster_snapshot`` runs the servers (and this client) of ``OTHER``; the
harness comes from this checkout. Say which build each ran (``scripts/compile``
makes a tree's the compiled one; without it, the pure one). Compare within one run
of the machine: it is noisy.

Internals: the test suite's wire client, etcd member and cluster harness (the
public client's objects for 100,000 locks would weigh on this process).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import Clients, WireClient

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSession,
    DescribeNode,
    NodeConfig,
    Release,
)
from tenure._protocol import Failure, Reply

KEY = b"bench-key"
#: Requests in flight per connection while filling.
BATCH = 1_000
#: A node roomy enough for the holds, whose session outlives a slow fill.
ROOMY = NodeConfig(max_semaphores=1_000_000, max_sessions=100, recovery_window=3_600.0)


async def _answered(client: WireClient, ids: list[int], what: str) -> None:
    for request_id in ids:
        answer = await client.answer(request_id)
        if not isinstance(answer, Reply):
            assert isinstance(answer, Failure)
            raise RuntimeError(f"{what} refused: {answer.message}")
    client.events.clear()  # (the wire client keeps every event: not here)
    client.pushes.clear()


async def fill(client: WireClient, sid: int, holds: int) -> None:
    """Hold ``holds`` distinct mutexes in session ``sid``, a batch in flight at a time."""
    for start in range(0, holds, BATCH):
        ids = [
            client.send(Acquire(sid, f"held-{i}", MAX_COUNT, i, b"", None, True))
            for i in range(start, min(holds, start + BATCH))
        ]
        await _answered(client, ids, "a fill's acquire")


async def churn(client: WireClient, sid: int, pairs: int, batch: int) -> None:
    """``pairs`` acquires and releases of mutexes of this session's own."""
    done = 0
    while done < pairs:
        count = min(batch, pairs - done)
        names = [f"churn-{(done + i) % 64}-{done + i}" for i in range(count)]
        ids = [
            client.send(Acquire(sid, name, MAX_COUNT, 10**9 + done + i, b"", None, True))
            for i, name in enumerate(names)
        ]
        await _answered(client, ids, "a churn's acquire")
        await _answered(client, [client.send(Release(sid, name)) for name in names], "release")
        done += count


async def probe(port: int, every: float) -> None:
    """Ask the server at ``port`` ``DescribeNode`` every ``every`` seconds until told
    SIGTERM; print each answer's wait, in seconds, as one JSON list (a process of its
    own: the churn's answers must not delay this one's)."""
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    clients = Clients()
    waits = []
    try:
        client = await clients.connect(port)
        while not stop.is_set():
            started = time.perf_counter()
            await client.call(DescribeNode("n"))
            waits.append(time.perf_counter() - started)
            await asyncio.sleep(every)
    finally:
        await clients.close_all()
    print(json.dumps(waits))


def _snapshots(text: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in text.splitlines() if '"snapshot_written"' in line]
    return [line.get("fields", line) for line in lines]


async def run(args: argparse.Namespace, root: Path) -> dict[str, float]:
    """The run (module docstring); prints its figures and returns them."""
    with EtcdCluster(1, root=root / "etcd") as etcd:
        # Room for the holds and the churn's own mutexes besides (past a million, the
        # server's ceiling of a node's semaphores raised to match).
        room = max(ROOMY.max_semaphores, args.holds + 10_000)
        extra: tuple[str, ...] = ("--cluster-snapshot-every", str(args.snapshot_every))
        extra += ("--max-node-semaphores", str(room))
        with TenureCluster(root / "cluster", etcd.endpoints, extra=extra) as cluster:
            leader = cluster.leader()
            clients = Clients()
            try:
                filler = await clients.connect(leader.port)
                await filler.call(CreateNode("n", replace(ROOMY, max_semaphores=room)))
                sid = (await filler.call(CreateSession("n", KEY))).session_id
                started = time.perf_counter()
                await fill(filler, sid, args.holds)
                filled = time.perf_counter() - started
                print(f"filled {args.holds:,} holds in {filled:.1f} s", file=sys.stderr)
                await asyncio.sleep(2.0)  # (a snapshot the fill made due, done)
                seen = len(_snapshots(leader.output()))
                prober = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "bench.micro.cluster_snapshot",
                    "--probe",
                    str(leader.port),
                    "--probe-ms",
                    str(args.probe_ms),
                    stdout=asyncio.subprocess.PIPE,
                )
                await asyncio.sleep(1.0)  # (its interpreter started)
                started = time.perf_counter()
                await churn(filler, sid, args.churn, args.batch)
                churned = time.perf_counter() - started
                await asyncio.sleep(3.0)  # (the last snapshot due, put in use)
                prober.terminate()
                out, _ = await prober.communicate()
                waits = json.loads(out)
            finally:
                await clients.close_all()
            made = _snapshots(leader.output())[seen:]
    print(f"churn: {args.churn:,} acquire+release pairs in {churned:.1f} s", file=sys.stderr)
    for snapshot in made:
        print(
            f"  snapshot at index {snapshot.get('index')}: {snapshot.get('bytes'):,} bytes, "
            f"{snapshot.get('seconds')} s from its start to its use",
            file=sys.stderr,
        )
    waits.sort()
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    print(
        f"probe: {len(waits)} answers, p50 {statistics.median(waits) * 1e3:.1f} ms, "
        f"p99 {p99 * 1e3:.1f} ms, max {waits[-1] * 1e3:.1f} ms "
        f"({len(made)} snapshots made in the window)",
        file=sys.stderr,
    )
    return {
        "stall_max_ms": waits[-1] * 1e3,
        "probe_p99_ms": p99 * 1e3,
        "probe_p50_ms": statistics.median(waits) * 1e3,
        "snapshots": float(len(made)),
        "fill_s": filled,
        "churn_s": churned,
    }


def measure(holds: int, churn: int = 0) -> dict[str, float]:
    """What bench/scale reads: a leader holding ``holds`` mutexes through ``churn``
    acquire+release pairs (default: enough records to make a snapshot due, a quarter
    of the state's size and more), the probe's slowest answer meanwhile (the
    snapshot's stall as its clients see it), its p50 and p99, the snapshots made."""
    args = argparse.Namespace(
        holds=holds,
        churn=churn or max(30_000, holds * 3 // 20),
        batch=200,
        probe_ms=5.0,
        snapshot_every=10_000,
    )
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as scratch:
        return asyncio.run(run(args, Path(scratch)))


def main() -> None:
    """Run it (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--holds", type=int, default=100_000)
    parser.add_argument("--churn", type=int, default=30_000, help="acquire+release pairs")
    parser.add_argument("--batch", type=int, default=200, help="churn pairs in flight")
    parser.add_argument("--probe-ms", type=float, default=5.0)
    parser.add_argument("--snapshot-every", type=int, default=10_000)
    parser.add_argument("--probe", type=int, default=0, help="(internal) probe this port")
    args = parser.parse_args()
    if args.probe:
        asyncio.run(probe(args.probe, args.probe_ms / 1000))
        return
    with tempfile.TemporaryDirectory(prefix="tenure-bench-") as scratch:
        asyncio.run(run(args, Path(scratch)))


if __name__ == "__main__":
    main()
