"""Member nemeses: ``kill -9`` of a cluster's members (capability ``members``).

One nemesis, :func:`members`, injects in rounds (the first in the order below,
later ones shuffled, so even a short run sees the first three):

* ``kill-9-leader``: the member the others agree leads, killed; a new leader is
  elected among the two left, which keep a quorum. Restarted on its data after
  1-4 s;
* ``kill-9-member``: a random member (the leader too, by chance), likewise;
* ``kill-9-cluster``: every member at once, restarted at once on its data;
* ``kill-9-majority``: the leader and one other: the survivor has no quorum and
  serves nothing (it does not close its clients' connections either) until they
  are back, after the window and 1-3 s more;
* ``cluster-outage``: every member at once, down past the window (plus 1-3 s):
  clients give their sessions up on their own clocks, and etcd renews every lease
  to its full TTL when it is back (docs/backends.md).

Each fault ends with every member serving again (notes ``restart``, or
``restart-failed``: a checker rule), so the next starts from a healthy cluster.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from tools.faults.history import now
from tools.faults.nemesis import Stage
from tools.faults.target import Cluster, as_cluster

MemberFault = Callable[[Stage, Cluster], Awaitable[list[str]]]


async def _kill(stage: Stage, cluster: Cluster, names: list[str], fault: str) -> None:
    for name in names:
        await asyncio.to_thread(cluster.kill_member, name)
    stage.fault(fault, members=names)


async def _leader(stage: Stage, cluster: Cluster) -> list[str]:
    leader = await asyncio.to_thread(cluster.leader)
    # No agreed leader (an election under way): a random member stands in, said so.
    name = leader or stage.rng.choice(cluster.members)
    await _kill(stage, cluster, [name], "kill-9-leader" if leader else "kill-9-member")
    await asyncio.sleep(stage.rng.uniform(1.0, 4.0))
    return [name]


async def _member(stage: Stage, cluster: Cluster) -> list[str]:
    name = stage.rng.choice(cluster.members)
    await _kill(stage, cluster, [name], "kill-9-member")
    await asyncio.sleep(stage.rng.uniform(1.0, 4.0))
    return [name]


async def _cluster(stage: Stage, cluster: Cluster) -> list[str]:
    await asyncio.to_thread(cluster.kill)  # every member at once
    stage.fault("kill-9-cluster", members=cluster.members)
    return cluster.members


async def _majority(stage: Stage, cluster: Cluster) -> list[str]:
    leader = await asyncio.to_thread(cluster.leader)
    others = [name for name in cluster.members if name != leader]
    names = [leader] if leader else []
    names += stage.rng.sample(others, len(cluster.members) // 2 + 1 - len(names))
    await _kill(stage, cluster, names, "kill-9-majority")
    await asyncio.sleep(stage.window + stage.rng.uniform(1.0, 3.0))
    return names


async def _outage(stage: Stage, cluster: Cluster) -> list[str]:
    await asyncio.to_thread(cluster.kill)
    down = stage.window + stage.rng.uniform(1.0, 3.0)
    stage.fault("cluster-outage", members=cluster.members, down=down)
    await asyncio.sleep(down)
    return cluster.members


#: The faults of one round, in the first round's order.
MEMBER_FAULTS: Final[dict[str, MemberFault]] = {
    "kill-9-leader": _leader,
    "kill-9-member": _member,
    "kill-9-cluster": _cluster,
    "kill-9-majority": _majority,
    "cluster-outage": _outage,
}


async def _start_again(stage: Stage, cluster: Cluster, names: list[str]) -> None:
    if not names:
        return
    try:
        await asyncio.to_thread(cluster.start_members, names)
    except (RuntimeError, OSError) as error:
        stage.note("restart-failed", members=names, error=str(error))
        return
    stage.note("restart", members=names, pid=cluster.pid)


async def members(stage: Stage, until: float) -> None:
    """Every 2-5 s, one fault of :data:`MEMBER_FAULTS`, healed before the next."""
    cluster = as_cluster(stage.target)
    round_: list[str] = []
    first = True
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(2.0, 5.0))
        if now() >= until:
            break
        if not round_:
            round_ = list(reversed(MEMBER_FAULTS))  # popped from the end
            if not first:
                stage.rng.shuffle(round_)
            first = False
        name = round_.pop()
        try:
            stopped = await MEMBER_FAULTS[name](stage, cluster)
        finally:
            running = set(cluster.running_members())
            await _start_again(stage, cluster, [m for m in cluster.members if m not in running])
        stage.note("healed", fault=name, members=stopped)
