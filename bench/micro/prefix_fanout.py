"""What one change of a node costs per prefix watch it fires (issue 47).

A prefix watch of ``""`` fires on every change of its node: one ``WatchFired`` per
watch, pushed to its session's connection, or kept for it while it is detached
(only the latest firing of each watch). ``--max-prefix-watches-per-node`` bounds how
many a node has; this measures what each costs, so that the bound states a cost:

* **in the engine** (``engine``): ``P`` prefix watches on ``""`` of a node, 1,000
  per session (the node's default ``max_watches_per_session``), every session
  detached; one change (an ``UpdateSemaphore`` that fires them all) applied, and its
  effects routed by the server's session table (``SessionTable.route``, which queues
  each for its detached session, replacing the watch's older firing): the CPU time of
  a change, the best of ``--repeats``, and per firing;
* **on a real server** (``server``): a fresh ``tenure serve --fsync off
  --max-prefix-watches-per-node P`` whose node has ``P`` such watches, their sessions
  detached (their connections closed); then a client's mutex ``Acquire`` and
  ``Release`` on that node, ``--pairs`` times, one at a time: the median round trip
  of a pair (each pair is two changes of the watched node), beside the same on a
  node nobody watches.

Run: ``python -m bench.micro.prefix_fanout [--watches 100,1000,10000] [--pairs N]``;
against the code before issue 47, run it with ``PYTHONPATH`` naming that checkout's
``src/`` (its session table scanned the queue for every firing).

Internals: the engine (``Engine``, its commands) and the server's
``SessionTable`` (what routes a change's effects), measured without the network;
the server part speaks the native protocol with the tests' wire client.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from tests.server.wire import Clients, ServerProcess, WireClient

from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DetachSession,
    Engine,
    NodeConfig,
    Release,
    UpdateSemaphore,
    WatchPrefix,
)
from tenure.server._session_table import SessionTable

KEY = b"bench-key"
PER_SESSION = 1_000
ROOMY = NodeConfig(max_sessions=100_000, max_watches_per_session=PER_SESSION)


def engine_change(watches: int, repeats: int) -> float:
    """Seconds of CPU one change firing ``watches`` detached prefix watches costs."""
    engine = Engine()
    if hasattr(engine, "max_prefix_watches_per_node"):  # (absent before issue 47)
        engine.max_prefix_watches_per_node = watches
    engine.apply(CreateNode("n", ROOMY), 0.0)
    writer = engine.apply(CreateSession("n", KEY), 0.0).session_id
    engine.apply(CreateSemaphore(writer, "s", 1, b"0"), 0.0)
    table: SessionTable[str] = SessionTable()
    table.attach(writer, "writer")
    left = watches
    while left:
        sid = engine.apply(CreateSession("n", KEY), 0.0).session_id
        for _ in range(min(left, PER_SESSION)):
            engine.apply(WatchPrefix(sid, "", watch_data=True), 0.0)
        left -= min(left, PER_SESSION)
        engine.apply(DetachSession(sid), 0.0)
    table.route(engine.take_effects())
    best = float("inf")
    for n in range(repeats):
        # (a first change fills each session's queue; a later one replaces it all)
        started = time.process_time()
        engine.apply(UpdateSemaphore(writer, "s", b"v%d" % n), 0.0)
        table.route(engine.take_effects())
        best = min(best, time.process_time() - started)
    return best


async def _pairs(client: WireClient, sid: int, name: str, pairs: int) -> float:
    """The median seconds of a mutex acquire and release on ``name``."""
    times = []
    for i in range(pairs):
        started = time.perf_counter()
        await client.call(Acquire(sid, name, MAX_COUNT, i + 1, ephemeral=True))
        await client.call(Release(sid, name))
        times.append(time.perf_counter() - started)
    return statistics.median(times)


async def _watched(clients: Clients, port: int, watches: int) -> None:
    """Arm ``watches`` prefix watches of ``""`` on node ``n``, 1,000 per session, each
    session detached after (its connection closed: its firings wait in the server)."""
    left = watches
    while left:
        watcher = await clients.connect(port)
        sid = (await watcher.call(CreateSession("n", KEY))).session_id
        count = min(left, PER_SESSION)
        sent = [watcher.send(WatchPrefix(sid, "", watch_data=True)) for _ in range(count)]
        for request in sent:
            await watcher.answer(request)
        left -= count
        await watcher.close()


async def server_pairs(watches: int, pairs: int) -> tuple[float, float]:
    """(a pair on the watched node, a pair on another), median seconds, on a server
    whose node has ``watches`` detached prefix watches."""
    clients = Clients()
    flags: tuple[str, ...] = ("--fsync", "off")
    if hasattr(Engine(), "max_prefix_watches_per_node"):  # (no such flag before issue 47)
        flags += ("--max-prefix-watches-per-node", str(max(watches, 1)))
    with (
        tempfile.TemporaryDirectory() as scratch,
        ServerProcess(Path(scratch) / "data", *flags) as server,
    ):
        try:
            client = await clients.connect(server.port)
            await client.call(CreateNode("n", ROOMY))
            await client.call(CreateNode("calm"))
            await _watched(clients, server.port, watches)
            sid = (await client.call(CreateSession("n", KEY))).session_id
            calm = (await client.call(CreateSession("calm", KEY))).session_id
            await _pairs(client, sid, "m", 3)  # (warm: each queue filled once)
            watched = await _pairs(client, sid, "m", pairs)
            return watched, await _pairs(client, calm, "m", pairs)
        finally:
            await clients.close_all()


def main() -> None:
    """Print both tables (module docstring)."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--watches", default="100,1000,10000")
    args.add_argument("--repeats", type=int, default=5)
    args.add_argument("--pairs", type=int, default=20)
    args.add_argument("--no-server", action="store_true", help="the engine's table only")
    o = args.parse_args()
    counts = [int(each) for each in o.watches.split(",")]
    print("in the engine: one change firing P detached prefix watches (CPU)")
    print(f"{'P':>8} {'per change ms':>14} {'per firing us':>14}")
    for count in counts:
        took = engine_change(count, o.repeats)
        print(f"{count:>8} {took * 1e3:>14.2f} {took / count * 1e6:>14.2f}")
    if o.no_server:
        return
    print("\non a real server: a mutex acquire+release (two changes), median round trip")
    print(f"{'P':>8} {'watched node ms':>16} {'other node ms':>14}")
    for count in [0, *counts]:
        watched, other = asyncio.run(server_pairs(count, o.pairs))
        print(f"{count:>8} {watched * 1e3:>16.2f} {other * 1e3:>14.2f}")


if __name__ == "__main__":
    main()
