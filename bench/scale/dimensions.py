"""The dimensions of the scale run, one function each: a row of numbers per size.

Each size runs on a fresh server (:func:`bench.scale.stage.staged`), so that memory
per item is the growth of that server alone. What each measures beyond the stage's
common numbers (memory per item, server CPU, the probe's p50/p99/max, the health
probe's slowest answer):

* ``connections``: pinging connections (4 client processes); the time to open them;
* ``sessions``: sessions of one node over 100 pinging connections;
* ``holds``: held mutexes; then the server is stopped (SIGTERM) and started again
  on its data: seconds to the first answer that sees every hold (restart);
* ``waiters``: acquires queued on one semaphore behind its holder; then a chain of
  grants from the queue's head (each granted waiter releases at once): the server's
  CPU per grant and the wall time per grant;
* ``nodes``: nodes; then every page of their listing (ListNodes, 1,000 a page);
* ``watchers`` and the cluster's failover are measured by their own modules
  (:mod:`bench.micro.watch_fanout`, :mod:`bench.micro.failover`), called from
  :mod:`bench.scale.run`.
"""

from __future__ import annotations

import asyncio
import resource
import time
from pathlib import Path
from typing import Any

from bench.peers import resources
from bench.peers.holders import NODE as HOLD_NODE
from bench.scale.load import roomy
from bench.scale.stage import STEP_TIMEOUT, Stage, staged
from bench.scale.wire import Conn
from tenure._core import CreateNode, ListNodes

#: Files the server keeps besides the load's connections: its HTTP connections (256), its own
#: files (64: server/_net/fds.py), the probe's; the rest is the largest size.
FD_HEADROOM = 400
#: Grants chained through the waiters' queue, per size.
CHAIN = 1_000
Row = dict[str, Any]


def file_limit() -> int:
    """The hard limit of open files here: the most connections one server may hold."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)[1]


def most_connections() -> int:
    """The largest connections size: the file limit less the server's own headroom."""
    return (file_limit() - FD_HEADROOM) // 100 * 100


async def _create_node(port: int, node: str, room: int) -> None:
    conn = await Conn.open(port)
    try:
        await conn.call(CreateNode(node, roomy(room)))
    finally:
        conn.close()


def connections(size: int, workdir: Path, probe_seconds: float) -> Row:
    """``size`` pinging connections (0: the probe alone, the baseline)."""
    room = ["--max-connections", str(size + 100), "--max-handshaking", "2048"]
    with staged(workdir, room, probe_seconds=probe_seconds) as stage:
        row: Row = {"size": size}
        if size:
            started = time.perf_counter()
            stage.load("connections", size, 4)
            row["open_s"] = time.perf_counter() - started
        row.update(stage.measure(size))
        ended = stage.end_load()
        row["ping_failures"] = sum(e["failed"] for e in ended)
        return row


def _filled(stage: Stage, node: str, kind: str, size: int, workers: int, **options: Any) -> Row:
    """A node with room for ``size``, then ``size`` of ``kind`` over ``workers``: the
    row of the time it took and the stage's measures with the load in place."""
    asyncio.run(_create_node(stage.port, node, size))
    stage.mark()
    started = time.perf_counter()
    stage.load(kind, size, workers, node=node, **options)
    row: Row = {"size": size, "fill_s": time.perf_counter() - started}
    row.update(stage.measure(size))
    return row


def sessions(size: int, workdir: Path, probe_seconds: float) -> Row:
    """``size`` sessions of one node over 100 pinging connections."""
    with staged(workdir, probe_seconds=probe_seconds) as stage:
        row = _filled(stage, "scale", "sessions", size, 2, connections=50)
        stage.end_load()
        return row


def holds(size: int, workdir: Path, probe_seconds: float, fsync: str = "off") -> Row:
    """``size`` held mutexes from 4 sessions; then the restart's time on their data."""
    with staged(workdir, fsync=fsync, probe_seconds=probe_seconds) as stage:
        row = _filled(stage, HOLD_NODE, "holds", size, 2, connections=2)
        for worker in stage.workers:
            worker.kill()  # the sessions are detached, their holds kept (recovery window)
        stage.workers.clear()
        time.sleep(0.5)
        server = stage.server
        started = time.monotonic()
        server.stop()
        row["stop_s"] = time.monotonic() - started
        again, listening, first, seen = resources.restart(
            f"tenure-{fsync}", workdir, server.data_dir
        )
        again.stop()
        if seen != size:
            raise RuntimeError(f"the restarted server has {seen} of the {size} holds")
        row["restart_listening_s"] = listening
        row["restart_s"] = first
        return row


def waiters(size: int, workdir: Path, probe_seconds: float) -> Row:
    """``size`` acquires queued on one semaphore; a chain of grants from its head."""
    with staged(workdir, probe_seconds=probe_seconds) as stage:
        row = _filled(stage, "scale", "waiters", size, 1, connections=20)
        worker = stage.workers[0]
        chain = min(CHAIN, size - 1)
        cpu0 = stage.server.cpu_seconds()
        worker.send(f"chain {chain}")
        took = worker.expect("chained", STEP_TIMEOUT)["seconds"]
        cpu1 = stage.server.cpu_seconds()
        row["grant_cpu_ms"] = 1e3 * (cpu1 - cpu0) / chain
        row["grant_wall_ms"] = 1e3 * took / chain
        stage.end_load()
        return row


async def _list_all(port: int) -> tuple[int, float, float]:
    """Every page of ListNodes: (names, seconds in all, slowest page's seconds)."""
    conn = await Conn.open(port)
    try:
        names, after, slowest = 0, "", 0.0
        started = time.perf_counter()
        while True:
            page_started = time.perf_counter()
            page = await conn.call(ListNodes(after=after, limit=1_000))
            slowest = max(slowest, time.perf_counter() - page_started)
            if not page.names:
                return names, time.perf_counter() - started, slowest
            names += len(page.names)
            after = page.names[-1]
    finally:
        conn.close()


def nodes(size: int, workdir: Path, probe_seconds: float) -> Row:
    """``size`` nodes; then the time to list them all, a page at a time."""
    with staged(workdir, ["--max-nodes", str(size + 100)], probe_seconds=probe_seconds) as stage:
        started = time.perf_counter()
        stage.load("nodes", size, 2)
        row: Row = {"size": size, "fill_s": time.perf_counter() - started}
        row.update(stage.measure(size))
        listed, seconds, slowest = asyncio.run(_list_all(stage.port))
        if listed != size + 1:  # (and the probe's)
            raise RuntimeError(f"listed {listed} nodes of {size + 1}")
        row["list_all_s"] = seconds
        row["list_page_max_ms"] = slowest * 1e3
        stage.end_load()
        return row
