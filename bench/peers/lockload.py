"""The lock workloads (seq, par, cont), run in a client process of their own.

``python -m bench.peers.lockload --system S --url U --workload W --n N`` (W: seq,
seq-awaited, par or cont) runs one repeat against a server the orchestrator started
and prints its Measures as a JSON list on stdout (one sample each). ``--workload seq,par,cont --n
seq=2000,par=5000,cont=1500`` runs several in turn on one client (quick mode: one
process per repeat instead of three); ``--max-seconds S`` caps each one's timed
part. A run longer than ``--timeout`` seconds fails (exit status 2, the reason on
stderr) instead of hanging.

* seq: one session, acquire + release of distinct keys, one pair at a time; and
  the CPU time per pair of this client process and (``--server-pid``) the server's
  (``--server-pid P,P,...``: a system of several processes, tenure-cluster's members
  and their etcd, added up).
* seq-awaited: seq in the form whose release waits for its answer (``lock = await
  m.lock()`` ... ``await lock.release()`` on tenure, :meth:`LockSession.awaited`): two
  round trips a pair on every system, as redis-py's ``acquire()`` and ``release()``.
  The same metrics as seq.
* par: ``--clients`` sessions at once, distinct keys, ``n`` pairs in all.
* cont: ``--clients`` sessions loop acquire -> release on one key until ``n``
  grants: wait percentiles, Jain's fairness index over grants per client, and the
  most clients that started waiting later yet were granted first (0 when FIFO).

``--shape one`` (the default): the sessions share one client (a tenure client, a
Redis pool, a gRPC channel); ``--shape each``: every session opens its own.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bench.peers.clients import LockClient, LockSession, lock_client
from bench.tools.cpu import ServerCpu, own_cpu_seconds
from bench.tools.results import Measure, dumps

Outcome = list[tuple[str, float, str]]  # (metric, value, unit)


def _ms(values: list[float], *cuts: int) -> list[float]:
    """The given percentiles (1..99) of ``values`` seconds, in milliseconds."""
    if len(values) < 2:
        return [values[0] * 1e3 if values else float("nan")] * len(cuts)
    q = statistics.quantiles(values, n=100, method="inclusive")
    return [q[c - 1] * 1e3 for c in cuts]


async def warm_up(sessions: list[LockSession], pairs: int, prefix: str) -> None:
    """A few untimed pairs per session first: connections, caches, the server's files."""

    async def work(index: int, session: LockSession) -> None:
        for i in range(pairs):
            await session.release(await session.acquire(f"{prefix}-w{index}-{i}"))

    await asyncio.gather(*(work(i, s) for i, s in enumerate(sessions)))


@dataclass(frozen=True)
class Load:
    """What one workload does: ``n`` pairs (grants) by ``clients`` sessions.

    ``seconds`` caps the timed part (quick mode): a workload stops early when it is
    spent, and its rate is over what it did (the ``done`` metric says how much).
    ``server``: seq also reads this server's CPU time.
    """

    n: int
    clients: int
    prefix: str
    seconds: float = math.inf
    server: ServerCpu | None = None


async def seq(client: LockClient, load: Load, *, awaited: bool = False) -> Outcome:
    """One session: acquire + release of ``n`` distinct keys, one pair at a time.

    Besides the rate and latencies: the CPU time this client process, and the
    server's processes if ``load.server`` is given, spent per pair over the timed loop.
    ``awaited``: in the form whose release waits for its answer (:func:`seq_awaited`).
    """
    prefix, server = load.prefix, load.server
    session = await client.session()
    if awaited:
        session = session.awaited()
    await warm_up([session], 50, prefix)
    acquires: list[float] = []
    releases: list[float] = []
    clock = time.perf_counter
    server_before = server.read() if server is not None else {}
    cpu_before = own_cpu_seconds()
    started = clock()
    deadline = started + load.seconds
    for i in range(load.n):
        if clock() >= deadline:
            break
        t0 = clock()
        handle = await session.acquire(f"{prefix}-{i}")
        t1 = clock()
        await session.release(handle)
        acquires.append(t1 - t0)
        releases.append(clock() - t1)
    elapsed = clock() - started
    client_cpu = own_cpu_seconds() - cpu_before
    server_cpu = ServerCpu.spent(server_before, server.read()) if server is not None else None
    await session.close()
    a50, a99 = _ms(acquires, 50, 99)
    r50, r99 = _ms(releases, 50, 99)
    n = len(acquires)
    outcome = [
        ("done", float(n), "pairs"),
        ("pairs_per_s", n / elapsed, "pairs/s"),
        ("acquire_p50_ms", a50, "ms"),
        ("acquire_p99_ms", a99, "ms"),
        ("release_p50_ms", r50, "ms"),
        ("release_p99_ms", r99, "ms"),
        ("client_cpu_us", client_cpu / n * 1e6, "µs/pair"),
    ]
    if server_cpu is not None:
        outcome.append(("server_cpu_us", server_cpu / n * 1e6, "µs/pair"))
    return outcome


async def seq_awaited(client: LockClient, load: Load) -> Outcome:
    """seq with every release awaited: what ``await lock.release()`` costs a user.

    The same session, keys and metrics as :func:`seq`; only tenure's release differs
    (its block form sends the release ahead of the next request without waiting).
    """
    return await seq(client, load, awaited=True)


async def _sessions(client: LockClient, count: int) -> list[LockSession]:
    return list(await asyncio.gather(*(client.session() for _ in range(count))))


async def _close(sessions: list[LockSession]) -> None:
    await asyncio.gather(*(s.close() for s in sessions))


async def par(client: LockClient, load: Load) -> Outcome:
    """``clients`` sessions at once on distinct keys, ``n`` pairs in all."""
    n, clients, prefix = load.n, load.clients, load.prefix
    sessions = await _sessions(client, clients)
    await warm_up(sessions, 2, prefix)
    pairs: list[float] = []
    clock = time.perf_counter

    async def work(index: int, session: LockSession) -> None:
        for i in range(index, n, clients):
            if clock() >= deadline:
                return
            t0 = clock()
            await session.release(await session.acquire(f"{prefix}-{i}"))
            pairs.append(clock() - t0)

    started = clock()
    deadline = started + load.seconds
    await asyncio.gather(*(work(i, s) for i, s in enumerate(sessions)))
    elapsed = clock() - started
    await _close(sessions)
    p50, p99 = _ms(pairs, 50, 99)
    return [
        ("done", float(len(pairs)), "pairs"),
        ("pairs_per_s", len(pairs) / elapsed, "pairs/s"),
        ("p50_ms", p50, "ms"),
        ("p99_ms", p99, "ms"),
    ]


@dataclass(frozen=True)
class Grant:
    """One grant of the contended key: who, since when it waited, when it got it."""

    client: int
    waited_from: float
    granted_at: float


def jain(counts: list[int]) -> float:
    """Jain's fairness index: 1 when every client got as many grants, 1/n at worst."""
    total = sum(counts)
    squares = sum(c * c for c in counts)
    return total * total / (len(counts) * squares) if squares else float("nan")


def overtakes(grants: list[Grant]) -> list[int]:
    """Per grant: how many grants of waits that began later came before it.

    Counted in grants, not clients: a client that releases and takes the key again
    while another waits (Redis's polling Lock) overtakes it each time.
    """
    by_start = sorted(grants, key=lambda g: g.waited_from)
    result = []
    for i, g in enumerate(by_start):
        ahead = 0
        # Only waits that began inside g's wait can overtake it: scan just those.
        for h in by_start[i + 1 :]:
            if h.waited_from >= g.granted_at:
                break
            if h.granted_at < g.granted_at:
                ahead += 1
        result.append(ahead)
    return result


async def cont(client: LockClient, load: Load) -> Outcome:
    """``clients`` sessions loop acquire -> release on one key until ``n`` grants."""
    n, clients, prefix = load.n, load.clients, load.prefix
    sessions = await _sessions(client, clients)
    await warm_up(sessions, 1, prefix)
    grants: list[Grant] = []
    key = f"{prefix}-cont"
    clock = time.perf_counter

    holder: list[int] = []  # who holds the key now, by this process's account

    async def work(index: int, session: LockSession) -> None:
        while len(grants) < n and clock() < deadline:
            t0 = clock()
            handle = await session.acquire(key)
            grants.append(Grant(index, t0, clock()))
            # A lock that is not exclusive would make every number here meaningless:
            # while holding, let the other clients run; none may be granted meanwhile.
            # (The yield also matters on its own: on memory:// no call may suspend,
            # and one task would loop alone, starving the others of the CPU rather
            # than of the lock. The same tiny cost for every system.)
            if holder:
                raise AssertionError(f"clients {holder[0]} and {index} hold {key} at once")
            holder.append(index)
            await asyncio.sleep(0)
            holder.pop()  # before the release is sent: the next grant may come after it
            await session.release(handle)

    started = clock()
    deadline = started + load.seconds
    await asyncio.gather(*(work(i, s) for i, s in enumerate(sessions)))
    await _close(sessions)
    # The rate counts up to the n-th grant. Clients already waiting then are still
    # served, and their grants are kept for the rest: a starved waiter (granted
    # last) must count in the waits, the fairness and the overtakes.
    # (Or up to the last grant before the cap of quick mode stopped the loops.)
    n = min(n, sum(1 for g in grants if g.granted_at < deadline)) or len(grants)
    elapsed = sorted(g.granted_at for g in grants)[n - 1] - started
    counts = [0] * clients
    for g in grants:
        counts[g.client] += 1
    w50, w99 = _ms([g.granted_at - g.waited_from for g in grants], 50, 99)
    overtaken = overtakes(grants)
    return [
        ("done", float(n), "grants"),
        ("grants_per_s", n / elapsed, "grants/s"),
        ("wait_p50_ms", w50, "ms"),
        ("wait_p99_ms", w99, "ms"),
        ("jain", jain(counts), "index"),
        ("max_overtaken", float(max(overtaken)), "grants"),
        ("overtaken_share", sum(1 for o in overtaken if o) / len(overtaken), "fraction"),
    ]


WORKLOADS: dict[str, Callable[[LockClient, Load], Awaitable[Outcome]]] = {
    "seq": seq,
    "seq-awaited": seq_awaited,
    "par": par,
    "cont": cont,
}


async def run(args: argparse.Namespace) -> dict[str, Outcome]:
    """Open the client, run the workloads in turn within the timeout, close the client.

    Each workload opens sessions of its own on fresh keys; the client (the
    connection of the shared shape) is the process's, opened once.
    """
    client = lock_client(args.system, args.url, args.timeout, shared=args.shape == "one")
    server = ServerCpu(*args.server_pid) if args.server_pid else None
    outcomes: dict[str, Outcome] = {}
    async with asyncio.timeout(args.timeout):
        await client.open()
        try:
            for workload in args.workload:
                prefix = f"b{uuid.uuid4().hex[:8]}"  # fresh keys per repeat: servers are reused
                load = Load(args.n[workload], args.clients, prefix, args.max_seconds, server)
                outcomes[workload] = await WORKLOADS[workload](client, load)
        finally:
            await client.close()
    return outcomes


def _workloads(text: str) -> list[str]:
    names = [w.strip() for w in text.split(",") if w.strip()]
    unknown = [w for w in names if w not in WORKLOADS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"workloads of {', '.join(WORKLOADS)}; not {unknown}")
    return names


def _pids(text: str) -> list[int]:
    """``123`` or ``123,456``: the processes whose CPU time seq reads."""
    try:
        pids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"pids, comma-separated; not {text!r}") from None
    if not pids:
        raise argparse.ArgumentTypeError("at least one pid")
    return pids


def _sizes(text: str) -> dict[str, int]:
    """``2000`` (every workload) or ``seq=2000,par=5000``."""
    if "=" not in text:
        return dict.fromkeys(WORKLOADS, int(text))
    sizes = {}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in WORKLOADS:
            raise argparse.ArgumentTypeError(f"unknown workload {name!r} in --n")
        sizes[name.strip()] = int(value)
    return sizes


def new_loop(kind: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop factory: uvloop's or the standard one."""
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def _alarm(signum: int, frame: object) -> None:
    raise TimeoutError


def main(argv: list[str] | None = None) -> int:
    """Run one repeat; print its Measures (JSON) on stdout."""
    parser = argparse.ArgumentParser(prog="python -m bench.peers.lockload", description=__doc__)
    parser.add_argument("--system", required=True)
    parser.add_argument("--url", required=True)
    parser.add_argument(
        "--workload",
        type=_workloads,
        required=True,
        help="seq, seq-awaited, par, cont, or several: seq,par",
    )
    parser.add_argument(
        "--n",
        type=_sizes,
        required=True,
        help="pairs (seq, seq-awaited, par) or grants (cont): N or seq=N,...",
    )
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=math.inf,
        help="cap on each workload's timed part (quick mode); default: none",
    )
    parser.add_argument("--clients", type=int, default=32, help="sessions of par and cont")
    parser.add_argument("--timeout", type=float, default=120.0, help="the whole run, seconds")
    parser.add_argument("--loop", choices=["uvloop", "asyncio"], default="uvloop")
    parser.add_argument(
        "--shape",
        choices=["one", "each"],
        default="one",
        help="one client (connection, pool, channel) for all sessions, or one each",
    )
    parser.add_argument(
        "--server-pid",
        type=_pids,
        help="seq, seq-awaited: also measure this server's CPU per pair: PID, or PID,PID,..."
        " (the processes of a system of several, their CPU added up)",
    )
    args = parser.parse_args(argv)
    missing = [w for w in args.workload if w not in args.n]
    if missing:
        parser.error(f"--n gives no size for {missing}")
    # asyncio.timeout only acts when the loop runs; memory:// may never suspend. The
    # alarm interrupts any Python code, a little later.
    signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, args.timeout + 1)
    try:
        with asyncio.Runner(loop_factory=new_loop(args.loop)) as runner:
            outcomes = runner.run(run(args))
    except TimeoutError:
        print(f"timeout: the run took more than {args.timeout:g}s", file=sys.stderr)
        return 2
    measures = []
    for workload, outcome in outcomes.items():
        note = f"client: {args.loop}, pid {os.getpid()}"
        done = next(value for metric, value, _unit in outcome if metric == "done")
        if done < args.n[workload]:  # the cap stopped it: say so (the report shows notes)
            note = f"quick mode: at most {args.max_seconds:g} s per repeat; {note}"
        measures += [
            Measure(workload, args.system, metric, value, unit, [value], note)
            for metric, value, unit in outcome
            if metric != "done"
        ]
    print(dumps(measures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
