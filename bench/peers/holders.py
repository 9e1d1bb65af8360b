"""The clients of the resource workloads (hold, sessions, recovery), in worker processes.

:mod:`bench.peers.resources` spawns them (``python -m bench.peers.holders worker
...``, through :class:`bench.tools.workers.Worker`) and measures the server while
they hold still. A worker opens its clients, says ``ready``, waits for ``go``,
fills (holds its share of the N locks, or opens its share of the N idle
sessions), says ``filled``, and waits for ``end`` before it lets go. Each system
as its users would hold a lock:

* tenure: ``session.mutex(k).lock()`` from a few sessions on one client (or, for
  sessions, ``client.session(node)`` N times);
* redis: the keys redis-py's ``Lock`` writes (``SET k token NX PX``, a 32-byte
  token), pipelined on one connection;
* etcd: a Put of ``k/<lease id>`` with a lease, the key and server state of a held
  v3 lock (a lease per :data:`LOCKS_PER_LEASE` locks); for sessions, a lease each
  kept alive at a third of its TTL (Go's ``concurrency.NewSession``);
* dflockd: dflockd-client's ``acquire`` with a long lease over a few connections.

Every wait is bounded by ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from typing import Any

import psutil

import tenure
from bench.tools.workers import next_word, say

NODE = "bench-hold"
#: tenure sessions (hold, recovery) and etcd leases (hold) holding the locks.
HOLDERS = 4
#: Requests in flight per holder while filling.
BATCH = 500
#: etcd locks held per lease (per session) in hold (see EtcdHolder.fill).
LOCKS_PER_LEASE = 100
#: Leases far longer than any run: nothing expires while it is measured.
LONG_LEASE = 900
#: tenure sessions' recovery window in hold and recovery: a restart keeps them.
WINDOW = 600.0
SETTLE = 1.0  # seconds between the end of a fill and the RSS reading


def key(i: int) -> str:
    """The name of the i-th lock, the same for every system."""
    return f"bench-lock-{i}"


def own_rss() -> int:
    """This process's resident memory, in bytes."""
    return int(psutil.Process().memory_info().rss)


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


async def hear(expected: str) -> None:
    """Wait for the orchestrator's next word (EOF counts as "end")."""
    word = await next_word()
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


def main(argv: list[str] | None = None) -> int:
    """``worker``: one client process of hold, sessions or recovery (spawned, not by hand)."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.holders", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="a client process (spawned by bench.peers.resources)")
    w.add_argument("--workload", choices=("hold", "sessions", "recovery"), required=True)
    w.add_argument("--system", required=True)
    w.add_argument("--url", required=True)
    w.add_argument("--first", type=int, required=True)
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--total", type=int, required=True)
    w.add_argument("--timeout", type=float, required=True)
    args = parser.parse_args(argv)
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(work(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
