"""The ``linearizable`` scenario's network faults where the target runs in network namespaces.

A target made with ``netns`` (``tenure-cluster``, ``etcd``) runs each server and etcd
member in a namespace of its own (:mod:`tools.faults.netns`); the harness puts each
worker in one too (:func:`worker_path`), reaching the servers over veth pairs through
the net's hub, where the kernel drops what a fault cuts. The nemesis's network faults
there (:data:`KERNEL_FAULTS`, first in the first round, so that a short run sees each):

* ``answers-lost``: what the target's servers send to some workers dropped for
  0.1-0.8 s (their requests still arrive, and are applied), then those workers'
  connections to them destroyed (``ss -K``: the client sees its connection abort, the
  server a reset), then the cut healed: requests applied whose answers never came,
  which the clients send again;
* ``client-cut-from-leader``: some workers cut from the leader alone, both ways (the
  other servers, and etcd, still reachable) for 0.3-1.5 recovery windows: their
  connections to it stay open and hear nothing (no reset), until the cut heals or
  their own pings give up and they look for the leader through the other doors;
* ``isolate-leader``: the leader cut from everything in the net (etcd, the other
  servers or members, every worker; the harness, which only watches, still sees it).
  On a cluster of tenure servers, until a successor leads and a lease TTL and 0.5-1.5 s
  more went by (:func:`tools.faults.failover.depose`, as ``cut-leader-from-etcd``,
  whose cut is the kernel's here too): it must step down, and what its clients sent
  into the cut, which TCP delivers once healed, must not be applied by it then. On
  etcd, for 1-3 s: a leader without a quorum steps down, and the others elect one.

Why no proxy: a worker in its own namespace reaches the servers over its own link; a
proxy would have to live in the harness's namespace, in between, where no cut of one
worker from one server can be made in the kernel. What the proxies did that the
scenario still needs, the kernel does: answers lost on their way is a one-way cut of
the servers' packets (a proxy's ``lose_downstream``), the resets after it ``ss -K``
(its ``drop``), a stall a cut both ways, but half-open (a proxy kept both
connections alive and held the bytes). A proxy's delay and refused connections, which
this nemesis never used, are the ``network`` scenario's. On the other targets
(``tenure``, ``redis``, ``postgres``) the workers still go through proxies
(:mod:`tools.faults.lin_nemesis`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final

from tools.faults import failover
from tools.faults.nemesis import Stage
from tools.faults.netns import HOST, Net, net_of
from tools.faults.proxies import ProxyGroup
from tools.faults.target import MEMBERS, REPLICATED, Address, Target, as_cluster, as_replicated

#: The first round's order of the faults on a target in namespaces (the rest after).
FIRST: Final = ("answers-lost", "client-cut-from-leader", "cut-leader-from-etcd", "isolate-leader")


def worker_member(index: int) -> str:
    """The net member (and namespace) name of worker ``index``."""
    return f"w{index}"


@dataclass
class WorkerPath:
    """How one worker reaches the target: where its clients connect, what its command
    runs under (its namespace), and its fault proxies (None in namespaces)."""

    addresses: list[Address]
    prefix: list[str]
    proxies: ProxyGroup | None


async def worker_path(target: Target, index: int) -> WorkerPath:
    """Worker ``index``'s way to ``target``: in a namespace of its own where the target
    runs in a net (made now), else through a proxy group of its own (started now)."""
    net = net_of(target)
    if net is None:
        group = ProxyGroup(target.addresses)
        await group.start()
        return WorkerPath(group.addresses, [], group)
    member = worker_member(index)
    await asyncio.to_thread(net.add, member)
    return WorkerPath(list(target.addresses), net.command(member, []), None)


def _net(stage: Stage) -> Net:
    net = net_of(stage.target)
    if net is None:
        raise TypeError(f"target {stage.target.name} does not run in network namespaces")
    return net


def _some_workers(stage: Stage) -> list[str]:
    """The net members of a random non-empty subset of the workers."""
    indexes = sorted(stage.workers)
    chosen = stage.rng.sample(indexes, stage.rng.randint(1, len(indexes)))
    return [worker_member(index) for index in sorted(chosen)]


def _doors(stage: Stage, net: Net) -> list[str]:
    """The net members behind the target's addresses (its servers, or etcd's members)."""
    names = [net.name_of(host) for host, _ in stage.target.addresses]
    return [name for name in names if name is not None]


async def _leader(stage: Stage, doors: list[str]) -> str:
    """The member that leads now (the first door when none does)."""
    target = stage.target
    name: str | None = None
    if REPLICATED in target.capabilities:
        replicated = as_replicated(target)
        name = await asyncio.to_thread(replicated.leader, timeout=failover.ELECTION_WAIT)
    elif MEMBERS in target.capabilities:
        name = await asyncio.to_thread(as_cluster(target).leader)
    return name if name is not None else doors[0]


async def _answers_lost(stage: Stage) -> None:
    net = _net(stage)
    doors, workers = _doors(stage, net), _some_workers(stage)
    answers = [(door, worker) for door in doors for worker in workers]
    stage.fault("answers-lost", workers=workers, cut="kernel")
    await asyncio.to_thread(net.cut, answers)
    try:
        await asyncio.sleep(stage.rng.uniform(0.1, 0.8))
        reset = 0
        for worker in workers:
            reset += await asyncio.to_thread(net.reset, worker, doors)
        stage.note("reset", workers=workers, connections=reset)
    finally:
        await asyncio.to_thread(net.cut, answers, False)


async def _client_cut_from_leader(stage: Stage) -> None:
    net = _net(stage)
    leader = await _leader(stage, _doors(stage, net))
    workers = _some_workers(stage)
    seconds = stage.window * stage.rng.uniform(0.3, 1.5)
    stage.fault(
        "client-cut-from-leader", workers=workers, member=leader, seconds=seconds, cut="kernel"
    )
    await asyncio.to_thread(net.cut_between, workers, [leader])
    try:
        await asyncio.sleep(seconds)
    finally:
        await asyncio.to_thread(net.cut_between, workers, [leader], False)


def _isolation(net: Net) -> Callable[[str, bool], None]:
    """Cut (or heal) member ``name`` from every other member but the host."""

    def isolate(name: str, on: bool) -> None:
        net.cut_between([name], [m for m in net.members if m not in (name, HOST)], on)

    return isolate


async def _isolate_leader(stage: Stage) -> None:
    net = _net(stage)
    isolate = _isolation(net)
    if REPLICATED in stage.target.capabilities:
        target = as_replicated(stage.target)
        try:
            await failover.depose(stage, target, "isolate-leader", isolate, (0.5, 1.5))
        finally:
            await failover.restore(stage, target)
        return
    leader = await asyncio.to_thread(as_cluster(stage.target).leader)
    if leader is None:
        return
    seconds = stage.rng.uniform(1.0, 3.0)
    stage.fault("isolate-leader", member=leader, seconds=seconds, cut="kernel")
    await asyncio.to_thread(isolate, leader, True)
    try:
        await asyncio.sleep(seconds)
    finally:
        await asyncio.to_thread(isolate, leader, False)


#: The faults of a target in namespaces that replace the proxies' (module docstring).
KERNEL_FAULTS: Final[dict[str, Callable[[Stage], Awaitable[None]]]] = {
    "answers-lost": _answers_lost,
    "client-cut-from-leader": _client_cut_from_leader,
    "isolate-leader": _isolate_leader,
}
