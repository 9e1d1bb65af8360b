"""Failover nemeses: a replicated service's servers and etcd failing (capability ``replicated``).

One nemesis, :func:`failover`, injects one fault at a time, every 1-2 s after the
last one healed. The first round goes in this order (so that even a short run sees
the first six); later rounds shuffle the others and kill the leader again before
each of them (but ``sigstop-holder``, which kills it itself), so that the leader
dies about every ten seconds:

* ``kill-9-leader``: the server that leads, killed; a standby is elected once its
  lease ends in etcd and takes over, and the clients follow it there, re-attaching
  their sessions. The dead one is restarted on its data 0.5-1.5 s after the
  successor leads (it comes back as a standby);
* ``sigstop-holder``: a worker inside a critical section's body (its grant seen, its
  last fenced write not yet made) is stopped, then the leader is killed
  (a ``kill-9-leader`` of its own, its failover measured as ``sigstop-holder``'s).
  The successor starts every session's window afresh when it takes over, so the
  worker stays stopped for a window (and 1-2 s) past the takeover: its session
  expires on the new leader, another client is granted the lock with a greater
  token and writes; when the worker runs again, its thread writes with the old
  token, which the fenced resource must refuse (and its body must be cancelled by
  the loss);
* ``cut-leader-from-etcd``: the leader's links to etcd stalled (its proxies; its
  clients still reach it) for its lease TTL and 0.5-1.5 s more: it must stop
  serving before its lease could end, a standby is elected, and once healed the old
  leader, a standby now, follows the log again;
* ``sigstop-leader``: the leader stopped past its lease (the TTL and 1-2 s); a
  standby takes over, and on waking the old leader must step down;
* ``kill-9-all``: every server and every etcd member killed at once, all started
  again at once on their data;
* ``kill-9-etcd-leader``: etcd's leader killed, restarted on its data after 0.5-1.5 s
  (etcd elects another; the servers' calls fail over to the members left);
* ``kill-9-standby``: a server that does not lead, restarted after 0.5-1.5 s;
* ``outage-all``: everything killed, and down for the recovery window and 1-2 s
  more: the clients give their sessions up on their own clocks.

After a fault that deposes the leader the nemesis notes ``elected`` (the fault, the
time it began, the successor and when it began to lead: its log) or ``no-leader``
when no server leads within :data:`ELECTION_WAIT`; after one that leaves the old
leader alive (cut off, paused), ``deposed`` (whether, and when, it said it stepped
down; bounded by :data:`STEP_DOWN_WAIT`). :mod:`tools.faults.check_failover` measures
and judges them. Each fault ends with every server and etcd member running again,
and a leader (notes ``restart``, or ``restart-failed``: a checker rule).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from tools.faults.history import now
from tools.faults.nemesis import Stage, resume_worker, sleep_until, stop_holder, stop_in_body
from tools.faults.target import START_WAIT, Replicated, as_replicated

#: Bound of the wait for a successor after the leader was deposed, in seconds.
ELECTION_WAIT: Final = START_WAIT
#: Bound of the wait for a deposed leader (resumed, or back in touch with etcd) to say
#: that it stepped down, in seconds.
STEP_DOWN_WAIT: Final = 10.0

FailoverFault = Callable[[Stage, Replicated], Awaitable[None]]


async def _leader(stage: Stage, target: Replicated) -> str | None:
    """The leader now; None, noted, if none leads within :data:`ELECTION_WAIT` (the
    last fault ended with one, but it may have lost its lease since, under load)."""
    leader = await asyncio.to_thread(target.leader, timeout=ELECTION_WAIT)
    if leader is None:
        stage.note("no-leader", before="a fault", waited=ELECTION_WAIT)
    return leader


async def _successor(
    stage: Stage, target: Replicated, fault: str, deposed: str, since: float
) -> float | None:
    """Wait for a server other than ``deposed`` to lead; note it; when it began to lead."""
    new = await asyncio.to_thread(target.leader, excluding=[deposed], timeout=ELECTION_WAIT)
    if new is None:
        stage.note("no-leader", fault=fault, deposed=deposed, since=since, waited=ELECTION_WAIT)
        return None
    led = await asyncio.to_thread(target.led_since, new, since)
    # A server logs that it leads before /readyz says so: None is only a fallback.
    led = now() if led is None else led
    stage.note("elected", fault=fault, member=new, deposed=deposed, since=since, led=led)
    return led


async def _stepped_down(
    stage: Stage, target: Replicated, fault: str, name: str, since: float
) -> None:
    """Note whether (and when) the deposed leader ``name`` said it stepped down."""
    deadline = now() + STEP_DOWN_WAIT
    when = await asyncio.to_thread(target.stepped_down_since, name, since)
    while when is None and now() < deadline:
        await asyncio.sleep(0.1)
        when = await asyncio.to_thread(target.stepped_down_since, name, since)
    stage.note("deposed", fault=fault, member=name, since=since, stepped_down=when)


async def _kill_leader(
    stage: Stage, target: Replicated, measured_as: str = "kill-9-leader"
) -> float | None:
    """Kill the leader and wait for its successor; when the successor began to lead.

    ``measured_as``: the kind its failover is measured under (the ``elected`` note's
    fault). A ``sigstop-holder`` kill is measured apart: the stopped worker's sessions
    live a window past the takeover, and when its clients hold (or head the queues
    of) every key the others wait for, the first grant is theirs only once those
    sessions end, a window after the takeover. That was the fault suite's one 10.3 s
    "kill-9-leader" failover (an election of 2.3 s and the window of 8 s): no client
    waited for a leader that long.
    """
    leader = await _leader(stage, target)
    if leader is None:
        return None
    await asyncio.to_thread(target.kill_server, leader)
    since = stage.fault("kill-9-leader", member=leader)
    return await _successor(stage, target, measured_as, leader, since)


async def _kill_9_leader(stage: Stage, target: Replicated) -> None:
    await _kill_leader(stage, target)
    await asyncio.sleep(stage.rng.uniform(0.5, 1.5))


async def _sigstop_holder(stage: Stage, target: Replicated) -> None:
    caught = await stop_in_body(stage)
    if caught is None:  # nobody seen in a body for seconds: a holder, as the server sees it
        index, holding = await stop_holder(stage)
    else:
        index, holding = caught, True
    stage.fault(
        "sigstop-holder" if holding else "sigstop", worker=index, in_body=caught is not None
    )
    try:
        led = await _kill_leader(stage, target, "sigstop-holder")
        await restore(stage, target)  # the old leader back, as a standby, meanwhile
        # The successor started the stopped worker's window afresh when it took over.
        await sleep_until((led or now()) + stage.window + stage.rng.uniform(1.0, 2.0))
    finally:
        resume_worker(stage, index)
    stage.note("healed", fault="sigstop", worker=index)


async def _cut_leader(stage: Stage, target: Replicated) -> None:
    await depose(stage, target, "cut-leader-from-etcd", target.cut_from_etcd, (0.5, 1.5))


async def _sigstop_leader(stage: Stage, target: Replicated) -> None:
    await depose(stage, target, "sigstop-leader", target.pause_server, (1.0, 2.0))


async def depose(
    stage: Stage,
    target: Replicated,
    fault: str,
    act: Callable[[str, bool], None],
    past: tuple[float, float],
) -> None:
    """Keep the leader from renewing its lease (``act(leader, True)``) until a
    successor leads and a lease TTL and ``past`` seconds more went by, then let it go
    (``act(leader, False)``): it must step down and stand by."""
    leader = await _leader(stage, target)
    if leader is None:
        return
    await asyncio.to_thread(act, leader, True)
    since = stage.fault(fault, member=leader)
    try:
        await _successor(stage, target, fault, leader, since)
        await sleep_until(since + target.lease_ttl + stage.rng.uniform(*past))
    finally:
        await asyncio.to_thread(act, leader, False)
    stage.note("healed", fault=fault, member=leader)
    await _stepped_down(stage, target, fault, leader, since)


async def _kill_all(stage: Stage, target: Replicated) -> None:
    await asyncio.to_thread(target.kill)
    stage.fault("kill-9-all", servers=target.servers, etcd=target.etcd_members)


async def _outage_all(stage: Stage, target: Replicated) -> None:
    await asyncio.to_thread(target.kill)
    down = stage.window + stage.rng.uniform(1.0, 2.0)
    stage.fault("outage-all", servers=target.servers, etcd=target.etcd_members, down=down)
    await asyncio.sleep(down)


async def _kill_etcd_leader(stage: Stage, target: Replicated) -> None:
    name = await asyncio.to_thread(target.etcd_leader)
    if name is None:  # no agreed leader (an election under way): a member stands in
        name = stage.rng.choice(target.etcd_members)
    await asyncio.to_thread(target.kill_etcd_member, name)
    stage.fault("kill-9-etcd-leader", member=name)
    await asyncio.sleep(stage.rng.uniform(0.5, 1.5))


async def _kill_standby(stage: Stage, target: Replicated) -> None:
    leader = await _leader(stage, target)
    standbys = [name for name in target.running_servers() if name != leader]
    if not standbys:
        return
    name = stage.rng.choice(standbys)
    await asyncio.to_thread(target.kill_server, name)
    stage.fault("kill-9-standby", member=name)
    await asyncio.sleep(stage.rng.uniform(0.5, 1.5))


#: The faults, in the first round's order.
FAILOVER_FAULTS: Final[dict[str, FailoverFault]] = {
    "kill-9-leader": _kill_9_leader,
    "sigstop-holder": _sigstop_holder,
    "cut-leader-from-etcd": _cut_leader,
    "sigstop-leader": _sigstop_leader,
    "kill-9-all": _kill_all,
    "kill-9-etcd-leader": _kill_etcd_leader,
    "kill-9-standby": _kill_standby,
    "outage-all": _outage_all,
}
#: Faults that depose the leader themselves (later rounds kill it before the others).
_DEPOSING: Final = frozenset({"kill-9-leader", "sigstop-holder"})


async def restore(stage: Stage, target: Replicated) -> None:
    """Start whatever is down (etcd first: the servers need it), then wait for a leader.

    A server found down that no fault killed is noted ``server-died`` first.
    """
    etcd = [m for m in target.etcd_members if m not in target.running_etcd_members()]
    servers = [s for s in target.servers if s not in target.running_servers()]
    note_deaths(stage, target)
    if not etcd and not servers:
        return
    try:
        if etcd:
            await asyncio.to_thread(target.start_etcd_members, etcd)
        if servers:
            await asyncio.to_thread(target.start_servers, servers)
    except (RuntimeError, OSError) as error:
        stage.note("restart-failed", servers=servers, etcd=etcd, error=str(error))
        return
    stage.note("restart", servers=servers, etcd=etcd, pid=target.pid)


def _rounds(stage: Stage, first: bool) -> list[str]:
    """One round's faults, in order (see the module docstring)."""
    names = list(FAILOVER_FAULTS)
    if first:
        return names
    others = [name for name in names if name != "kill-9-leader"]
    stage.rng.shuffle(others)
    return [
        step
        for name in others
        for step in ((name,) if name in _DEPOSING else ("kill-9-leader", name))
    ]


async def failover(stage: Stage, until: float) -> None:
    """One fault of :data:`FAILOVER_FAULTS` at a time, each healed before the next."""
    target = as_replicated(stage.target)
    round_: list[str] = []
    first = True
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(1.0, 2.0))
        if now() >= until:
            break
        if not round_:
            round_ = list(reversed(_rounds(stage, first)))  # popped from the end
            first = False
        name = round_.pop()
        try:
            await FAILOVER_FAULTS[name](stage, target)
        finally:
            await restore(stage, target)
            if await asyncio.to_thread(target.leader, timeout=ELECTION_WAIT) is None:
                stage.note("no-leader", after=name, waited=ELECTION_WAIT)
        stage.note("healed", fault=name)


def note_deaths(stage: Stage, target: Replicated) -> list[str]:
    """Note ``server-died`` for each server found down that no fault killed; their names."""
    died = []
    for name in target.servers:
        why = target.died_by_itself(name)
        if why is not None:
            stage.note("server-died", member=name, why=why)
            died.append(name)
    return died
