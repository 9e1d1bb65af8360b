"""The resource workloads: memory per held lock, many idle sessions, restart time.

:func:`run` is what the orchestrator (``python -m bench``) calls, once per workload:

* **hold**: server RSS idle, then with N mutexes held at once (few connections and
  sessions holding many locks each): bytes per held lock = (held - idle) / N.
  tenure holds ``session.mutex(k).lock()``; redis the keys redis-py's ``Lock``
  writes (``SET k token NX PX``, a 32-byte token); etcd a Put with a lease of
  ``k/<lease id>``, the key and server state of a held v3 lock (a lease per 100
  locks: etcd slows down quadratically with the keys on one lease); dflockd
  dflockd-client's ``acquire`` with a long lease. tenure-memory has no server: the
  RSS growth of the client process, which then holds the engine too.
* **sessions**: N concurrent idle sessions over a few connections: server RSS, and
  the server's CPU (% of one core, psutil CPU-time deltas) over a quiet window.
  etcd's analogue is a lease per session with a keepalive stream (Go's
  ``concurrency.NewSession``: a keepalive per lease every TTL/3).
* **recovery**: N held locks, then SIGTERM (and, separately, SIGKILL) and a
  restart on the same data directory: seconds from spawn to the ``listening`` log
  line and to the first successful request (which must see all N locks).

Clients never run in the orchestrator's process for hold and sessions: each is a
worker, ``python -m bench.resources worker ...``, that reports JSON lines on stdout
and waits for the orchestrator's word on stdin between steps (so the server is
measured while the worker holds still). Every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil

import tenure
from bench import systems
from bench.results import Measure, median_measure
from tenure.errors import UnavailableError

REPO = Path(__file__).resolve().parent.parent
NODE = "bench-hold"
#: Sizes of the issue (full) and of quick mode.
FULL = {"hold": (10_000, 100_000), "sessions": (100_000,), "recovery": (100_000,)}
QUICK = {"hold": (10_000,), "sessions": (10_000,), "recovery": (10_000,)}
#: tenure sessions (hold, recovery) and etcd leases (hold) holding the locks.
HOLDERS = 4
#: Worker processes (one client, one connection each) of the sessions workload.
SESSION_WORKERS = 4
#: Requests in flight per holder while filling.
BATCH = 500
#: etcd locks held per lease (per session) in hold (see EtcdHolder.fill).
LOCKS_PER_LEASE = 100
#: Leases far longer than any run: nothing expires while it is measured.
LONG_LEASE = 900
#: tenure sessions' recovery window in hold and recovery: a restart keeps them.
WINDOW = 600.0
#: The quiet window over which the sessions workload reads the server's CPU.
CPU_WINDOW = {True: 3.0, False: 20.0}
SETTLE = 1.0  # seconds between the end of a fill and the RSS reading


def key(i: int) -> str:
    """The name of the i-th lock, the same for every system."""
    return f"bench-lock-{i}"


def own_rss() -> int:
    """This process's resident memory, in bytes."""
    return int(psutil.Process().memory_info().rss)


# -- the worker side -----------------------------------------------------------------


class Holder:
    """One worker's clients: open, fill (hold locks or sessions), close."""

    async def open(self) -> None:
        """Connect (and whatever the empty state needs)."""

    async def fill(self, indexes: range) -> int:
        """Hold a lock (or a session) for each index; return how many."""
        raise NotImplementedError

    async def close(self) -> None:
        """Let go of everything (bounded by the caller)."""


class TenureHolder(Holder):
    """tenure: a few sessions on one client, each holding many mutexes (or sessions)."""

    def __init__(self, url: str, n: int, what: str) -> None:
        self.url, self.n, self.what = url, n, what
        self.client: tenure.Client | None = None
        self.sessions: list[tenure.Session] = []
        self.held: list[object] = []

    async def open(self) -> None:
        self.client = await tenure.connect(self.url)
        room = self.n + 1_000
        await self.client.create_node(NODE, exist_ok=True, max_semaphores=room, max_sessions=room)
        if self.what == "locks":
            for _ in range(HOLDERS):
                self.sessions.append(await self.client.session(NODE, recovery_window=WINDOW))

    async def fill(self, indexes: range) -> int:
        assert self.client is not None
        client = self.client
        for start in range(0, len(indexes), BATCH):
            part = indexes[start : start + BATCH]
            if self.what == "sessions":
                self.held += await asyncio.gather(*(client.session(NODE) for _ in part))
            else:
                self.held += await asyncio.gather(
                    *(self.sessions[i % HOLDERS].mutex(key(i)).lock() for i in part)
                )
        return len(self.held)

    async def close(self) -> None:
        if self.client is not None:
            await self.client.aclose()


class RedisHolder(Holder):
    """redis: the keys redis-py's Lock writes, pipelined on one connection."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.redis: Any = None

    async def open(self) -> None:
        import redis.asyncio

        self.redis = redis.asyncio.Redis.from_url(self.url)
        await self.redis.ping()

    async def fill(self, indexes: range) -> int:
        done = 0
        for start in range(0, len(indexes), BATCH):
            pipe = self.redis.pipeline(transaction=False)
            for i in indexes[start : start + BATCH]:
                # What Lock.acquire sends: its token is a uuid1 hex (32 bytes).
                pipe.set(key(i), uuid.uuid1().hex.encode(), nx=True, px=LONG_LEASE * 1000)
            done += sum(1 for ok in await pipe.execute() if ok)
        return done

    async def close(self) -> None:
        if self.redis is not None:
            await self.redis.aclose()


class EtcdHolder(Holder):
    """etcd over gRPC: leases (with keepalive), and lock keys put with a lease."""

    def __init__(self, url: str, ttl: int = LONG_LEASE) -> None:
        self.target = url.removeprefix("http://")
        self.ttl = ttl
        self.channel: Any = None
        self.leases: list[int] = []
        self._keepalive: asyncio.Task[None] | None = None

    async def open(self) -> None:
        import grpc
        from aetcd.rpc import rpc_pb2_grpc

        self.channel = grpc.aio.insecure_channel(self.target)
        self.kv = rpc_pb2_grpc.KVStub(self.channel)
        self.lease = rpc_pb2_grpc.LeaseStub(self.channel)

    async def grant(self) -> int:
        """A new lease of ``ttl`` seconds."""
        from aetcd.rpc import rpc_pb2

        reply = await self.lease.LeaseGrant(rpc_pb2.LeaseGrantRequest(TTL=self.ttl), timeout=30)
        return int(reply.ID)

    async def fill(self, indexes: range) -> int:
        """Hold locks: ``k/<lease>`` put with a lease (a held v3 lock's key and state).

        A lease per LOCKS_PER_LEASE locks: etcd slows down with the keys attached to
        one lease (25,000 keys on one took minutes), so its sessions hold fewer each.
        """
        from aetcd.rpc import rpc_pb2

        blocks = -(-len(indexes) // LOCKS_PER_LEASE)
        for start in range(0, blocks, BATCH):
            wanted = range(start, min(blocks, start + BATCH))
            self.leases += await asyncio.gather(*(self.grant() for _ in wanted))

        async def put(at: int) -> None:
            lease = self.leases[at // LOCKS_PER_LEASE]
            lock = f"{key(indexes[at])}/{lease:x}".encode()
            await self.kv.Put(rpc_pb2.PutRequest(key=lock, lease=lease), timeout=30)

        for start in range(0, len(indexes), BATCH):
            await asyncio.gather(
                *(put(at) for at in range(start, min(len(indexes), start + BATCH)))
            )
        return len(indexes)

    async def fill_sessions(self, indexes: range) -> int:
        """Idle sessions: a lease each, kept alive at a third of its TTL."""
        for start in range(0, len(indexes), BATCH):
            part = indexes[start : start + BATCH]
            self.leases += await asyncio.gather(*(self.grant() for _ in part))
        self._keepalive = asyncio.create_task(self._keep_alive())
        return len(self.leases)

    async def _keep_alive(self) -> None:
        """One stream; every lease renewed once per TTL/3, spread evenly over it."""
        from aetcd.rpc import rpc_pb2

        call = self.lease.LeaseKeepAlive()
        period = self.ttl / 3
        chunk = 100

        async def drain() -> None:
            while True:
                await call.read()

        reader = asyncio.create_task(drain())
        try:
            while True:
                started = time.monotonic()
                for at in range(0, len(self.leases), chunk):
                    for lease in self.leases[at : at + chunk]:
                        await call.write(rpc_pb2.LeaseKeepAliveRequest(ID=lease))
                    pause = started + period * (at + chunk) / len(self.leases) - time.monotonic()
                    await asyncio.sleep(max(0.0, pause))
        finally:
            reader.cancel()
            call.cancel()

    async def close(self) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._keepalive
        if self.channel is not None:
            await self.channel.close()


class DflockdHolder(Holder):
    """dflockd: a few connections, each acquiring its share of keys in turn."""

    CONNECTIONS = 8

    def __init__(self, url: str) -> None:
        self.host, port = url.rsplit(":", 1)
        self.port = int(port)
        self.conns: list[Any] = []

    async def open(self) -> None:
        from dflockd_client import _async

        for _ in range(self.CONNECTIONS):
            conn = await _async.open_conn(
                self.host, self.port, ssl_context=None, connect_timeout_s=10
            )
            self.conns.append(conn)

    async def fill(self, indexes: range) -> int:
        from dflockd_client import _async

        async def one_connection(c: int) -> int:
            # The protocol answers one request at a time per connection.
            for i in indexes[c :: len(self.conns)]:
                await _async.acquire(self.conns[c], key(i), 10, LONG_LEASE)
            return len(indexes[c :: len(self.conns)])

        return sum(await asyncio.gather(*(one_connection(c) for c in range(len(self.conns)))))

    async def close(self) -> None:
        for conn in self.conns:
            with contextlib.suppress(Exception):
                await conn.close()


def holder(system: str, url: str, n: int, what: str) -> Holder:
    """The holder of ``system``: of locks, or (``what="sessions"``) of idle sessions."""
    if system.startswith("tenure-"):
        return TenureHolder("memory://bench" if url == "memory://" else url, n, what)
    if system == "redis":
        return RedisHolder(url)
    if system == "etcd":
        return EtcdHolder(url, ttl=60 if what == "sessions" else LONG_LEASE)
    if system == "dflockd":
        return DflockdHolder(url)
    raise ValueError(f"no holder for {system!r}")


def say(**event: object) -> None:
    """One JSON line to the orchestrator."""
    print(json.dumps(event), flush=True)


async def hear(expected: str) -> None:
    """Wait for the orchestrator's next word (EOF counts as "end")."""
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    word = line.strip() or "end"
    if word != expected and word != "end":
        raise RuntimeError(f"expected {expected!r} from the orchestrator, got {word!r}")


async def work(args: argparse.Namespace) -> None:
    """The worker: open, ready; go -> fill, filled; end -> close."""
    indexes = range(args.first, args.first + args.count)
    what = "sessions" if args.workload == "sessions" else "locks"
    h = holder(args.system, args.url, args.total, what)
    async with asyncio.timeout(args.timeout):
        await h.open()
    say(event="ready", rss=own_rss())
    await hear("go")
    started = time.perf_counter()
    async with asyncio.timeout(args.timeout):
        if isinstance(h, EtcdHolder) and what == "sessions":
            count = await h.fill_sessions(indexes)
        else:
            count = await h.fill(indexes)
    seconds = time.perf_counter() - started
    await asyncio.sleep(SETTLE)
    say(event="filled", count=count, seconds=seconds, rss=own_rss())
    await hear("end")
    with contextlib.suppress(Exception):  # the server may be gone already: no matter
        async with asyncio.timeout(30):
            await h.close()


# -- the orchestrator side ------------------------------------------------------------


class Worker:
    """A worker process, its JSON lines read by a thread (so every wait is bounded)."""

    def __init__(self, argv: list[str], log: Path, module: str = "bench.resources") -> None:
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, "worker", *argv],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.log_path = log
        self._lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self._lines.put(line)
        self._lines.put("")  # EOF

    def expect(self, event: str, timeout: float) -> dict[str, Any]:
        """The worker's next event, which must be ``event``, within ``timeout`` seconds."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"worker: no {event!r} within {timeout:g}s") from None
        if not line:
            tail = self.log_path.read_text(errors="replace").strip().splitlines()
            raise RuntimeError(f"worker exited before {event!r}: {tail[-1] if tail else '?'}")
        data: dict[str, Any] = json.loads(line)
        if data.get("event") != event:
            raise RuntimeError(f"worker: expected {event!r}, got {data}")
        return data

    def send(self, word: str) -> None:
        """A word on the worker's stdin (ignored if it has exited)."""
        assert self.proc.stdin is not None
        with contextlib.suppress(OSError):
            self.proc.stdin.write(word + "\n")
            self.proc.stdin.flush()

    def finish(self, timeout: float = 40.0) -> None:
        """Tell it to end, wait (bounded), kill it if it does not."""
        self.send("end")
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close()

    def kill(self) -> None:
        """SIGKILL this worker (by its own pid) and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self._close()

    def _close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()


@dataclass
class Fill:
    """What one worker reported when filled: how many, in how long, its own RSS."""

    count: int
    seconds: float
    rss: int


def step_timeout(n: int) -> float:
    """A generous bound for filling ``n`` (slow peers included), in seconds."""
    return 60.0 + n / 500


def spawn_workers(
    workload: str, server: systems.Server, n: int, parts: int, workdir: Path
) -> tuple[list[Worker], list[int]]:
    """``parts`` workers sharing ``n`` locks (or sessions), all ready; and their RSS then."""
    workers: list[Worker] = []
    try:
        for p in range(parts):
            first, count = p * n // parts, (p + 1) * n // parts - p * n // parts
            argv = ["--workload", workload, "--system", server.system, "--url", server.url]
            argv += ["--first", str(first), "--count", str(count), "--total", str(n)]
            argv += ["--timeout", str(step_timeout(n))]
            log = workdir / f"worker-{workload}-{server.port}-{p}.log"
            workers.append(Worker(argv, log))
        rss = [int(w.expect("ready", 90)["rss"]) for w in workers]
    except BaseException:
        for w in workers:
            w.kill()
        raise
    return workers, rss


def fill(workers: list[Worker], n: int) -> list[Fill]:
    """Tell every worker to go; wait until all are filled."""
    for w in workers:
        w.send("go")
    fills = []
    for w in workers:
        data = w.expect("filled", step_timeout(n) + 30)
        fills.append(Fill(int(data["count"]), float(data["seconds"]), int(data["rss"])))
    got = sum(f.count for f in fills)
    if got != n:
        raise RuntimeError(f"only {got} of {n} held")
    return fills


def label(n: int) -> str:
    """10000 -> "10k"."""
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def hold_once(system: str, n: int, workdir: Path) -> dict[str, float]:
    """One repeat of hold on a fresh server: idle and held RSS (MB), bytes per lock."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    try:
        workers, ready_rss = spawn_workers("hold", server, n, 1, workdir)
        time.sleep(SETTLE)
        idle = server.rss_bytes()
        started = time.perf_counter()
        fills = fill(workers, n)
        seconds = time.perf_counter() - started
        held = server.rss_bytes()
        if server.pid is None:  # tenure-memory: the worker is the server
            idle, held = ready_rss[0], fills[0].rss
        return {
            "bytes_per_lock": (held - idle) / n,
            "rss_idle_mb": idle / 1e6,
            "rss_held_mb": held / 1e6,
            "fill_per_s": n / seconds,
        }
    finally:
        for w in workers:
            w.kill()  # what it holds goes with the server
        server.stop()


def sessions_once(system: str, n: int, workdir: Path, window: float) -> dict[str, float]:
    """One repeat of sessions: RSS with ``n`` idle sessions, and CPU over ``window`` s."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    try:
        workers, _ = spawn_workers("sessions", server, n, SESSION_WORKERS, workdir)
        time.sleep(SETTLE)
        idle = server.rss_bytes()
        started = time.perf_counter()
        fill(workers, n)
        seconds = time.perf_counter() - started
        held = server.rss_bytes()
        cpu0, t0 = server.cpu_seconds(), time.monotonic()
        time.sleep(window)
        cpu1, t1 = server.cpu_seconds(), time.monotonic()
        alive = server.proc is None or server.proc.poll() is None
        if not alive:
            raise RuntimeError(f"the server died: {server.log()[-500:]}")
        return {
            "rss_mb": held / 1e6,
            "bytes_per_session": (held - idle) / n,
            "keepalive_cpu_pct": 100 * (cpu1 - cpu0) / (t1 - t0),
            "open_per_s": n / seconds,
        }
    finally:
        for w in workers:
            w.finish()
        server.stop()


async def _probe(url: str, deadline: float) -> int:
    """Retry until one request succeeds; the number of semaphores it saw."""
    while True:
        try:
            async with tenure.connect(url) as client:
                return (await client.describe_node(NODE)).semaphores
        except UnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.002)


def restart(system: str, workdir: Path, data_dir: Path) -> tuple[systems.Server, float, float, int]:
    """Start ``system`` on ``data_dir``: the server, seconds to listening and to an answer.

    Spawned here rather than with systems.start (same command line) to time it to the
    millisecond: the log is polled every 2 ms, then a request is retried until it works.
    """
    port = systems.free_port()
    argv, url = systems._command(system, port, data_dir)
    log_path = workdir / f"{system}-restart-{port}.log"
    with log_path.open("wb") as log:
        started = time.monotonic()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir
        )
    server = systems.Server(system, systems.HOST, port, data_dir, url, proc.pid, log_path, proc)
    try:
        deadline = started + systems.START_TIMEOUT
        while '"msg": "listening"' not in server.log():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{system} did not restart: {server.log()[-1000:]}")
            time.sleep(0.002)
        listening = time.monotonic() - started
        semaphores = asyncio.run(_probe(url, deadline))
        first = time.monotonic() - started
    except BaseException:
        server.kill()
        raise
    return server, listening, first, semaphores


def recovery_once(system: str, n: int, workdir: Path, how: str) -> dict[str, float]:
    """``n`` held locks; stop the server (``how``: "term" or "kill"); time the restart."""
    server = systems.start(system, workdir)
    workers: list[Worker] = []
    again: systems.Server | None = None
    try:
        workers, _ = spawn_workers("recovery", server, n, 1, workdir)
        fill(workers, n)
        for w in workers:
            w.kill()  # its connection drops: the sessions are detached, nothing released
        time.sleep(0.2)  # the server has logged the detaches
        started = time.monotonic()
        if how == "term":
            server.stop()
        else:
            server.kill()
        stopped = time.monotonic() - started
        again, listening, first, seen = restart(system, workdir, server.data_dir)
        if seen != n:
            raise RuntimeError(f"the restarted server has {seen} of the {n} locks")
        out = {f"restart_{how}_s": first, f"listening_{how}_s": listening}
        if how == "term":
            out["stop_s"] = stopped
        return out
    finally:
        for w in workers:
            w.kill()
        server.kill()
        if again is not None:
            again.stop()


RESOURCE_SYSTEMS = {
    "hold": ("tenure-always", "tenure-off", "tenure-memory", "redis", "etcd", "dflockd"),
    "sessions": ("tenure-always", "tenure-off", "etcd"),
    "recovery": ("tenure-always", "tenure-off"),
}


def _note(workload: str, system: str, n: int, quick: bool) -> str:
    size = f"N = {n:,}" + (" (quick mode; the issue's size is 100,000)" if quick else "")
    if workload == "hold":
        how = {
            "tenure-memory": "RSS of the client process, which holds the engine itself",
            "redis": "SET NX PX of redis-py's Lock (32-byte token)",
            "etcd": f"Put of k/<lease>, a lease per {LOCKS_PER_LEASE} locks (a held v3 lock's"
            " state; etcd slows down with many keys on one lease)",
            "dflockd": f"dflockd-client acquire over {DflockdHolder.CONNECTIONS} connections",
        }.get(system, f"session.mutex(k).lock() from {HOLDERS} sessions on one connection")
        return f"{size}; {how}"
    if workload == "sessions":
        how = (
            "a 60 s lease each, one keepalive per lease every 20 s on a stream per worker"
            if system == "etcd"
            else "tenure sessions (default 30 s recovery window); keepalive is per connection"
        )
        return f"{size} over {SESSION_WORKERS} client processes (one connection each); {how}"
    return f"{size} held locks ({HOLDERS} sessions); restart = spawn to first answered request"


def run(workload: str, systems_: Sequence[str], quick: bool, workdir: Path) -> list[Measure]:
    """The workload on each applicable system: medians of 1 (quick) or 3 (full) repeats."""
    if workload not in RESOURCE_SYSTEMS:
        raise ValueError(f"unknown resource workload {workload!r}")
    workdir.mkdir(parents=True, exist_ok=True)
    repeats = 1 if quick else 3
    sizes = (QUICK if quick else FULL)[workload]
    measures: list[Measure] = []
    for system in systems_:
        if system not in RESOURCE_SYSTEMS[workload]:
            continue
        for n in sizes:
            samples: dict[str, list[float]] = {}
            try:
                for _ in range(repeats):
                    for name, value in _once(workload, system, n, quick, workdir).items():
                        samples.setdefault(name, []).append(value)
            except Exception as exc:
                reason = f"{exc.__class__.__name__}: {exc}"
                measures.append(Measure(workload, system, "error", float("nan"), "", [], reason))
                continue
            # The largest size carries the target's metric names; smaller ones a suffix.
            suffix = "" if n == max(sizes) else f"_{label(n)}"
            for name, values in samples.items():
                unit = _unit(name)
                metric = name + suffix
                note = _note(workload, system, n, quick)
                measures.append(median_measure(workload, system, metric, unit, values, note))
            print(f"{workload} {system} N={n}: {_brief(samples)}", file=sys.stderr, flush=True)
    return measures


def _once(workload: str, system: str, n: int, quick: bool, workdir: Path) -> dict[str, float]:
    if workload == "hold":
        return hold_once(system, n, workdir)
    if workload == "sessions":
        return sessions_once(system, n, workdir, CPU_WINDOW[quick])
    out = {**recovery_once(system, n, workdir, "term"), **recovery_once(system, n, workdir, "kill")}
    # The target's number: the slower of the two (a crash may replay more of the log).
    return {"restart_s": max(out["restart_term_s"], out["restart_kill_s"]), **out}


def _unit(name: str) -> str:
    """The unit of a metric, from the end of its name."""
    for end, unit in (("_per_s", "/s"), ("_s", "s"), ("_mb", "MB"), ("_pct", "% of a core")):
        if name.endswith(end):
            return unit
    return "B"


def _brief(samples: dict[str, list[float]]) -> str:
    return ", ".join(f"{k} {sorted(v)[len(v) // 2]:,.3g}" for k, v in samples.items())


def main(argv: list[str] | None = None) -> int:
    """``worker`` (spawned by :func:`run`) or ``run`` (the workloads by hand)."""
    parser = argparse.ArgumentParser(prog="python -m bench.resources", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="a client process (spawned by run)")
    w.add_argument("--workload", choices=sorted(RESOURCE_SYSTEMS), required=True)
    w.add_argument("--system", required=True)
    w.add_argument("--url", required=True)
    w.add_argument("--first", type=int, required=True)
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--total", type=int, required=True)
    w.add_argument("--timeout", type=float, required=True)
    r = sub.add_parser("run", help="run workloads and print their Measures")
    r.add_argument("workloads", help="comma-separated: hold,sessions,recovery")
    r.add_argument("--systems", default=",".join(systems.SYSTEMS))
    r.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "worker":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(work(args))
        return 0
    import tempfile

    from bench.results import dumps

    with tempfile.TemporaryDirectory(prefix="tenure-resources-") as tmp:
        out: list[Measure] = []
        for workload in args.workloads.split(","):
            out += run(workload, args.systems.split(","), args.quick, Path(tmp) / workload)
    print(dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
