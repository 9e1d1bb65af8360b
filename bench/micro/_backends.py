"""What the micro-benchmarks run on every backend share (``cache``, ``claims``,
``lock_all``, ``rebalance``, ``takeover``): the systems they start, a URL of the
run's own on each, the loop that starts each system in turn, and the timings'
summary.

Internals: none (the peer benchmark's servers, :mod:`bench.tools.systems`).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Final

from bench.tools import systems

#: The systems run by default (``--systems``): memory://, tenure:// (fsync off), and
#: the redis://, etcd:// and postgres:// backends on their servers.
SYSTEMS: Final = ("tenure-memory", "tenure-off", "tenure-redis", "tenure-etcd", "tenure-postgres")
#: Untimed runs of a step before the timed ones (connections made, caches warm).
WARMUP: Final = 10


def parser(doc: str) -> argparse.ArgumentParser:
    """The command line of the benchmark whose module docstring is ``doc``: its first
    paragraph, and ``--systems`` (comma-separated)."""
    made = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    made.add_argument("--systems", default=",".join(SYSTEMS))
    return made


def each_running(names: str, scratch: str) -> Iterator[tuple[str, systems.Server]]:
    """Each system of ``names`` (comma-separated), started in turn on free ports (its
    data in a temporary directory ``bench-<scratch>-...``) and stopped after its turn."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{scratch}-") as tmp:
        for system in names.split(","):
            with systems.running(system, Path(tmp)) as server:
                yield system, server


def with_prefix(url: str) -> str:
    """The system's URL with a key prefix of this run (etcd and redis servers are
    shared); memory:// named, so that the run's clients share one engine."""
    prefix = uuid.uuid4().hex[:8]
    if url == "memory://":
        return f"memory://bench-{prefix}"
    if url.startswith("etcd://"):
        return f"{url}?prefix=/bench-{prefix}/"
    if url.startswith("redis://"):
        return f"{url}?prefix=bench-{prefix}:"
    return url


async def timed(step: Callable[[], Awaitable[object]], n: int) -> list[float]:
    """``n`` runs of ``step``, one at a time, each timed (ms), after :data:`WARMUP`."""
    for _ in range(WARMUP):
        await step()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        await step()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def p99(samples: list[float]) -> float:
    """The 99th percentile of ``samples`` (with a few dozen, about the largest)."""
    return sorted(samples)[min(len(samples) - 1, int(len(samples) * 0.99))]


def p50_p99(samples: list[float], spec: str = "7.2f") -> str:
    """``median / p99`` of ``samples``, each formatted by ``spec``; ``n/a`` if none."""
    if not samples:
        return "n/a"
    return f"{statistics.median(samples):{spec}} / {p99(samples):{spec}}"
