"""One change, many watchers spread over a cluster's three members: how long until the
last is told (issue 61: watches on standbys).

:mod:`bench.micro.watch_fanout` with a three-member ``tenure serve --cluster`` over
one etcd member instead of one server: ``N`` repeating watches of one semaphore over
``C`` connections, a third of them to each member. A connection to the leader makes
its own session and arms its watches there (the leader's, fresh); a connection to a
standby arms its watches with ``max_staleness`` (:data:`BOUND`) for a session the
leader holds (made by a holder connection to the leader that stays open: no session
is attached to a standby's connection). Then one ``UpdateSemaphore`` on the leader,
and the same measures as there (``answer_s``, ``last_told_s``, ``told_once``...;
``server_cpu_s``: the three members' CPU together, and ``member_cpu_s`` each's).

Run: ``python -m bench.micro.standby_watch_fanout [--watchers 10000 100000]
[--connections 999] [--processes 3] [--repeats 3]``; ``--leader-only`` puts every
watcher on the leader instead (the same cluster: the comparison).

Internals: the tests' harness (``tests.cluster``, ``tests.etcd``) runs etcd and the
members, with the server's default lease TTL (``tenure.server._config``: the tests'
2 s is for fast failovers, and a busy two-core machine can starve a member that
long); the tests' wire client (``tests.server.wire``) opens the connections;
:mod:`bench.micro.watch_fanout`'s ``arm`` arms the watches (the protocol's commands,
``tenure._core``; with ``max_staleness`` on a standby) and its readers count the
firings.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import multiprocessing.connection
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.cluster.harness import TenureCluster
from tests.etcd.cluster import EtcdCluster
from tests.server.wire import Clients

from bench.micro.watch_fanout import (
    KEY,
    NODE,
    PHASE_LIMIT,
    QUIET,
    WATCHED,
    arm,
    cpu_seconds,
    raise_nofile,
    read_pushes,
    split_evenly,
)
from tenure._core import (
    CreateNode,
    CreateSemaphore,
    CreateSession,
    NodeConfig,
    UpdateSemaphore,
)
from tenure._protocol import Reply
from tenure.server._config.cluster_settings import DEFAULT_LEASE_TTL

#: The staleness the standbys' watches allow, in seconds.
BOUND = 1.0


async def _child_main(
    plan: list[tuple[int, int | None, int]], pipe: multiprocessing.connection.Connection
) -> None:
    clients = Clients()
    try:
        opened = [await clients.connect(port) for port, _, _ in plan]
        armed = await asyncio.gather(
            *(
                arm(c, n, sid, None if sid is None else BOUND)
                for c, (_, sid, n) in zip(opened, plan, strict=True)
            )
        )
        counts: list[dict[int, int]] = [{} for _ in opened]
        seen = [0.0]
        readers = [
            asyncio.ensure_future(read_pushes(c, mine, seen, 1 << 24))
            for c, mine in zip(opened, counts, strict=True)
        ]
        total = sum(len(ids) for ids in armed)
        pipe.send(total)
        loop = asyncio.get_running_loop()
        while await loop.run_in_executor(None, pipe.recv) != "stop":
            for mine in counts:
                mine.clear()
            deadline = time.monotonic() + PHASE_LIMIT
            # (Polled, as bench.micro.watch_fanout's: a quiet spell announces itself not.)
            while (  # noqa: ASYNC110
                sum(len(mine) for mine in counts) < total and time.monotonic() < deadline
            ):
                await asyncio.sleep(0.01)
            last = seen[0]
            while time.monotonic() - seen[0] < QUIET:  # noqa: ASYNC110
                await asyncio.sleep(0.05)
            fired = [
                mine.get(wid, 0) for ids, mine in zip(armed, counts, strict=True) for wid in ids
            ]
            pipe.send(
                {
                    "last": last,
                    "once": sum(1 for n in fired if n == 1),
                    "more": sum(1 for n in fired if n > 1),
                    "none": sum(1 for n in fired if n == 0),
                }
            )
        for reader in readers:
            reader.cancel()
    finally:
        await clients.close_all()


def _child(plan: list[tuple[int, int | None, int]], pipe: Any) -> None:
    """A client process: its connections, their watches, their firings counted."""
    asyncio.run(_child_main(plan, pipe))


async def _rounds(
    leader_port: int, pipes: list[Any], repeats: int, pids: list[int]
) -> list[dict[str, float]]:
    clients = Clients()
    try:
        updater = await clients.connect(leader_port)
        sid = (await updater.call(CreateSession(NODE, KEY))).session_id
        results = []
        for n in range(repeats):
            for pipe in pipes:
                pipe.send("go")
            await asyncio.sleep(0.2)  # (each child back in its wait for the firings)
            cpu = [cpu_seconds(pid) for pid in pids]
            started = time.monotonic()
            await updater.call(UpdateSemaphore(sid, WATCHED, b"value %d" % n))
            answered = time.monotonic() - started
            loop = asyncio.get_running_loop()
            reports = [await loop.run_in_executor(None, pipe.recv) for pipe in pipes]
            spent = [cpu_seconds(pid) - was for pid, was in zip(pids, cpu, strict=True)]
            results.append(
                {
                    "answer_s": answered,
                    "last_told_s": max(r["last"] for r in reports) - started,
                    "told_once": sum(r["once"] for r in reports),
                    "told_twice_or_more": sum(r["more"] for r in reports),
                    "not_told": sum(r["none"] for r in reports),
                    "server_cpu_s": sum(spent),
                    **{f"member{i}_cpu_s": s for i, s in enumerate(spent)},
                }
            )
        return results
    finally:
        await clients.close_all()


async def _setup(leader_port: int, holders: int, per_connection: int) -> tuple[Clients, list[int]]:
    """The node, the watched semaphore, and ``holders`` sessions the standbys' watchers
    use (kept by a connection to the leader that stays open: returned with them)."""
    clients = Clients()
    admin = await clients.connect(leader_port)
    roomy = NodeConfig(max_sessions=100_000, max_watches_per_session=max(1_000, per_connection))
    await admin.call(CreateNode(NODE, roomy))
    sid = (await admin.call(CreateSession(NODE, KEY))).session_id
    await admin.call(CreateSemaphore(sid, WATCHED, 1, b"value"))
    sent = [admin.send(CreateSession(NODE, KEY)) for _ in range(holders)]
    sids = []
    for request in sent:
        answer = await admin.answer(request)
        assert isinstance(answer, Reply), answer
        sids.append(answer.value.session_id)  # type: ignore[union-attr]
    return clients, sids


def measure(
    watchers: int,
    connections: int,
    *,
    processes: int = 3,
    repeats: int = 1,
    leader_only: bool = False,
) -> list[dict[str, float]]:
    """One update reaching ``watchers`` watches over ``connections`` connections spread
    over the three members (``leader_only``: all to the leader), ``repeats`` times."""
    connections = max(1, min(connections, watchers))
    per_connection = -(-watchers // connections)
    raise_nofile(2 * connections + 1_024)
    flags: tuple[str, ...] = ("--idle-timeout", "0", "--max-connections", str(connections + 64))
    flags += ("--max-watches-per-semaphore", str(max(watchers, 1_000)))
    flags += ("--max-handshaking", str(max(64, connections)))
    with (
        tempfile.TemporaryDirectory() as scratch,
        EtcdCluster(1, root=Path(scratch) / "etcd") as etcd,
        TenureCluster(
            Path(scratch) / "cluster", etcd.endpoints, extra=flags, lease_ttl=DEFAULT_LEASE_TTL
        ) as cluster,
    ):
        leader = cluster.leader()
        members = [leader] if leader_only else [leader, *cluster.standbys()]
        pids = [s.pid for s in cluster.servers if s.pid is not None]
        ports = [m.port for m in members]
        return asyncio.run(
            _measure(watchers, connections, per_connection, ports, processes, repeats, pids)
        )


async def _measure(
    watchers: int,
    connections: int,
    per_connection: int,
    ports: list[int],
    processes: int,
    repeats: int,
    pids: list[int],
) -> list[dict[str, float]]:
    """:func:`measure` once the cluster runs: ``ports[0]`` the leader's."""
    shares = split_evenly(watchers, connections)
    on_standbys = sum(1 for i in range(len(shares)) if i % len(ports))
    holding, sids = await _setup(ports[0], on_standbys, per_connection)
    plan = [
        (ports[i % len(ports)], sids.pop() if i % len(ports) else None, share)
        for i, share in enumerate(shares)
    ]
    groups = [plan[i::processes] for i in range(min(processes, len(plan)))]
    context = multiprocessing.get_context("spawn")
    loop = asyncio.get_running_loop()
    pipes, children = [], []
    try:
        for group in groups:
            mine, theirs = context.Pipe()
            child = context.Process(target=_child, args=(group, theirs))
            child.start()
            pipes.append(mine)
            children.append(child)
        armed = 0
        for pipe in pipes:
            if not await loop.run_in_executor(None, pipe.poll, PHASE_LIMIT):
                raise RuntimeError("a client process did not arm its watches")
            armed += pipe.recv()
        if armed != watchers:
            raise RuntimeError(f"{armed} watches armed, not {watchers}")
        results = await _rounds(ports[0], pipes, repeats, pids)
        for pipe in pipes:
            pipe.send("stop")
        return results
    finally:
        for child in children:
            await loop.run_in_executor(None, child.join, 30)
            if child.is_alive():
                child.kill()
                child.join()
        await holding.close_all()


def main() -> None:
    """Print each update's numbers, then the medians per size."""
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--watchers", type=int, nargs="+", default=[10_000, 100_000])
    args.add_argument("--connections", type=int, default=999)
    args.add_argument("--processes", type=int, default=3)
    args.add_argument("--repeats", type=int, default=3)
    args.add_argument("--leader-only", action="store_true")
    o = args.parse_args()
    where = "the leader alone" if o.leader_only else "the three members"
    print(f"{o.connections} connections over {where}, {o.processes} client processes")
    for watchers in o.watchers:
        runs = measure(
            watchers,
            o.connections,
            processes=o.processes,
            repeats=o.repeats,
            leader_only=o.leader_only,
        )
        for run in runs:
            print("   " + " ".join(f"{k}={v:.4g}" for k, v in run.items()), flush=True)
        last = statistics.median(r["last_told_s"] for r in runs)
        cpu = statistics.median(r["server_cpu_s"] for r in runs)
        never = max(r["not_told"] for r in runs)
        print(
            f"{watchers:>8} last told {last * 1e3:.1f} ms, never {never}, members' cpu {cpu:.3f} s"
        )


if __name__ == "__main__":
    main()
