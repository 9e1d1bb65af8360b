"""One change, many watchers of one semaphore: how long until the last is told (issue 51).

A config value watched by a whole fleet: ``N`` repeating watches of one semaphore
(``DescribeSemaphore`` with ``watch_data`` and ``watch_repeat``, what
``session.watch(...)`` arms on the wire), spread over ``C`` connections (one session
each) held by several client processes, so that the clients are not the
bottleneck. Then one ``UpdateSemaphore`` of it from another connection, and it
measures:

* ``answer_s``: from sending the update to its own answer;
* ``last_told_s``: from sending the update to the last watcher's push read (the
  client processes' clocks are the machine's one monotonic clock);
* ``told_once``/``told_twice_or_more``/``not_told``: how many watches fired exactly
  once, more than once, never (read until a quiet spell after the last);
* ``probe_p50_ms``/``probe_max_ms``: a probe client's describes of another
  semaphore, one at a time, from just before the update until the last watcher was
  told: whether the server kept answering others during the fan-out;
* ``server_cpu_s``: the server process's CPU time for the update and its fan-out.

The server is a real ``tenure serve --fsync off`` with room for it
(``--max-watches-per-semaphore N``, ``--max-connections``; its node's
``max_watches_per_session`` and ``max_sessions``); the bench raises its own
RLIMIT_NOFILE, which the server and the client processes inherit.

Run: ``python -m bench.micro.watch_fanout [--watchers 10000 100000] [--connections
1000] [--processes 4] [--repeats 3]``: one fresh server per size, ``--repeats``
updates each (the median, and the worst). From another script (the lead's
``bench/scale``): :func:`measure` gives one size's numbers as a dict.

Internals: the tests' wire client (``tests.server.wire``) opens the connections
and arms the watches; after that each client process reads its connections' bytes
with the protocol's ``FrameReader`` and ``FiredPushReader`` (a push that differs
from the last only in its ids is not decoded again), so a client's cost per push
is small beside the server's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import multiprocessing.connection
import os
import resource
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.server.wire import Clients, ServerProcess, WireClient

from tenure._core import (
    CreateNode,
    CreateSemaphore,
    CreateSession,
    DescribeResult,
    DescribeSemaphore,
    NodeConfig,
    UpdateSemaphore,
    WatchFired,
)
from tenure._protocol import Push, Reply
from tenure._protocol.fanout import FiredPushReader
from tenure._protocol.frames import FrameReader

KEY = b"bench-key"
NODE = "n"
WATCHED = "config"
#: A quiet spell after the last push read, in seconds: a second firing of any watch
#: (a duplicate) would come within it.
QUIET = 0.5
#: The longest any one phase may take, in seconds.
PHASE_LIMIT = 300.0


def raise_nofile(wanted: int) -> None:
    """Raise this process's soft RLIMIT_NOFILE toward ``wanted`` (its children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))


async def arm(
    client: WireClient,
    watches: int,
    sid: int | None = None,
    max_staleness: float | None = None,
) -> set[int]:
    """``watches`` repeating data watches of WATCHED on ``client``: their ids (each
    server's own). For a session of the connection's own (``sid`` None: made here),
    else for ``sid``; with ``max_staleness``, armed as a standby arms them (issue 61:
    :mod:`bench.micro.standby_watch_fanout`)."""
    if sid is None:
        sid = (await client.call(CreateSession(NODE, KEY))).session_id
    fields: dict[str, Any] = {} if max_staleness is None else {"max_staleness": max_staleness}
    describe = DescribeSemaphore(sid, WATCHED, watch_data=True, watch_repeat=True)
    sent = [client.send(describe, **fields) for _ in range(watches)]
    ids = set()
    for request in sent:
        answer = await client.answer(request)
        assert isinstance(answer, Reply), answer
        assert isinstance(answer.value, DescribeResult), answer.value
        assert answer.value.watch_id is not None
        ids.add(answer.value.watch_id)
    return ids


async def read_pushes(
    client: WireClient, counts: dict[int, int], seen: list[float], limit: int
) -> None:
    """Count the watch firings read on ``client`` until its stream ends."""
    frames = FrameReader(limit)
    decode = FiredPushReader().decode
    read = client.reader.read
    while data := await read(1 << 20):
        frames.feed(data)
        while (body := frames.next_body()) is not None:
            message = decode(body)
            if type(message) is Push and type(message.effect) is WatchFired:
                wid = message.effect.watch_id
                counts[wid] = counts.get(wid, 0) + 1
        seen[0] = time.monotonic()


async def _child_main(
    port: int, shares: list[int], pipe: multiprocessing.connection.Connection
) -> None:
    clients = Clients()
    try:
        opened = [await clients.connect(port) for _ in shares]
        armed = await asyncio.gather(*(arm(c, n) for c, n in zip(opened, shares, strict=True)))
        ids = set().union(*armed)
        counts: dict[int, int] = {}
        seen = [0.0]
        readers = [asyncio.ensure_future(read_pushes(c, counts, seen, 1 << 24)) for c in opened]
        pipe.send(len(ids))
        loop = asyncio.get_running_loop()
        while True:  # one round per update: report once every watch fired, then quiet
            if await loop.run_in_executor(None, pipe.recv) == "stop":
                break
            counts.clear()
            deadline = time.monotonic() + PHASE_LIMIT
            # (Polled: the readers' dict is the only state, and a quiet spell is an
            # absence of events, which no event can announce.)
            while len(counts) < len(ids) and time.monotonic() < deadline:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            last = seen[0]
            while time.monotonic() - seen[0] < QUIET:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            fired = [counts.get(wid, 0) for wid in ids]
            pipe.send(
                {
                    "last": last,
                    "once": sum(1 for n in fired if n == 1),
                    "more": sum(1 for n in fired if n > 1),
                    "none": sum(1 for n in fired if n == 0),
                    "stray": sum(1 for wid in counts if wid not in ids),
                }
            )
        for reader in readers:
            reader.cancel()
    finally:
        await clients.close_all()


def _child(port: int, shares: list[int], pipe: multiprocessing.connection.Connection) -> None:
    """A client process: its connections, their watches, their firings counted."""
    asyncio.run(_child_main(port, shares, pipe))


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time so far, in seconds (/proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _probe(client: WireClient, sid: int, stop: asyncio.Event, took: list[float]) -> None:
    """Describe another semaphore, one request at a time, until ``stop``."""
    describe = DescribeSemaphore(sid, "probe")
    while not stop.is_set():
        started = time.monotonic()
        await client.call(describe)
        took.append(time.monotonic() - started)


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal positive whole shares (none empty)."""
    parts = max(1, min(parts, total))
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


async def _rounds(
    port: int, watchers: int, pipes: list[Any], repeats: int, server_pid: int
) -> list[dict[str, float]]:
    clients = Clients()
    try:
        updater = await clients.connect(port)
        sid = (await updater.call(CreateSession(NODE, KEY))).session_id
        probe = await clients.connect(port)
        probe_sid = (await probe.call(CreateSession(NODE, KEY))).session_id
        await probe.call(CreateSemaphore(probe_sid, "probe", 1))
        results = []
        for n in range(repeats):
            for pipe in pipes:
                pipe.send("go")
            await asyncio.sleep(0.2)  # (each child back in its wait for the firings)
            took: list[float] = []
            stop = asyncio.Event()
            prober = asyncio.ensure_future(_probe(probe, probe_sid, stop, took))
            await asyncio.sleep(0.05)
            cpu = cpu_seconds(server_pid)
            started = time.monotonic()
            await updater.call(UpdateSemaphore(sid, WATCHED, b"value %d" % n))
            answered = time.monotonic() - started
            loop = asyncio.get_running_loop()
            reports = [await loop.run_in_executor(None, pipe.recv) for pipe in pipes]
            stop.set()
            await prober
            last = max(r["last"] for r in reports)
            results.append(
                {
                    "watchers": watchers,
                    "answer_s": answered,
                    "last_told_s": last - started,
                    "told_once": sum(r["once"] for r in reports),
                    "told_twice_or_more": sum(r["more"] for r in reports),
                    "not_told": sum(r["none"] for r in reports),
                    "stray": sum(r["stray"] for r in reports),
                    "probe_p50_ms": statistics.median(took) * 1e3 if took else float("nan"),
                    "probe_max_ms": max(took) * 1e3 if took else float("nan"),
                    "probes": len(took),
                    # (includes the probe's describes and the quiet spell's idling)
                    "server_cpu_s": cpu_seconds(server_pid) - cpu,
                }
            )
        return results
    finally:
        await clients.close_all()


async def _setup(port: int, watchers: int, per_connection: int) -> None:
    clients = Clients()
    try:
        admin = await clients.connect(port)
        roomy = NodeConfig(max_sessions=100_000, max_watches_per_session=max(1_000, per_connection))
        await admin.call(CreateNode(NODE, roomy))
        sid = (await admin.call(CreateSession(NODE, KEY))).session_id
        await admin.call(CreateSemaphore(sid, WATCHED, 1, b"value"))
    finally:
        await clients.close_all()


def measure(
    watchers: int,
    connections: int,
    *,
    processes: int = 4,
    repeats: int = 1,
    server_flags: Sequence[str] = (),
) -> list[dict[str, float]]:
    """Measure one update reaching ``watchers`` repeating watches of one semaphore.

    A fresh ``tenure serve --fsync off`` (``server_flags`` added), ``connections``
    connections (one session each, the watches spread evenly) held by ``processes``
    client processes, then ``repeats`` updates, one after another, each waited for
    until every watch fired and a quiet spell passed. Returns one dict per update
    (the module docstring names its keys; times in seconds but the probe's, in ms).
    """
    connections = max(1, min(connections, watchers))
    per_connection = -(-watchers // connections)
    raise_nofile(2 * connections + 1_024)
    # (``--idle-timeout 0``: a watcher says nothing between changes, as a fleet's do.)
    flags = ["--fsync", "off", "--idle-timeout", "0", "--max-connections", str(connections + 16)]
    flags += ["--max-watches-per-semaphore", str(max(watchers, 1_000))]
    flags += ["--max-handshaking", str(max(64, connections))]
    flags += list(server_flags)
    context = multiprocessing.get_context("spawn")
    with (
        tempfile.TemporaryDirectory() as scratch,
        ServerProcess(Path(scratch) / "data", *flags) as server,
    ):
        asyncio.run(_setup(server.port, watchers, per_connection))
        shares = split_evenly(watchers, connections)
        groups = [shares[i::processes] for i in range(min(processes, len(shares)))]
        pipes, children = [], []
        try:
            for group in groups:
                mine, theirs = context.Pipe()
                child = context.Process(target=_child, args=(server.port, group, theirs))
                child.start()
                pipes.append(mine)
                children.append(child)
            armed = 0
            for pipe in pipes:
                if not pipe.poll(PHASE_LIMIT):
                    raise RuntimeError("a client process did not arm its watches")
                armed += pipe.recv()
            if armed != watchers:
                raise RuntimeError(f"{armed} watches armed, not {watchers}")
            results = asyncio.run(_rounds(server.port, watchers, pipes, repeats, server.proc.pid))
            for pipe in pipes:
                pipe.send("stop")
            return results
        finally:
            for child in children:
                child.join(timeout=30)
                if child.is_alive():
                    child.kill()
                    child.join()


def main() -> None:
    """Print one line per size: the medians of its updates, and the worst probe."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--watchers", type=int, nargs="+", default=[10_000, 100_000])
    args.add_argument("--connections", type=int, default=1_000)
    args.add_argument("--processes", type=int, default=4)
    args.add_argument("--repeats", type=int, default=3)
    o = args.parse_args()
    print(f"{o.connections} connections (one session each), {o.processes} client processes")
    head = ("watchers", "answer ms", "last told ms", "once", "twice+", "never", "probe p50/max ms")
    print(
        f"{head[0]:>8} {head[1]:>10} {head[2]:>13} {head[3]:>7} {head[4]:>6} {head[5]:>6} "
        f"{head[6]:>17} {'server cpu s':>12}"
    )
    for watchers in o.watchers:
        runs = measure(watchers, o.connections, processes=o.processes, repeats=o.repeats)
        for run in runs:
            print("   " + " ".join(f"{k}={v:.4g}" for k, v in run.items()), flush=True)

        def med(key: str, runs: list[dict[str, float]] = runs) -> float:
            return statistics.median(r[key] for r in runs)

        with contextlib.suppress(ValueError):
            print(
                f"{watchers:>8} {med('answer_s') * 1e3:>10.1f} {med('last_told_s') * 1e3:>13.1f} "
                f"{min(r['told_once'] for r in runs):>7.0f} "
                f"{max(r['told_twice_or_more'] for r in runs):>6.0f} "
                f"{max(r['not_told'] for r in runs):>6.0f} "
                f"{med('probe_p50_ms'):>8.2f}/{max(r['probe_max_ms'] for r in runs):<8.1f} "
                f"{med('server_cpu_s'):>12.3f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
