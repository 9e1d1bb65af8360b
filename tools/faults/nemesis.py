"""Nemeses: the faults a scenario injects, each bounded in time and ending by itself.

Every nemesis is ``async def nemesis(stage, until)``: it injects faults one after
another until the monotonic time ``until`` and returns with everything healed
that it broke (server running, network flowing, processes resumed, wall clocks true).
Each fault is recorded as notes (``fault`` when it starts, ``healed`` when it
ends) and counted in ``stage.counts``.

The server-level nemeses go through the :class:`~tools.faults.target.Target`
interface only; the network nemesis works on the per-worker fault proxies
(:class:`~tools.faults.proxies.ProxyGroup`: one proxy per address of the target);
the process and clock nemeses on worker processes; the disk nemeses
(:mod:`tools.faults.disk`) need a target whose state lives in ``data_dir``; the
member nemeses (:mod:`tools.faults.members`) a cluster.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from tools.faults.history import Recorder, now
from tools.faults.observer import Observer
from tools.faults.proxies import ProxyGroup
from tools.faults.target import Target
from tools.faults.tokens import Tenancy

NEMESIS: Final = "nemesis"


@dataclass
class Stage:
    """What the nemeses act on; made by the harness for one run."""

    target: Target
    recorder: Recorder
    rng: random.Random
    window: float
    #: The server's idle timeout (0 for a target without one: nothing to wait for).
    idle_timeout: float
    observer: Observer
    proxies: dict[int, ProxyGroup] = field(default_factory=dict)
    workers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    #: Worker index -> its libfaketime timestamp file (the workers whose clock moves).
    clock_files: dict[int, Path] = field(default_factory=dict)
    #: Of those, the workers whose monotonic clock is faked too (the rest: wall only).
    monotonic_clocks: frozenset[int] = frozenset()
    #: How far the faked monotonic clocks are ahead of true, in seconds (:func:`clock`).
    monotonic_ahead: int = 0
    #: Worker indexes the pause nemesis may stop (not the clock workers).
    pausable: list[int] = field(default_factory=list)
    #: Session id -> worker index, as far as the histories tell (set by the harness).
    owner_of: Callable[[int], int | None] = lambda session: None
    #: The workers inside a critical section's body now, as far as the histories tell
    #: (set by the harness: :meth:`~tools.faults.progress.Progress.in_body`).
    in_body: Callable[[], list[int]] = list
    counts: Counter[str] = field(default_factory=Counter)
    paused: set[int] = field(default_factory=set)
    #: The hostile-tenant scenario's server and ports (None in the other scenarios).
    tenancy: Tenancy | None = None

    def note(self, kind: str, **fields: Any) -> None:
        """Record a nemesis note."""
        self.recorder.note(NEMESIS, kind, **fields)

    def fault(self, name: str, **fields: Any) -> float:
        """Count and record the start of a fault; returns its time."""
        self.counts[name] += 1
        started = now()
        self.note("fault", t=started, fault=name, **fields)
        return started


async def sleep_until(deadline: float) -> None:
    """Sleep until the monotonic time ``deadline`` (at once if it passed)."""
    await asyncio.sleep(max(0.0, deadline - now()))


async def restart(stage: Stage) -> bool:
    """Start the server again on its state; notes ``restart`` (or ``restart-failed``)."""
    try:
        await asyncio.to_thread(stage.target.restart)
    except (RuntimeError, OSError) as error:
        stage.note("restart-failed", error=str(error))
        return False
    stage.note("restart", pid=stage.target.pid)
    return True


# -- the server process ------------------------------------------------------------------


async def crash(stage: Stage, until: float) -> None:
    """``kill -9`` the server every 3-8 s and restart it on the same data at once.

    Every third outage, from the second on, lasts longer than the recovery window:
    clients then give their sessions up, are told SessionExpiredError, and open
    new sessions once the server is back.
    """
    count = 0
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(3.0, 8.0))
        if now() >= until:
            break
        long = count % 3 == 1
        count += 1
        await asyncio.to_thread(stage.target.kill)
        if long:
            down = stage.window + stage.rng.uniform(1.0, 3.0)
            stage.fault("outage", down=down)
            await asyncio.sleep(down)
        else:
            stage.fault("kill-9")
        await restart(stage)


# -- the network between clients and server -----------------------------------------------

NetFault = Callable[[Stage, list[ProxyGroup]], Awaitable[None]]


async def _delay(stage: Stage, proxies: list[ProxyGroup]) -> None:
    for proxy in proxies:
        proxy.delay = stage.rng.uniform(0.02, 0.15)
    await asyncio.sleep(stage.rng.uniform(1.0, 3.0))
    for proxy in proxies:
        proxy.delay = 0.0


async def _reset(stage: Stage, proxies: list[ProxyGroup]) -> None:
    for proxy in proxies:
        proxy.drop()


async def _partition(stage: Stage, proxies: list[ProxyGroup], seconds: float) -> None:
    for proxy in proxies:
        proxy.stall()
    await asyncio.sleep(seconds)
    for proxy in proxies:
        proxy.resume()


async def _partition_short(stage: Stage, proxies: list[ProxyGroup]) -> None:
    await _partition(stage, proxies, stage.rng.uniform(0.2, 0.6) * stage.window)


async def _partition_long(stage: Stage, proxies: list[ProxyGroup]) -> None:
    # Longer than the window: the clients give their sessions up (promise 6a); the
    # held frames are delivered late when it heals.
    await _partition(stage, proxies, stage.window + stage.rng.uniform(0.5, 2.0))


async def _refuse(stage: Stage, proxies: list[ProxyGroup]) -> None:
    for proxy in proxies:
        proxy.refuse()
        proxy.drop()
    await asyncio.sleep(stage.rng.uniform(0.3, 1.5))
    for proxy in proxies:
        proxy.refuse(False)


async def _push_in_flight(stage: Stage, proxies: list[ProxyGroup]) -> None:
    # What the server writes (replies, Granted pushes) is lost, then the connection
    # dies: the server believes it delivered, the client never read it. Aimed at the
    # workers that wait in a queue now (their grant is the push most likely in flight).
    waiting = {
        index
        for sessions in stage.observer.waiters.values()
        for session in sessions[:2]
        if (index := stage.owner_of(session)) is not None and index in stage.proxies
    }
    proxies = [stage.proxies[index] for index in sorted(waiting)] or proxies
    for proxy in proxies:
        proxy.lose_downstream()
    await asyncio.sleep(stage.rng.uniform(0.1, 0.8))
    for proxy in proxies:
        proxy.drop()
        proxy.lose_downstream(False)


async def _partition_member(stage: Stage, groups: list[ProxyGroup]) -> None:
    # One member cut off from these workers, the others reachable: an asymmetric
    # partition. Longer than the window: the client must leave that member (its
    # calls time out and fail over) and may lose its session meanwhile, but
    # nobody may hold what it holds while it still believes it does.
    proxies = [group.busiest(stage.rng) for group in groups]
    for proxy in proxies:
        proxy.stall()
    await asyncio.sleep(stage.window + stage.rng.uniform(0.5, 2.0))
    for proxy in proxies:
        proxy.resume()


#: The network faults, with how often each comes in one round.
NET_FAULTS: Final[dict[str, tuple[NetFault, int]]] = {
    "delay": (_delay, 1),
    "reset": (_reset, 1),
    "partition-short": (_partition_short, 1),
    "partition-long": (_partition_long, 1),
    "refuse": (_refuse, 1),
    "reset-push-in-flight": (_push_in_flight, 2),
}
#: Faults that need workers reaching several members (a cluster target), likewise.
CLUSTER_NET_FAULTS: Final[dict[str, tuple[NetFault, int]]] = {
    "partition-member": (_partition_member, 1),
}


async def network(stage: Stage, until: float) -> None:
    """Every 0.5-2 s, one network fault on the proxies of a random subset of workers.

    The faults come in rounds: each round is every fault of :data:`NET_FAULTS` (as
    often as it says; and of :data:`CLUSTER_NET_FAULTS` when the workers reach
    several members) in a random order, so even a short run sees each of them.
    """
    indexes = sorted(stage.proxies)
    faults = dict(NET_FAULTS)
    if any(len(group) > 1 for group in stage.proxies.values()):
        faults.update(CLUSTER_NET_FAULTS)
    round_: list[str] = []
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(0.5, 2.0))
        if now() >= until:
            break
        if not round_:
            round_ = [name for name, (_, times) in faults.items() for _ in range(times)]
            stage.rng.shuffle(round_)
        name = round_.pop()
        chosen = stage.rng.sample(indexes, stage.rng.randint(1, len(indexes)))
        stage.fault(name, workers=chosen)
        await faults[name][0](stage, [stage.proxies[i] for i in chosen])
        stage.note("healed", fault=name)


# -- client processes ---------------------------------------------------------------------


def _signal(stage: Stage, index: int, signum: int) -> None:
    proc = stage.workers.get(index)
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signum)


#: Tries at stopping a worker that still holds (each stopped, looked at, and resumed
#: at once if it let go meanwhile) before a pause takes whichever worker it stopped.
PAUSE_TRIES: Final = 4
#: Fresh snapshots of the observer a stopped worker's holding is judged on.
PAUSE_LOOKS: Final = 2


async def pause(stage: Stage, until: float) -> None:
    """SIGSTOP a lock holder past its recovery window, then SIGCONT it.

    The holder is found in the observer's latest snapshot (any pausable worker if
    none holds). A holder holds for a fraction of a second, and the snapshot may be
    older than that, so the worker is stopped first and then looked at: if the
    observer's next snapshots show it holding nothing, it is resumed at once and
    another is tried (:data:`PAUSE_TRIES`). The pause lasts the server's idle
    timeout (until it drops the silent connection; 0 on a target that has none,
    such as etcd, where the lease runs out without it) plus the window (until the
    session expires) plus 1-3 s, so another client gets the lock meanwhile: the
    paused one's next fenced write, with its old token, must be refused, and its
    body cancelled once it runs again.
    """
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(2.0, 5.0))
        if now() >= until:
            break
        index, holding = await stop_holder(stage)
        seconds = stage.idle_timeout + stage.window + stage.rng.uniform(1.0, 3.0)
        stage.fault("sigstop-holder" if holding else "sigstop", worker=index, seconds=seconds)
        try:
            await asyncio.sleep(seconds)
        finally:
            resume_worker(stage, index)
        stage.note("healed", fault="sigstop", worker=index)


async def stop_holder(stage: Stage) -> tuple[int, bool]:
    """SIGSTOP a pausable worker that holds a lock, if one can be caught holding.

    Returns the worker stopped and whether it holds (see :func:`pause`: each one
    stopped is looked at, and resumed at once if it let go meanwhile). Resume it
    with :func:`resume_worker`.
    """
    for attempt in range(PAUSE_TRIES):
        holders = _holders(stage)
        index = stage.rng.choice(holders or stage.pausable)
        stage.paused.add(index)
        _signal(stage, index, signal.SIGSTOP)
        holding = bool(holders) and await _still_holds(stage, index)
        if holding or not holders or attempt == PAUSE_TRIES - 1:
            return index, holding
        _signal(stage, index, signal.SIGCONT)  # it let go before it stopped
        stage.paused.discard(index)
        stage.note("pause-missed", worker=index)
    raise AssertionError("unreachable: the last try returns")


#: Tries at catching a worker inside a body (a few seconds at most, see stop_in_body).
BODY_TRIES: Final = 60


async def stop_in_body(stage: Stage) -> int | None:
    """SIGSTOP a pausable worker caught inside a critical section's body; None if none was.

    Its history is read again once it stopped (it cannot move on any more): a worker
    that left its body meanwhile is resumed at once and another tried. Resume it with
    :func:`resume_worker`. Whatever it does with the lock once it runs again (a
    fenced write) is done with a token that may be stale by then.
    """
    for _ in range(BODY_TRIES):
        candidates = [index for index in stage.in_body() if index in stage.pausable]
        if candidates:
            index = stage.rng.choice(candidates)
            stage.paused.add(index)
            _signal(stage, index, signal.SIGSTOP)
            if index in stage.in_body():
                return index
            resume_worker(stage, index)
        await asyncio.sleep(0.05)
    return None


def resume_worker(stage: Stage, index: int) -> None:
    """SIGCONT a worker :func:`stop_holder` stopped."""
    _signal(stage, index, signal.SIGCONT)
    stage.paused.discard(index)


def _holders(stage: Stage) -> list[int]:
    """The pausable workers the observer's latest snapshot shows holding a lock."""
    return [
        index
        for owners in stage.observer.owners.values()
        for session, _token in owners
        if (index := stage.owner_of(session)) is not None and index in stage.pausable
    ]


async def _still_holds(stage: Stage, index: int) -> bool:
    """Whether the stopped worker ``index`` holds a lock, by the observer's next
    snapshots (taken after it stopped: it cannot let go any more); bounded."""
    seen = stage.observer.snapshots
    for _ in range(40):  # the observer looks every 0.1 s: 2 s at the most
        if stage.observer.snapshots >= seen + PAUSE_LOOKS:
            break
        await asyncio.sleep(0.05)
    return index in _holders(stage)


def _write_clock(path: Path, offset: str) -> None:
    temp = path.with_suffix(".tmp")
    temp.write_text(offset + "\n")
    os.replace(temp, path)  # whole: the worker reads the file on every clock call


def set_clock(stage: Stage, offset: str) -> None:
    """Set every faked wall clock to ``offset`` (libfaketime syntax: ``+0``, ``-1h``...).

    The faked monotonic clocks are left where they are: only :func:`clock` moves
    them, and only forward."""
    for index, path in stage.clock_files.items():
        if index not in stage.monotonic_clocks:
            _write_clock(path, offset)


#: A jump's offset (libfaketime syntax) -> its size in seconds.
JUMPS: Final = {"+1h": 3600, "-1h": 3600, "+10m": 600, "-10m": 600}


async def clock(stage: Stage, until: float) -> None:
    """Jump the faked clocks: a wall clock an hour or ten minutes forward or back, then
    back to true; a monotonic clock as far forward, for good.

    A monotonic clock never goes back (the kernel's promise for CLOCK_MONOTONIC); the
    most it does is leap forward, as a virtual machine's does when it is resumed. So
    the worker whose monotonic clock is faked leaps at every jump, by the jump's
    size, and stays ahead (fault ``clock-leap``). Moved back, its clock told it that
    no time had passed, and a client that cannot count time cannot give its lease up
    before the server ends it (promise 6a is measured on that clock): it held on to
    a mutex another client had been granted until the news of its loss arrived, and
    the timers it set while ahead were an hour away once the clock was true again
    (tools/faults/findings.md, "The monotonic clock only leaps forward").

    After a leap its worker gets SIGUSR1, which only wakes its event loop: the leap
    made its timers overdue, but a loop asleep in its poll would sleep on for the
    timeout it computed before, or until I/O arrives. The wall-clock worker gets it
    once its clock is true again (its loop runs on the true monotonic clock, so
    nothing should need it there; it costs a turn of the loop).
    """
    walls = sorted(set(stage.clock_files) - stage.monotonic_clocks)
    while now() < until:
        await asyncio.sleep(stage.rng.uniform(2.0, 4.0))
        if now() >= until:
            break
        offset = stage.rng.choice(list(JUMPS))
        stage.fault(f"clock{offset[0]}jump", offset=offset, workers=walls)
        set_clock(stage, offset)
        if stage.monotonic_clocks:
            stage.monotonic_ahead += JUMPS[offset]
            ahead = f"+{stage.monotonic_ahead}"
            stage.fault("clock-leap", offset=ahead, workers=sorted(stage.monotonic_clocks))
            for index in stage.monotonic_clocks:
                _write_clock(stage.clock_files[index], ahead)
                _signal(stage, index, signal.SIGUSR1)
        try:
            await asyncio.sleep(stage.rng.uniform(2.0, 5.0))
        finally:
            set_clock(stage, "+0")
            for index in walls:
                _signal(stage, index, signal.SIGUSR1)
        stage.note("healed", fault="clock")
