"""The simulation's faults: drawn from the run's seed, one at a time, then healed.

Every ``GAP`` seconds (drawn) the nemesis picks a fault among its target's (weighted:
:data:`FAULTS` for a single server, :data:`CLUSTER_FAULTS` for a cluster) and a
length; each ends by itself (a timer heals it). "A server" is the single server, or
one of the cluster's members (its leader more often than not, where that matters):

* ``cut``: a client and a server hear nothing from each other (both ways, or one);
* ``reset``: every connection between a client and a server reset;
* ``slow``: the link between a client and a server slow (tens to hundreds of
  milliseconds more each way), with its connections reset at times meanwhile: what
  was answered and not yet heard is lost;
* ``crash``: a server killed (``kill -9``: what it had written stays) and started
  again after a while (a single server from its data directory, a member from etcd);
* ``power``: the same with a power loss (a single server's ``--fsync always``): its
  journal keeps what its fsyncs made durable and a torn part of the rest
  (:meth:`~tenure.testing.sim._disk.SimDisk.lose_power`);
* ``pause-server``, ``pause-client``: a process stopped (SIGSTOP, a GC pause), at times
  past the sessions' recovery window (a member's: past its lease), then resumed;
* ``clock``: a host's clock (a server's or a client's) runs at another rate for good,
  within :data:`~tenure.testing.sim._clocks.MAX_DRIFT`, or a client's jumps forward, up
  to twice the recovery window (:mod:`tenure.testing.sim._clocks`). A server's
  monotonic clock does not jump with no time passing (a stopped server's does, and
  time passed: ``pause-server``), and the promises assume it does not: the server
  counts the first quarter second of a gap in its clock as time that passed
  (docs/guarantees.md 6e), which a jump of nothing would take from a client's window;
* ``crash-client``: a client killed (its holds stay until its session expires) and
  started again after a while as a new worker of the workload;

and of a cluster only:

* ``cut-etcd``: a member and etcd hear nothing from each other (both ways, or one):
  its calls' deadlines pass, its lease is not renewed, what was held arrives after
  the heal (and is applied then);
* ``slow-etcd``: the link between a member and etcd slow, its connections reset at
  times (its calls under way fail, applied or not);
* ``etcd``: etcd's own faults: a leader change (every stream broken, every lease
  renewed), or the answers of its next calls lost after they were applied.

:meth:`Nemesis.heal` ends whatever is under way (the run's quiet end): the cuts are
healed, the paused resumed, a crashed server started.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from typing import TYPE_CHECKING, Final, Protocol

from tenure.testing.sim._clocks import MAX_DRIFT
from tenure.testing.sim._server import RestartError
from tenure.testing.sim._workload import NODE, WINDOW, SimClients, SimNotes, client_host

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop

__all__ = ["CELLS_FAULTS", "CLUSTER_FAULTS", "FAULTS", "FAULTS_OF", "Nemesis", "SimTarget"]

#: Each fault of a single server target and its weight.
FAULTS: Final = {
    "cut": 3, "reset": 2, "slow": 2, "crash": 1, "power": 1, "pause-server": 2,
    "pause-client": 2, "crash-client": 1, "clock": 1,
}  # fmt: skip
#: Each fault of a cluster target and its weight.
CLUSTER_FAULTS: Final = {
    "cut": 3, "reset": 2, "slow": 1, "crash": 2, "pause-server": 2, "pause-client": 1,
    "crash-client": 1, "clock": 1, "cut-etcd": 2, "slow-etcd": 1, "etcd": 1,
}  # fmt: skip
#: Each fault of a service of two cells and its weight: a cluster's, and the move of
#: the workload's node to the other cell (:mod:`tenure.testing.sim._cells`).
CELLS_FAULTS: Final = {**CLUSTER_FAULTS, "move": 3}
#: Each target's faults.
FAULTS_OF: Final = {"server": FAULTS, "cluster": CLUSTER_FAULTS, "cells": CELLS_FAULTS}
#: How often a fault of "a server" picks the one that leads (if one does).
LEADER_ODDS: Final = 0.6


class SimTarget(Protocol):
    """What the nemesis faults: the servers clients talk to
    (:class:`~tenure.testing.sim._server.SimServer`,
    :class:`~tenure.testing.sim._cluster.SimCluster`)."""

    #: Which target it is: ``server``, ``cluster`` or ``cells`` (:data:`FAULTS_OF`).
    kind: str

    @property
    def hosts(self) -> list[str]:
        """The servers' hosts."""
        ...

    def leaders(self) -> list[str]:
        """The servers that lead now (a single server always does)."""
        ...

    def runs(self, host: str) -> bool:
        """Whether ``host``'s server runs."""
        ...

    def kill(self, host: str, *, power: bool = False) -> tuple[int, int]:
        """Kill ``host``'s server (``power``: a power loss too); the bytes of its
        journal's tail kept and lost."""
        ...

    async def restart(self, host: str) -> None:
        """Start ``host``'s server again (RestartError: it could not)."""
        ...

    def etcd_fault(self, rng: random.Random, host: str, fault: str, length: float) -> None:
        """A fault of the cluster's etcd (``cut-etcd``, ``slow-etcd``, ``etcd``), healed
        after ``length`` seconds where it lasts (a single server has none)."""
        ...

    def move(self, node: str) -> None:
        """Move ``node`` to another cell, in the background (a service of one cell, or
        a single server: nothing)."""
        ...


#: Seconds between two faults, at random between the two.
GAP: Final = (0.5, 4.0)
#: How long a fault lasts, in seconds, at random between the two (past the window
#: at times).
LENGTH: Final = (0.1, WINDOW * 2)


class Nemesis:
    """The faults of one run (module docstring) on ``target``, drawn from ``rng``
    among ``faults`` (None: every one the target has)."""

    def __init__(
        self,
        loop: SimLoop,
        rng: random.Random,
        target: SimTarget,
        clients: SimClients,
        notes: SimNotes,
        faults: tuple[str, ...] | None = None,
    ) -> None:
        self.weights = FAULTS_OF[target.kind]
        faults = tuple(self.weights) if faults is None else faults
        unknown = set(faults) - set(self.weights)
        if unknown:
            known = ", ".join(self.weights)
            raise ValueError(f"no fault {sorted(unknown)[0]!r} (one of {known})")
        self.faults = faults
        self.loop = loop
        self.rng = rng
        self.target = target
        self.clients = clients
        self.notes = notes
        self._paused: set[str] = set()
        #: How many of each fault were made.
        self.counts: dict[str, int] = dict.fromkeys(faults, 0)
        #: The server could not start again (what it said): the run ends there.
        self.broken: str | None = None

    async def run(self, until: float) -> None:
        """Make faults until ``until`` (simulated seconds), each healed in its time."""
        names = list(self.faults)
        weights = [self.weights[name] for name in names]
        while names:
            await asyncio.sleep(self.rng.uniform(*GAP))
            if self.loop.now() >= until or self.broken is not None:
                return
            fault = self.rng.choices(names, weights)[0]
            length = self.rng.uniform(*LENGTH)
            await self._make(fault, length)
            self.counts[fault] += 1

    def _server(self) -> str:
        """A server to fault: the leader more often than not (module docstring)."""
        leaders = self.target.leaders()
        if leaders and self.rng.random() < LEADER_ODDS:
            return self.rng.choice(leaders)
        return self.rng.choice(self.target.hosts)

    async def _make(self, fault: str, length: float) -> None:
        number = self.rng.randrange(self.clients.clients)
        client = client_host(number)
        server = self._server()
        network = self.loop.network
        self.notes.note("nemesis", fault, seconds=length, client=client, server=server)
        if fault == "cut":
            both = self.rng.random() < 0.5
            host, other = (client, server)
            if not both and self.rng.random() < 0.5:
                host, other = other, host
            network.cut(host, other, both=both)
            self._later(length, lambda: network.heal(host, other))
        elif fault == "reset":
            network.reset(client, server)
        elif fault == "slow":
            network.slow(client, server, self.rng.uniform(0.02, 0.5))
            self._later(length, lambda: network.heal(client, server))
            for _ in range(self.rng.randrange(3)):
                when = self.rng.uniform(0.0, length)
                self._later(when, lambda: network.reset(client, server))
        elif fault in ("cut-etcd", "slow-etcd", "etcd"):
            self.target.etcd_fault(self.rng, server, fault, length)
        elif fault == "move":
            self.target.move(NODE)
        elif fault == "clock":
            host = server if self.rng.random() < 0.3 else client
            if self.rng.random() < 0.5 and host == client:  # (a server's only drifts)
                self.loop.jump_clock(host, length)
            else:
                self.loop.drift_clock(host, 1 + self.rng.uniform(-MAX_DRIFT, MAX_DRIFT))
        elif fault == "crash-client":
            if number in self.clients.tasks:
                self._paused.discard(client)
                self.clients.crash(number)
                self._later(length, lambda: self._restart(number))
        elif fault in ("crash", "power"):
            if self.target.runs(server):
                self._paused.discard(server)
                kept, lost = self.target.kill(server, power=fault == "power")
                if fault == "power":
                    self.notes.note("nemesis", "torn", kept=kept, lost=lost)
                await asyncio.sleep(length)
                await self._start(server)
        else:
            host = server if fault == "pause-server" else client
            if host == server and not self.target.runs(server):
                return
            if self.loop.processes.current[host] in self.loop.processes.paused:
                return  # (paused already, by its own pauses)
            self._paused.add(host)
            self.loop.pause(host)
            self._later(length, lambda: self._resume(host))

    async def _start(self, host: str) -> None:
        """Start a server again; one that cannot is a finding that ends the run."""
        try:
            await self.target.restart(host)
        except RestartError as error:
            self.broken = str(error)
            self.notes.note("harness", "restart-failed", error=str(error))

    def _restart(self, number: int) -> None:
        if number not in self.clients.tasks and not self.clients.stop.is_set():
            self.clients.restart(number)

    def _resume(self, host: str) -> None:
        if host in self._paused:
            self._paused.discard(host)
            self.loop.resume(host)

    def _later(self, seconds: float, action: object) -> None:
        # (no process's: a paused one's timers are held back)
        self.loop.call_later(seconds, action, context=contextvars.Context())  # type: ignore[arg-type]

    async def heal(self) -> None:
        """End every fault under way (module docstring)."""
        self.loop.network.heal()
        for host in sorted(self._paused):
            self._resume(host)
        for host in self.target.hosts:
            if not self.target.runs(host) and self.broken is None:
                await self._start(host)
        for number in range(self.clients.clients):
            self._restart(number)
