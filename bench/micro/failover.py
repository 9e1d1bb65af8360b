"""How long a ``tenure serve --cluster`` failover takes, as its clients see it.

``python -m bench.micro.failover`` starts one etcd member and three ``tenure serve
--cluster`` members over it (the tests' harness, :class:`tests.cluster.harness.TenureCluster`:
loopback, free ports, ``--cluster-lease-ttl`` of ``--ttl``), connects ``--clients``
clients to all three doors, each with a session, and then injects ``--faults``
faults one at a time, each bounded by :data:`FAULT_WAIT`:

* ``kill`` (the default): ``kill -9`` of the leader. Timed from the kill to the first
  grant any client gets afterwards: each client asks for a lock of its own at once
  (the request waits for the client's next connection) and again after any
  connection lost under it. The dead member is started again on its data once a
  standby leads, and the next fault waits until it follows as a standby.
* ``stop``: SIGSTOP of the leader, resumed once a standby leads and a client got
  a grant (or the bound passed). Timed from the election (the successor's log:
  ``cluster_leading``) to the first grant: how long the clients stay on a paused
  leader after another leads. Each client pings every quarter of its session's
  window (``--window``, 8 s by default as in the fault suite: a ping every 2 s).

With ``--holds N``, the leader holds N mutexes before the first fault (one session
of a node of their own, ``held``, whose window outlives the run, given them over the
test suite's wire client as :mod:`bench.micro.cluster_snapshot` does): every
failover then hands N holds to the successor, and every restarted member loads them
from etcd. The successor's log line says what its takeover took (``catch_up_s``,
the log's tail read and applied; ``resume_s``, its engine put on its clock); their
medians are printed too.

It prints, per fault kind, p50 / p99 / max of the failover time, of the election
(the kill to the successor's log line; ``kill`` only) and how many faults ended
without a grant within the bound (not timed, but counted). Faults start at a random
moment (0.5-1.5 s after the cluster settled), so they fall anywhere between two
renewals of the leader's lease. Compare within one run: the machine is noisy.

Internals: the tests' harness (tests.cluster, tests.etcd) to run and fail the
servers; the clients use the public API only (``tenure.connect``, sessions, mutexes);
``--holds`` uses the test suite's wire client (a million public lock objects would
weigh on this process).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a file, too

from tests.cluster.harness import ClusterServer, TenureCluster
from tests.compiled import compiled_build
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import Clients as WireClients

import tenure
from bench.micro._backends import p99
from bench.micro.cluster_snapshot import ROOMY, fill
from tenure._core import CreateNode, CreateSession
from tenure.errors import LostError, TenureError

#: The bound of one fault (its grant, its restart, the cluster settling), in seconds.
FAULT_WAIT: Final = 30.0
#: The node the clients lock in.
NODE: Final = "bench-failover"


@dataclass
class Figures:
    """One fault kind's samples, in seconds."""

    failovers: list[float] = field(default_factory=list)
    elections: list[float] = field(default_factory=list)
    ungranted: int = 0
    #: What each successor's takeover took, from its log: catch_up_s, resume_s.
    takeovers: dict[str, list[float]] = field(default_factory=dict)

    def line(self, kind: str) -> str:
        """The kind's summary line."""
        parts = "".join(
            f"  {name} p50 {statistics.median(samples):.3f} s"
            for name, samples in self.takeovers.items()
        )
        return (
            f"{kind:<6} faults {len(self.failovers) + self.ungranted:>3}  "
            f"failover {_summary(self.failovers)}  election {_summary(self.elections)}  "
            f"ungranted {self.ungranted}{parts}"
        )


def _summary(samples: list[float]) -> str:
    if not samples:
        return "n/a".center(26)
    return (
        f"p50 {statistics.median(samples):5.2f} p99 {p99(samples):5.2f} max {max(samples):5.2f} s"
    )


class Clients:
    """``count`` clients of the cluster, each with a session and a lock name of its own."""

    def __init__(self, url: str, count: int, window: float) -> None:
        self.url = url
        self.count = count
        self.window = window
        #: Sessions lost (their client gave them up: no leader answered within the window).
        self.lost = 0
        self.clients: list[tenure.Client] = []
        self.sessions: list[tenure.Session] = []

    async def open(self) -> None:
        """Connect every client and open its session."""
        for index in range(self.count):
            client = await tenure.connect(self.url, connect_timeout=2)
            self.clients.append(client)
            if index == 0:
                await client.create_node(NODE, exist_ok=True)
            self.sessions.append(await client.session(NODE, recovery_window=self.window))

    async def close(self) -> None:
        """Close every session and client (bounded: a member may be down)."""
        for client in self.clients:
            with contextlib.suppress(TenureError, OSError, TimeoutError):
                async with asyncio.timeout(5):
                    await client.aclose()

    async def first_grant(self, round_: int) -> float | None:
        """The ``time.monotonic()`` of the first grant any client got in this round
        (each asks for a lock of its own until granted; None: none within the bound)."""
        granted: asyncio.Queue[float] = asyncio.Queue()
        tasks = [
            asyncio.ensure_future(self._granted(session, f"r{round_}-c{index}", granted))
            for index, session in enumerate(self.sessions)
        ]
        try:
            async with asyncio.timeout(FAULT_WAIT):
                return await granted.get()
        except TimeoutError:
            return None
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._replace_lost()

    async def _replace_lost(self) -> None:
        for index, session in enumerate(self.sessions):
            if session.closed:
                self.lost += 1
                client = self.clients[index]
                self.sessions[index] = await client.session(NODE, recovery_window=self.window)

    async def _granted(
        self, session: tenure.Session, name: str, granted: asyncio.Queue[float]
    ) -> None:
        while True:
            try:
                lock = await session.mutex(name).lock()
            except LostError:
                return  # counted and replaced once the round ends
            except TenureError:
                await asyncio.sleep(0)  # cut off under it: asked again on the next connection
                continue
            granted.put_nowait(time.monotonic())
            with contextlib.suppress(TenureError):
                await lock.release()
            return


def _led_at(server: ClusterServer, since_wall: float) -> tuple[float, dict[str, float]] | None:
    """When ``server`` logged that it leads, at or after UNIX time ``since_wall``
    (in ``time.monotonic()``'s terms), and the seconds its log line gives."""
    offset = time.time() - time.monotonic()
    for line in server.output(this_start=True).splitlines():
        if '"cluster_leading"' not in line:
            continue
        with contextlib.suppress(ValueError, KeyError):
            said = json.loads(line)
            ts = float(said["ts"])
            if ts >= since_wall:
                fields = said.get("fields", said)
                spans = {k: float(v) for k, v in fields.items() if k.endswith("_s")}
                return ts - offset, spans
    return None


async def hold_many(port: int, holds: int) -> None:
    """Have the server at ``port`` hold ``holds`` mutexes in one session of node
    ``held`` (its window an hour: it outlives the connection, closed after)."""
    clients = WireClients()
    try:
        filler = await clients.connect(port)
        await filler.call(CreateNode("held", ROOMY))
        sid = (await filler.call(CreateSession("held", b"bench-holds"))).session_id
        await fill(filler, sid, holds)
    finally:
        await clients.close_all()


async def _following(cluster: TenureCluster, server: ClusterServer, leader: ClusterServer) -> None:
    """Until ``server`` says it stands by behind ``leader`` (bounded)."""
    deadline = time.monotonic() + FAULT_WAIT
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, TenureError, AssertionError):
            view = await cluster.status(server)
            if view.leader == leader.address:
                return
        await asyncio.sleep(0.1)
    raise AssertionError(f"member {server.index} does not follow {leader.address}")


async def _one_fault(
    kind: str, round_: int, cluster: TenureCluster, clients: Clients, figures: Figures
) -> float | None:
    """One fault of ``kind``, counted in ``figures``; its failover time (None: no grant)."""
    old = await asyncio.to_thread(cluster.leader)
    since_wall, since = time.time(), time.monotonic()
    if kind == "kill":
        await asyncio.to_thread(old.kill)
    else:
        old.pause()
    grant = asyncio.ensure_future(clients.first_grant(round_))
    try:
        new = await asyncio.to_thread(cluster.leader, FAULT_WAIT, excluding=old)
        granted = await grant
    finally:
        if kind == "stop":
            old.resume()
    said = _led_at(new, since_wall)
    led = None
    if said is not None:
        led, spans = said
        for name, seconds in spans.items():
            figures.takeovers.setdefault(name, []).append(seconds)
    if kind == "kill":
        if led is not None:
            figures.elections.append(led - since)
        start = since
    else:
        start = led if led is not None else since
    took = None if granted is None else granted - start
    if took is None:
        figures.ungranted += 1
    else:
        figures.failovers.append(took)
    if kind == "kill":
        await asyncio.to_thread(old.start)
    await _following(cluster, old, new)
    return took


async def faults(
    kinds: list[str],
    *,
    holds: int,
    count: int,
    ttl: int,
    clients: int,
    window: float,
    seed: int,
    verbose: bool = False,
) -> tuple[dict[str, Figures], dict[str, int], float]:
    """``count`` faults of each kind on a fresh cluster whose leader holds ``holds``
    mutexes: each kind's figures, sessions lost, and the seconds the fill took."""
    rng = random.Random(seed)
    filled = 0.0
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp, EtcdCluster(1) as etcd:
        root = Path(tmp)
        figures: dict[str, Figures] = {}
        lost: dict[str, int] = {}
        for kind in kinds:
            cluster = TenureCluster(root / kind, etcd.endpoints, lease_ttl=ttl)
            with cluster:
                for server in cluster.servers:
                    await _following(cluster, server, cluster.leader())
                if holds:
                    started = time.perf_counter()
                    await hold_many(cluster.leader().port, holds)
                    filled = time.perf_counter() - started
                    if verbose:
                        print(f"the leader holds {holds:,} mutexes (filled in {filled:.0f} s)")
                opened = Clients(cluster.url(), clients, window)
                await opened.open()
                try:
                    samples = figures.setdefault(kind, Figures())
                    for round_ in range(count):
                        await asyncio.sleep(rng.uniform(0.5, 1.5))
                        took = await _one_fault(kind, round_, cluster, opened, samples)
                        if verbose:
                            said = "no grant" if took is None else f"{took:.3f} s"
                            print(f"  {kind} {round_ + 1}: {said}", flush=True)
                finally:
                    await opened.close()
                lost[kind] = opened.lost
    return figures, lost, filled


def measure(holds: int, faults_: int = 1, ttl: int = 2) -> dict[str, float]:
    """What bench/scale reads: ``faults_`` kills of the leader of a cluster holding
    ``holds`` mutexes (lease TTL ``ttl`` s): the failover's median and slowest (from the
    kill to a client's grant), the election's median, how far the slowest is past the
    TTL, faults without a grant, sessions lost and the fill's seconds."""
    figures, lost, filled = asyncio.run(
        faults(["kill"], holds=holds, count=faults_, ttl=ttl, clients=3, window=8.0, seed=39)
    )
    kill = figures["kill"]
    slowest = max(kill.failovers, default=math.nan)
    return {
        "failover_ms": 1e3 * statistics.median(kill.failovers) if kill.failovers else math.nan,
        "failover_max_ms": 1e3 * slowest,
        "election_ms": 1e3 * statistics.median(kill.elections) if kill.elections else math.nan,
        "over_ttl_s": slowest - ttl,
        "ttl_s": float(ttl),
        "ungranted": float(kill.ungranted),
        "sessions_lost": float(lost["kill"]),
        "fill_s": filled,
    }


async def _run(args: argparse.Namespace) -> None:
    figures, lost, _ = await faults(
        args.kinds.split(","),
        holds=args.holds,
        count=args.faults,
        ttl=args.ttl,
        clients=args.clients,
        window=args.window,
        seed=args.seed,
        verbose=args.verbose,
    )
    build = "compiled" if compiled_build() else "pure"
    print(
        f"{args.holds:,} holds, lease TTL {args.ttl} s, {args.clients} clients, "
        f"window {args.window:g} s "
        f"(a ping every {args.window / 4:g} s), the {build} build"
    )
    for kind, samples in figures.items():
        print(f"{samples.line(kind)}  sessions lost {lost[kind]}")


def main() -> None:
    """The command line (see the module docstring)."""
    command_line = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    command_line.add_argument("--faults", type=int, default=30, help="faults per kind")
    command_line.add_argument("--kinds", default="kill", help="kill, stop, or kill,stop")
    command_line.add_argument("--ttl", type=int, default=2, help="--cluster-lease-ttl (s)")
    command_line.add_argument("--clients", type=int, default=3)
    command_line.add_argument("--window", type=float, default=8.0, help="sessions' window (s)")
    command_line.add_argument("--seed", type=int, default=39)
    command_line.add_argument("--holds", type=int, default=0, help="held by the leader")
    command_line.add_argument("--verbose", action="store_true", help="each fault's figure")
    asyncio.run(_run(command_line.parse_args()))


if __name__ == "__main__":
    main()
