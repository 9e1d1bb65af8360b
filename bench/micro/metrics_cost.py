"""The CPU cost of ``--http-port``'s metrics on the server's hot path (not part of the tests).

End-to-end rates (``bench/micro/serve_seq.py --metrics``) on a shared machine move by more
than the metrics cost; this measures the server's own CPU time instead
(``time.process_time``) for the work every request does with and without the
metrics: the journaled engine applying Acquire + Release pairs of one session (a
grant at once, and half of them queued behind another session first, so grant
waits are timed too), a group commit every ``--batch`` commands (``--fsync off``:
the disk is not what is measured), and the native request counter per command.
Network and codec time, which the metrics do not touch, are left out, so the ratio
shown is the worst case a real server sees.

Run: ``python -m bench.micro.metrics_cost [--pairs N] [--repeats R]``.

Internals: ``tenure._core``'s commands, the server's host (``wal_host``),
``tenure.server._http.metrics.ServerMetrics`` and ``tenure.server._observe.ServerObserver``:
the cost measured is the metrics' own, on the server's hot path, without the
network and codec a client would add.
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

from tenure import __version__
from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Release
from tenure.server import DataDir, FsyncMode, Journal, ServeConfig, wal_host
from tenure.server._http.metrics import ServerMetrics
from tenure.server._observe import ServerObserver


class _NoClients:
    """The server's output with nobody to write to (the commits are measured alone)."""

    def seal(self, batch: int, durable: int) -> None:
        """Nothing is queued: nothing to seal."""

    def release(self, durable: int) -> None:
        """Nothing was sealed: nothing to write."""


async def seconds_per_pair(pairs: int, batch: int, observer: ServerObserver | None) -> float:
    """CPU seconds per pair (module docstring), with ``observer`` or without (None)."""
    with tempfile.TemporaryDirectory() as tmp:
        journal = Journal(DataDir(Path(tmp), FsyncMode.OFF), compact_every=10**9)
        config = ServeConfig(data_dir=Path(tmp), fsync=FsyncMode.OFF)
        served = wal_host(config, journal, journal.open(0.0), observer)
        served.attach(lambda effects: None, _NoClients(), lambda: None)
        served.start()
        host = served.host
        host.execute(CreateNode("bench"))
        mine = host.execute(CreateSession("bench", b"a")).session_id
        other = host.execute(CreateSession("bench", b"b")).session_id
        commands = 0
        started = time.process_time()
        for i in range(pairs):
            name = f"k{i % 64}"
            step: list[Acquire | Release] = []
            if i % 2:  # another holds it first: this acquire queues, granted on release
                step.append(Acquire(other, name, MAX_COUNT, 2 * i + 1, ephemeral=True))
            step.append(Acquire(mine, name, MAX_COUNT, 2 * i + 2, ephemeral=True))
            if i % 2:
                step.append(Release(other, name))
            step.append(Release(mine, name))
            for command in step:
                host.execute(command)
                if observer is not None:
                    observer.request(command, None)  # what NativeFace adds
                commands += 1
                if commands % batch == 0:
                    served.flush()
        served.flush()
        elapsed = time.process_time() - started
        served.shutdown()
        return elapsed / pairs


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.micro.metrics_cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=64, help="commands per group commit")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    off: list[float] = []
    on: list[float] = []
    for _ in range(args.repeats):  # alternately, so that drift hits both alike
        off.append(asyncio.run(seconds_per_pair(args.pairs, args.batch, None)))
        metrics = ServerMetrics(version=__version__, instance_id="bench")
        on.append(asyncio.run(seconds_per_pair(args.pairs, args.batch, metrics)))
    without, with_ = statistics.median(off), statistics.median(on)
    print(
        f"server CPU per pair (engine + journal + counters): metrics off {without * 1e6:.1f} us, "
        f"on {with_ * 1e6:.1f} us: on/off {with_ / without:.3f} "
        f"(+{(with_ - without) * 1e6:.2f} us per pair; median of {args.repeats})"
    )


if __name__ == "__main__":
    main()
