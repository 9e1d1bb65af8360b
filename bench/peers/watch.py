"""Watch fan-out: many watchers of one semaphore (one key), and how soon they all see a change.

:func:`run` is what the orchestrator (``python -m bench``) calls. Per system: W
watchers spread over a few worker processes (one connection each), then U updates
of the watched value, one every ``INTERVAL`` seconds, from the orchestrator's
process. Each update's value carries the monotonic time (system-wide on Linux, so
comparable across processes) just before the update was sent; each watcher notes
when it saw each value. Reported per system:

* ``p50_ms`` / ``p99_ms``: per update, the time until the **last** watcher saw it;
* ``watcher_p50_ms`` / ``watcher_p99_ms``: over every (watcher, update) pair.

A watcher that sees a later value first (watches coalesce) saw the earlier update
then. What "watch" is, per system:

* tenure: a session per watcher, ``session.semaphore(name).watch(data=True)``, and
  ``semaphore.update(data)`` (each watcher describes again when its watch fires,
  so it reads the new data);
* etcd: a watch per watcher on one key, multiplexed on a Watch stream per worker;
  the update is a Put (the event carries the value);
* redis: keyspace notifications (``notify-keyspace-events K$``), a pub/sub
  connection per watcher, then a GET of the value (as tenure reads it again).

dflockd has no watches; ``memory://`` has no server to fan out from: both skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import tenure
from bench.tools import systems
from bench.tools.results import Measure, median_measure
from bench.tools.workers import Worker

NODE = "bench-watch"
NAME = "bench-watched"
WATCH_SYSTEMS = ("tenure-always", "tenure-off", "etcd", "redis")
WATCHERS = 1_000
WORKERS = 4
#: Updates per repeat, and the pause between them (longer than a fan-out takes).
UPDATES = {True: 12, False: 50}
INTERVAL = 0.25
TIMEOUT = 120.0


def value(seq: int, sent: float) -> bytes:
    """The watched value of update ``seq``, sent at monotonic time ``sent``."""
    return f"{seq} {sent:.9f}".encode()


def seq_of(data: bytes) -> int:
    """The update number a value carries (0: the initial value)."""
    return int(data.split()[0]) if data else 0


# -- the worker side -----------------------------------------------------------------


class Seen:
    """What the watchers of one worker saw: (watcher, update, monotonic time)."""

    def __init__(self, watchers: int) -> None:
        self.rows: list[tuple[int, int, float]] = []
        self.started = 0
        self.ready = asyncio.Event()
        self.watchers = watchers

    def initial(self) -> None:
        """One more watcher has its first value."""
        self.started += 1
        if self.started == self.watchers:
            self.ready.set()

    def saw(self, watcher: int, data: bytes) -> None:
        """Watcher ``watcher`` sees ``data`` now."""
        seq = seq_of(data)
        if seq:
            self.rows.append((watcher, seq, time.monotonic()))


async def tenure_watchers(url: str, first: int, count: int, seen: Seen) -> None:
    """``count`` sessions on one client, each watching the semaphore's data."""
    async with tenure.connect(url) as client:
        sessions = await asyncio.gather(
            *(client.session(NODE, description=f"w{first + i}") for i in range(count))
        )

        async def watch(index: int, session: tenure.Session) -> None:
            started = False
            async for state in session.semaphore(NAME).watch(data=True):
                seen.saw(index, state.data)
                if not started:
                    started = True
                    seen.initial()

        await asyncio.gather(*(watch(first + i, s) for i, s in enumerate(sessions)))


async def etcd_watchers(url: str, first: int, count: int, seen: Seen) -> None:
    """``count`` watches of one key on one Watch stream."""
    import grpc
    from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

    async with grpc.aio.insecure_channel(url.removeprefix("http://")) as channel:
        call = rpc_pb2_grpc.WatchStub(channel).Watch()
        owner: dict[int, int] = {}  # etcd's watch id -> our watcher index
        for i in range(count):
            create = rpc_pb2.WatchCreateRequest(key=NAME.encode())
            await call.write(rpc_pb2.WatchRequest(create_request=create))
            # Watches are created in order: each answer names the id of the next one.
            reply = await call.read()
            owner[reply.watch_id] = first + i
            seen.initial()
        while True:
            reply = await call.read()
            for event in reply.events:
                seen.saw(owner[reply.watch_id], event.kv.value)


async def redis_watchers(url: str, first: int, count: int, seen: Seen) -> None:
    """``count`` pub/sub connections on the key's keyspace channel; each GETs the value."""
    import redis.asyncio

    # A connection per subscriber, and some for the GETs.
    client = redis.asyncio.Redis.from_url(url, max_connections=2 * count + 10)
    channel = f"__keyspace@0__:{NAME}"

    async def watch(index: int) -> None:
        pubsub = client.pubsub()
        await pubsub.subscribe(channel)
        await pubsub.get_message(timeout=10)  # the subscribe confirmation
        await client.get(NAME)  # the first value; also opens its pool connection now
        seen.initial()
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
            if message is not None:
                got = await client.get(NAME)
                seen.saw(index, got if isinstance(got, bytes) else b"")

    try:
        await asyncio.gather(*(watch(first + i) for i in range(count)))
    finally:
        await client.aclose()


async def work(args: argparse.Namespace) -> None:
    """The worker: start watching; "ready" once all have a value; "end" -> results."""
    seen = Seen(args.count)
    watchers = {"etcd": etcd_watchers, "redis": redis_watchers}.get(args.system, tenure_watchers)
    task = asyncio.create_task(watchers(args.url, args.first, args.count, seen))
    async with asyncio.timeout(args.timeout):
        done, _ = await asyncio.wait(
            [task, asyncio.create_task(seen.ready.wait())], return_when=asyncio.FIRST_COMPLETED
        )
    if task in done:
        task.result()  # it ended early: raise its error
    print(json.dumps({"event": "ready"}), flush=True)
    loop = asyncio.get_running_loop()
    await asyncio.wait_for(loop.run_in_executor(None, sys.stdin.readline), args.timeout)
    task.cancel()
    print(json.dumps({"event": "results", "rows": seen.rows}), flush=True)


# -- the orchestrator side ------------------------------------------------------------


async def prepare(server: systems.Server) -> None:
    """Create what is watched (tenure: node and semaphore; redis: notifications on)."""
    if server.system == "etcd":
        await update(server, 0)
    elif server.system == "redis":
        import redis.asyncio

        r = redis.asyncio.Redis.from_url(server.url)
        try:
            await r.config_set("notify-keyspace-events", "K$")
            await r.set(NAME, b"")
        finally:
            await r.aclose()
    else:
        async with tenure.connect(server.url) as client:
            await client.create_node(NODE, exist_ok=True, max_sessions=WATCHERS + 100)
            async with client.session(NODE) as session:
                await session.semaphore(NAME).create(limit=1, exist_ok=True)


async def update(server: systems.Server, count: int) -> dict[int, float]:
    """``count`` updates, INTERVAL apart; the send time of each (by update number)."""
    sent: dict[int, float] = {}
    if server.system.startswith("tenure-"):
        async with tenure.connect(server.url) as client, client.session(NODE) as session:
            semaphore = session.semaphore(NAME)
            for seq in range(1, count + 1):
                sent[seq] = time.monotonic()
                await semaphore.update(value(seq, sent[seq]))
                await asyncio.sleep(INTERVAL)
    elif server.system == "etcd":
        import grpc
        from aetcd.rpc import rpc_pb2, rpc_pb2_grpc

        async with grpc.aio.insecure_channel(server.url.removeprefix("http://")) as channel:
            kv = rpc_pb2_grpc.KVStub(channel)
            await kv.Put(rpc_pb2.PutRequest(key=NAME.encode(), value=b""))
            for seq in range(1, count + 1):
                sent[seq] = time.monotonic()
                await kv.Put(rpc_pb2.PutRequest(key=NAME.encode(), value=value(seq, sent[seq])))
                await asyncio.sleep(INTERVAL)
    else:
        import redis.asyncio

        r = redis.asyncio.Redis.from_url(server.url)
        try:
            for seq in range(1, count + 1):
                sent[seq] = time.monotonic()
                await r.set(NAME, value(seq, sent[seq]))
                await asyncio.sleep(INTERVAL)
        finally:
            await r.aclose()
    return sent


def latencies(
    rows: list[tuple[int, int, float]], sent: dict[int, float], watchers: int
) -> tuple[list[float], list[float], int]:
    """Per update the last watcher's latency, every watcher's, and how many never saw it.

    A watcher saw update k when it first saw update k or a later one.
    """
    by_watcher: dict[int, list[tuple[int, float]]] = {}
    for watcher, seq, at in rows:
        by_watcher.setdefault(watcher, []).append((seq, at))
    last = dict.fromkeys(sent, 0.0)
    every: list[float] = []
    missed = 0
    for w in range(watchers):
        views = sorted(by_watcher.get(w, []), key=lambda v: v[1])
        for k, at_send in sent.items():
            when = next((at for seq, at in views if seq >= k), None)
            if when is None:
                missed += 1
                continue
            every.append(when - at_send)
            last[k] = max(last[k], when - at_send)
    return list(last.values()), every, missed


def _ms(values: list[float], cut: int) -> float:
    if len(values) < 2:
        return values[0] * 1e3 if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[cut - 1] * 1e3


def once(system: str, quick: bool, workdir: Path) -> dict[str, float]:
    """One repeat on a fresh server."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    try:
        asyncio.run(prepare(server))
        for p in range(WORKERS):
            first, count = p * WATCHERS // WORKERS, WATCHERS // WORKERS
            argv = ["--system", system, "--url", server.url, "--first", str(first)]
            argv += ["--count", str(count), "--timeout", str(TIMEOUT)]
            log = workdir / f"watch-{system}-{server.port}-{p}.log"
            workers.append(Worker("bench.peers.watch", argv, log))
        for w in workers:
            w.expect("ready", TIMEOUT)
        sent = asyncio.run(update(server, UPDATES[quick]))
        time.sleep(1.0)  # the last fan-out
        rows: list[tuple[int, int, float]] = []
        for w in workers:
            w.send("end")
            rows += [(int(a), int(b), float(c)) for a, b, c in w.expect("results", 60)["rows"]]
        last, every, missed = latencies(rows, sent, WATCHERS)
        return {
            "p50_ms": _ms(last, 50),
            "p99_ms": _ms(last, 99),
            "watcher_p50_ms": _ms(every, 50),
            "watcher_p99_ms": _ms(every, 99),
            "missed": float(missed),
        }
    finally:
        for w in workers:
            w.kill()
        server.stop()


def run(systems_: Sequence[str], quick: bool, workdir: Path) -> list[Measure]:
    """Watch fan-out on each system that has watches: medians of 1 (quick) or 3 repeats."""
    workdir.mkdir(parents=True, exist_ok=True)
    measures: list[Measure] = []
    note = (
        f"{WATCHERS:,} watchers over {WORKERS} client processes, {UPDATES[quick]} updates "
        f"{INTERVAL:g} s apart; p50/p99: per update, until the last watcher saw it"
    )
    for system in systems_:
        if system not in WATCH_SYSTEMS:
            continue
        samples: dict[str, list[float]] = {}
        try:
            for _ in range(1 if quick else 3):
                for name, got in once(system, quick, workdir).items():
                    samples.setdefault(name, []).append(got)
        except Exception as exc:
            reason = f"{exc.__class__.__name__}: {exc}"
            measures.append(Measure("watch", system, "error", float("nan"), "", [], reason))
            continue
        for name, values in samples.items():
            unit = "ms" if name.endswith("_ms") else "pairs"
            measures.append(median_measure("watch", system, name, unit, values, note))
        brief = ", ".join(f"{k} {statistics.median(v):.3g}" for k, v in samples.items())
        print(f"watch {system}: {brief}", file=sys.stderr, flush=True)
    return measures


def main(argv: list[str] | None = None) -> int:
    """``worker`` (spawned by :func:`run`) or ``run`` (by hand)."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.watch", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="a process of watchers (spawned by run)")
    w.add_argument("--system", required=True)
    w.add_argument("--url", required=True)
    w.add_argument("--first", type=int, required=True)
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--timeout", type=float, required=True)
    r = sub.add_parser("run", help="run the workload and print its Measures")
    r.add_argument("--systems", default=",".join(WATCH_SYSTEMS))
    r.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "worker":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(work(args))
        return 0
    import tempfile

    from bench.tools.results import dumps

    with tempfile.TemporaryDirectory(prefix="tenure-watch-") as tmp:
        print(dumps(run(args.systems.split(","), args.quick, Path(tmp))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
