"""The ``linearizable`` scenario's nemesis: the faults a linearizability checker must see.

One nemesis, :func:`linearizable`, injects one fault at a time, every 1-2 s after the
last one healed, in rounds (the first in the order below, later ones shuffled), of
the faults the target can take (:func:`faults_of`):

on every target, through each worker's fault proxies (one per address of the target),
or on a target in network namespaces (``tenure-cluster``, ``etcd``) by the kernel's
cuts, with ``isolate-leader`` besides (:mod:`tools.faults.lin_cuts`, which says why):

* ``answers-lost``: what the service writes to some workers is lost for 0.1-0.8 s,
  then their connections are reset: requests applied whose answers never came, which
  the clients send again (their retries are new operations);
* ``client-cut-from-leader``: some workers' links to the leader alone stalled (a
  cluster's other members, and etcd, still reachable; on a single server, its one
  link) for 0.3-1.5 recovery windows;

on a cluster of tenure servers (``replicated``), :mod:`tools.faults.failover`'s own:

* ``kill-9-leader``; ``sigstop-leader`` (stopped past its lease, then resumed: it must
  step down before it answers anything, so a client whose one door is that server
  reads nothing stale from it); ``cut-leader-from-etcd`` (its clients still reach it);
  ``kill-9-etcd-leader``; and ``kill-9-etcd-member``, a member of etcd that does not
  lead, restarted after 0.5-1.5 s;

on etcd (``members``): :mod:`tools.faults.members`'s ``kill-9-leader`` and
``kill-9-member``, each restarted on its data after 1-4 s;

on a single server (``tenure``, ``redis``, ``postgres``): ``kill-9`` (restarted at
once on its data) and ``sigstop-server`` (stopped for 0.5-2 s, then resumed).

Each fault ends healed (the cluster's servers and etcd members running again, a
leader, the proxies flowing), noted ``healed``; :func:`tools.faults.harness.heal` is
the safety net at the end.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Final

from tools.faults import failover, lin_cuts, members
from tools.faults.history import now
from tools.faults.nemesis import Stage, restart
from tools.faults.netns import net_of
from tools.faults.proxies import ProxyGroup
from tools.faults.target import MEMBERS, REPLICATED, as_cluster, as_replicated

Fault = Callable[[Stage], Awaitable[None]]


def _some(stage: Stage) -> list[ProxyGroup]:
    """The proxy groups of a random non-empty subset of the workers."""
    indexes = sorted(stage.proxies)
    chosen = stage.rng.sample(indexes, stage.rng.randint(1, len(indexes)))
    return [stage.proxies[index] for index in sorted(chosen)]


async def _answers_lost(stage: Stage) -> None:
    groups = _some(stage)
    stage.fault("answers-lost", workers=len(groups))
    for group in groups:
        group.lose_downstream()
    await asyncio.sleep(stage.rng.uniform(0.1, 0.8))
    for group in groups:
        group.drop()
        group.lose_downstream(False)


async def _leader_index(stage: Stage) -> int:
    """Where the leader is among the target's addresses (0 on a single server)."""
    target = stage.target
    if REPLICATED in target.capabilities:
        replicated = as_replicated(target)
        name = await asyncio.to_thread(replicated.leader, timeout=failover.ELECTION_WAIT)
        return replicated.servers.index(name) if name is not None else 0
    if MEMBERS in target.capabilities:
        cluster = as_cluster(target)
        name = await asyncio.to_thread(cluster.leader)
        return cluster.members.index(name) if name is not None else 0
    return 0


async def _client_cut_from_leader(stage: Stage) -> None:
    index = await _leader_index(stage)
    groups = _some(stage)
    seconds = stage.window * stage.rng.uniform(0.3, 1.5)
    stage.fault("client-cut-from-leader", workers=len(groups), member=index, seconds=seconds)
    links = [group.proxies[index] for group in groups]
    for link in links:
        link.stall()
    try:
        await asyncio.sleep(seconds)
    finally:
        for link in links:
            link.resume()


def _replicated(name: str) -> Fault:
    """Fault ``name`` of :data:`tools.faults.failover.FAILOVER_FAULTS`, then restored."""

    async def fault(stage: Stage) -> None:
        target = as_replicated(stage.target)
        try:
            await failover.FAILOVER_FAULTS[name](stage, target)
        finally:
            await failover.restore(stage, target)

    return fault


async def _kill_etcd_member(stage: Stage) -> None:
    target = as_replicated(stage.target)
    leader = await asyncio.to_thread(target.etcd_leader)
    others = [name for name in target.running_etcd_members() if name != leader]
    if not others:
        return
    name = stage.rng.choice(others)
    await asyncio.to_thread(target.kill_etcd_member, name)
    stage.fault("kill-9-etcd-member", member=name)
    try:
        await asyncio.sleep(stage.rng.uniform(0.5, 1.5))
    finally:
        await failover.restore(stage, target)


def _member(name: str) -> Fault:
    """Fault ``name`` of :data:`tools.faults.members.MEMBER_FAULTS`, then restarted."""

    async def fault(stage: Stage) -> None:
        cluster = as_cluster(stage.target)
        try:
            await members.MEMBER_FAULTS[name](stage, cluster)
        finally:
            running = set(cluster.running_members())
            stopped = [m for m in cluster.members if m not in running]
            if stopped:
                try:
                    await asyncio.to_thread(cluster.start_members, stopped)
                except (RuntimeError, OSError) as error:
                    stage.note("restart-failed", members=stopped, error=str(error))
                else:
                    stage.note("restart", members=stopped, pid=cluster.pid)

    return fault


async def _kill_9(stage: Stage) -> None:
    await asyncio.to_thread(stage.target.kill)
    stage.fault("kill-9")
    await restart(stage)


async def _sigstop_server(stage: Stage) -> None:
    pid = stage.target.pid
    if pid is None:
        return
    os.kill(pid, signal.SIGSTOP)
    stage.fault("sigstop-server", pid=pid)
    try:
        await asyncio.sleep(stage.rng.uniform(0.5, 2.0))
    finally:
        os.kill(pid, signal.SIGCONT)


#: The faults every target takes (through the proxies), in the first round's order.
COMMON: Final[dict[str, Fault]] = {
    "answers-lost": _answers_lost,
    "client-cut-from-leader": _client_cut_from_leader,
}
#: A cluster of tenure servers' own.
REPLICATED_FAULTS: Final[dict[str, Fault]] = {
    "kill-9-leader": _replicated("kill-9-leader"),
    "sigstop-leader": _replicated("sigstop-leader"),
    "cut-leader-from-etcd": _replicated("cut-leader-from-etcd"),
    "kill-9-etcd-leader": _replicated("kill-9-etcd-leader"),
    "kill-9-etcd-member": _kill_etcd_member,
}
#: etcd's own.
MEMBER_FAULTS: Final[dict[str, Fault]] = {
    "kill-9-leader": _member("kill-9-leader"),
    "kill-9-member": _member("kill-9-member"),
}
#: A single server's own.
SERVER_FAULTS: Final[dict[str, Fault]] = {"kill-9": _kill_9, "sigstop-server": _sigstop_server}


def faults_of(capabilities: frozenset[str], netns: bool = False) -> dict[str, Fault]:
    """The faults a target of ``capabilities`` takes, in the first round's order: its
    own first (so that a short run sees them), then the proxies' (module docstring);
    in namespaces (``netns``), the kernel's cuts instead, and those first
    (:data:`tools.faults.lin_cuts.FIRST`)."""
    if REPLICATED in capabilities:
        own = REPLICATED_FAULTS
    elif MEMBERS in capabilities:
        own = MEMBER_FAULTS
    else:
        own = SERVER_FAULTS
    if not netns:
        return {**own, **COMMON}
    faults = {**own, **lin_cuts.KERNEL_FAULTS}
    first = [name for name in lin_cuts.FIRST if name in faults]
    return {name: faults[name] for name in [*first, *(n for n in faults if n not in first)]}


async def linearizable(stage: Stage, until: float) -> None:
    """One fault of :func:`faults_of` at a time until ``until``, each healed before the next."""
    faults = faults_of(stage.target.capabilities, net_of(stage.target) is not None)
    round_: list[str] = []
    first = True
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(1.0, 2.0))
        if now() >= until:
            break
        if not round_:
            round_ = list(reversed(faults))  # popped from the end
            if not first:
                stage.rng.shuffle(round_)
            first = False
        name = round_.pop()
        await faults[name](stage)
        stage.note("healed", fault=name)
