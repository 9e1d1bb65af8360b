"""The scale run's client processes: ``python -m bench.scale.load worker --kind K ...``.

:mod:`bench.scale.dimensions` spawns several of them per size (through
:class:`bench.tools.workers.Worker`), so that the clients are not what limits the
server, and measures the server while they hold still. Each worker connects, builds
its share of the load, says ``filled`` (a JSON line on stdout), and keeps it up until
the orchestrator's word ``end`` on stdin. Kinds:

* ``connections``: ``--count`` connections past their Hello, each pinging every
  ``--ping`` seconds (the client's own keepalive interval by default), the worker's
  pings spread evenly over time, as a fleet of idle clients' are;
* ``sessions``: ``--count`` sessions of node ``--node`` over ``--connections``
  connections (which ping);
* ``holds``: ``--connections`` sessions (one per connection) holding ``--count``
  distinct mutexes between them, acquired the way ``session.mutex(k).lock()`` asks;
* ``nodes``: ``--count`` nodes created;
* ``waiters``: a semaphore of limit 1 held by the worker's first session, and
  ``--count`` acquires queued behind it from ``--connections`` sessions (each asking
  with many hold numbers: separate owners in one queue). The word ``chain K`` then
  releases the holder and releases each grant as it arrives, ``K`` times: the
  worker says ``chained`` with the seconds it took.

Every wait is bounded by ``--timeout``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, Final

from bench.scale.wire import Conn, pipelined
from bench.tools.workers import next_word, say
from tenure._core import (
    MAX_COUNT,
    Acquire,
    CreateNode,
    CreateSemaphore,
    CreateSession,
    NodeConfig,
    Release,
)
from tenure._core.effects import Granted

KEY = b"scale-key"
#: Connections opened at once (the server's --max-handshaking must allow it).
OPEN_BATCH = 500
#: The task number a client's one asyncio task sends.
TASK = 1_000_001
#: Waiter acquires per session (hold numbers 1..): few sessions, one long queue.
HOLDS_PER_SESSION = 5_000
#: The semaphore the waiters queue on.
QUEUE = "queue"


def roomy(count: int) -> NodeConfig:
    """A node with room for ``count`` of everything (within the server's ceilings, a
    million each), whose sessions outlive a slow run."""
    room = min(max(count + 1_000, 10_000), 1_000_000)
    return NodeConfig(
        recovery_window=3_600.0,
        max_sessions=room,
        max_semaphores=room,
        max_waiters=room,
    )


class Pinger:
    """Keeps connections pinging, each once every ``interval`` s, from the moment it is
    added (a connection opened early must not sit idle while the rest open: the server
    closes a connection silent for its idle timeout).

    One task per worker sends them, a share every :data:`TICK` (so each connection's
    pings are ``interval`` apart, and the worker's are spread evenly over time), and
    each Pong is counted as it comes: a task and a timer per connection and per ping
    would cost the worker more CPU than the server spends answering, on cores the
    server and the probe share."""

    #: Seconds between two of the worker's sends.
    TICK: Final = 0.01

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self.conns: list[Conn] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, conns: list[Conn]) -> None:
        """Start pinging ``conns`` (no-op without an interval)."""
        if self.interval <= 0:
            return
        self.conns += conns
        if self._task is None:
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        turn = 0
        owed = 0.0
        while True:
            await asyncio.sleep(self.TICK)
            owed += len(self.conns) * self.TICK / self.interval
            for _ in range(int(owed)):
                conn = self.conns[turn % len(self.conns)]
                turn += 1
                if conn.is_open():
                    conn.ping_nowait()
            owed -= int(owed)

    @property
    def pongs(self) -> int:
        """Pongs counted so far."""
        return sum(conn.pongs for conn in self.conns)

    @property
    def failed(self) -> int:
        """Connections lost, or with more than one ping unanswered (one may be in flight)."""
        return sum(not conn.is_open() or conn.unanswered > 1 for conn in self.conns)

    def stop(self) -> None:
        """Stop pinging."""
        if self._task is not None:
            self._task.cancel()


async def open_many(port: int, count: int, pinger: Pinger) -> list[Conn]:
    """``count`` connections, opened :data:`OPEN_BATCH` at a time, each pinging at once."""
    conns: list[Conn] = []
    for start in range(0, count, OPEN_BATCH):
        batch = min(OPEN_BATCH, count - start)
        opened = await asyncio.gather(*(Conn.open(port) for _ in range(batch)))
        pinger.add(opened)
        conns += opened
    return conns


async def sessions_on(conns: list[Conn], node: str, count: int) -> list[tuple[Conn, int]]:
    """``count`` sessions of ``node``, spread over ``conns``; (connection, session id)."""
    share, extra = divmod(count, len(conns))
    opened: list[tuple[Conn, int]] = []

    async def fill(conn: Conn, n: int) -> None:
        infos = await pipelined(conn, [CreateSession(node, KEY) for _ in range(n)])
        opened.extend((conn, int(info.session_id)) for info in infos)

    await asyncio.gather(*(fill(c, share + (i < extra)) for i, c in enumerate(conns)))
    return opened


def _lock(session: int, name: str, request_id: int) -> Acquire:
    """What ``session.mutex(name).lock()`` asks (an ephemeral mutex)."""
    return Acquire(session, name, MAX_COUNT, request_id, b"", None, True, hold=0, task=TASK)


class Waiters:
    """The queue of the ``waiters`` kind and the chain of grants through it."""

    def __init__(self) -> None:
        self.conns: dict[int, Conn] = {}  # session id -> its connection
        self.holder: tuple[int, int] = (0, 0)  # (session, hold) holding the semaphore
        self.left = 0
        self.chained: asyncio.Future[float] | None = None
        self.started = 0.0

    def on_push(self, effect: Any) -> None:
        """A grant is released at once while the chain runs (else kept)."""
        if not isinstance(effect, Granted) or self.chained is None or self.left <= 0:
            return
        self.left -= 1
        if self.left == 0:
            if not self.chained.done():
                self.chained.set_result(time.perf_counter() - self.started)
            return
        self.conns[effect.session_id].send(Release(effect.session_id, QUEUE, effect.hold))

    async def fill(self, port: int, node: str, count: int, sessions: int) -> None:
        conns = [await Conn.open(port, self.on_push) for _ in range(sessions)]
        first = conns[0]
        sids = [int((await c.call(CreateSession(node, KEY))).session_id) for c in conns]
        self.conns = dict(zip(sids, conns, strict=True))
        await first.call(CreateSemaphore(sids[0], QUEUE, 1))
        self.holder = (sids[0], 0)
        await first.call(Acquire(sids[0], QUEUE, 1, 1, b"", 0.0))
        per_session, extra = divmod(count, sessions)

        async def queue(index: int, conn: Conn, sid: int) -> None:
            n = per_session + (index < extra)
            asks = [Acquire(sid, QUEUE, 1, h, b"", None, hold=h) for h in range(1, n + 1)]
            for start in range(0, n, 2_000):  # queued: answered WAITING, not granted
                await asyncio.gather(*(conn.send(a) for a in asks[start : start + 2_000]))

        await asyncio.gather(
            *(queue(i, c, s) for i, (c, s) in enumerate(zip(conns, sids, strict=True)))
        )

    async def chain(self, grants: int) -> float:
        """Release the holder, then each grant as it comes, ``grants`` times: seconds."""
        self.chained = asyncio.get_running_loop().create_future()
        self.left = grants
        self.started = time.perf_counter()
        sid, hold = self.holder
        self.conns[sid].send(Release(sid, QUEUE, hold))
        return await self.chained


async def work(args: argparse.Namespace) -> None:
    """Build the load, say ``filled``, keep it until ``end``."""
    pinger = Pinger(args.ping)
    conns: list[Conn] = []
    waiters = Waiters()
    started = time.perf_counter()
    async with asyncio.timeout(args.timeout):
        if args.kind == "connections":
            conns = await open_many(args.port, args.count, pinger)
        elif args.kind == "sessions":
            conns = await open_many(args.port, args.connections, pinger)
            await sessions_on(conns, args.node, args.count)
        elif args.kind == "holds":
            conns = await open_many(args.port, args.connections, pinger)
            sessions = await sessions_on(conns, args.node, len(conns))
            share, extra = divmod(args.count, len(sessions))

            async def hold(index: int, conn: Conn, sid: int) -> None:
                n = share + (index < extra)
                names = (f"h{args.index}-{index}-{i}" for i in range(n))
                await pipelined(conn, [_lock(sid, name, i) for i, name in enumerate(names)])

            await asyncio.gather(*(hold(i, c, s) for i, (c, s) in enumerate(sessions)))
        elif args.kind == "nodes":
            conns = await open_many(args.port, 1, pinger)
            names = (f"n{args.index}-{i:07d}" for i in range(args.count))
            await pipelined(conns[0], [CreateNode(name) for name in names])
        elif args.kind == "waiters":
            await waiters.fill(args.port, args.node, args.count, args.connections)
            conns = list(waiters.conns.values())
            pinger.add(conns)
    seconds = time.perf_counter() - started
    say(event="filled", count=args.count, seconds=seconds, connections=len(conns))
    while (word := await next_word()) != "end":
        if word.startswith("chain "):
            async with asyncio.timeout(args.timeout):
                took = await waiters.chain(int(word.split()[1]))
            say(event="chained", seconds=took)
        else:
            raise RuntimeError(f"unknown word {word!r}")
    alive = sum(c.is_open() for c in conns)
    say(event="ended", pongs=pinger.pongs, failed=pinger.failed, alive=alive)
    pinger.stop()
    for conn in conns:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    """``worker``: one client process of a scale dimension (spawned by the run)."""
    parser = argparse.ArgumentParser(prog="python -m bench.scale.load", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="a client process (spawned by bench.scale)")
    w.add_argument(
        "--kind", choices=("connections", "sessions", "holds", "nodes", "waiters"), required=True
    )
    w.add_argument("--port", type=int, required=True)
    w.add_argument("--count", type=int, required=True)
    w.add_argument("--connections", type=int, default=1)
    w.add_argument("--node", default="scale")
    w.add_argument("--index", type=int, default=0)
    w.add_argument("--ping", type=float, default=0.0, help="seconds between pings; 0: none")
    w.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args(argv)
    import resource

    import uvloop

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(work(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
