"""What the statistics per name cost: the memory after a million distinct contended
names, against what the estimate counts; the time of ``top`` and of a scrape (issue 60).

``python -m bench.micro.contention`` drives an engine (pure or compiled: whichever
this checkout imports; the first line says which) through ``--names`` (1,000,000)
distinct names, each contended once: one session locks it, a second queues behind,
both release (the name is then dropped: ephemeral), so the state ends as it began and
what is left is the sketch (``--contention-names``, 1,000 by default). It prints
the process's RSS growth (``VmRSS``) beside the sketch's bytes in the memory estimate
(``QuotaLedger.kept_bytes``), the names kept and pushed out, the time per name (four
commands), then the time of one TopNames over every node (by wait, and by the longest
hold now: a look at each kept name's semaphore) and of the
``/metrics`` families of the names (``--contention-series`` 100): the series each
family has.

Internals: the engine (``tenure._core``) and the metrics' families
(``tenure.server._http.contention_series``) directly: the engine's own work, without
a network.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tenure._core import MAX_COUNT, Acquire, CreateNode, CreateSession, Engine, Release, TopNames
from tenure._core import engine as engine_module
from tenure._core.name_stats import CONTENTION_NAMES, CONTENTION_SERIES, CONTENTION_SHARE
from tenure._core.values import NodeConfig
from tenure.server._http.contention_series import contention_families

NODE = "n"


def rss_kib() -> int:
    """This process's resident memory, in KiB (``VmRSS`` of /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def main() -> None:
    """Drive the names, then print one line per measure."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--names", type=int, default=1_000_000)
    args.add_argument("--contention-names", type=int, default=CONTENTION_NAMES)
    o = args.parse_args()
    file = engine_module.__file__ or ""
    print(f"engine: {'pure' if file.endswith('.py') else 'compiled'}")
    engine = Engine()
    engine.name_stats.resize(o.contention_names, CONTENTION_SHARE)
    engine.apply(CreateNode(NODE, NodeConfig()), 0.0)
    one, two = (int(engine.apply(CreateSession(NODE, b"k" * 16), 0.0).session_id) for _ in "12")
    gc.collect()
    before_rss, before_estimate = rss_kib(), engine.ledger.estimate()
    started = time.perf_counter()
    for i in range(o.names):
        name, now = f"job-{i:07d}", i / 1000  # (a thousand names a second of engine time)
        rid = i + 1
        engine.apply(Acquire(one, name, MAX_COUNT, rid, ephemeral=True), now)
        engine.apply(Acquire(two, name, MAX_COUNT, rid, ephemeral=True), now)
        engine.apply(Release(one, name), now + 0.0005)
        engine.apply(Release(two, name), now + 0.0008)
        engine.take_effects()
    took = time.perf_counter() - started
    gc.collect()
    stats = engine.name_stats
    grown = (rss_kib() - before_rss) * 1024
    estimate = engine.ledger.estimate() - before_estimate
    print(f"names driven                 {o.names:>12,}  ({took / o.names * 1e6:.2f} us a name)")
    print(f"kept / pushed out            {stats.kept:>12,}  {stats.evicted:,}")
    print(f"estimate grew (bytes)        {estimate:>12,}  (the sketch: {stats.bytes:,})")
    print(f"RSS grew (bytes)             {grown:>12,}  ({grown / max(estimate, 1):.2f}x it)")
    now = o.names / 1000
    for sort in ("wait", "hold"):
        started = time.perf_counter()
        report = engine.apply(TopNames("", sort=sort, limit=100), now)
        took_ms = (time.perf_counter() - started) * 1000
        print(f"TopNames by {sort:<5} (ms)       {took_ms:>12.2f}  "
              f"({len(report.names)} of {stats.kept:,} kept names)")  # fmt: skip
    started = time.perf_counter()
    families = list(contention_families(stats, CONTENTION_SERIES))
    took_ms = (time.perf_counter() - started) * 1000
    most = max(len(family.samples) for family in families)
    print(f"/metrics' name families (ms) {took_ms:>12.2f}  (at most {most} series a family)")


if __name__ == "__main__":
    main()
