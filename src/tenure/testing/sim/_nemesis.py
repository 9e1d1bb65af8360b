"""The simulation's faults: drawn from the run's seed, one at a time, then healed.

Every ``GAP`` seconds (drawn) the nemesis picks a fault among :data:`FAULTS` (weighted)
and a length; each ends by itself (a timer heals it). Of a single server target:

* ``cut``: a client and the server hear nothing from each other (both ways, or one);
* ``reset``: every connection between a client and the server reset;
* ``slow``: the link between a client and the server slow (tens to hundreds of
  milliseconds more each way), with its connections reset at times meanwhile: what
  was answered and not yet heard is lost;
* ``crash``: the server killed (``kill -9``: what it had written stays) and started
  again from its data directory after a while;
* ``power``: the same with a power loss (``--fsync always``): its journal keeps what
  its fsyncs made durable and a torn part of the rest
  (:meth:`~tenure.testing.sim._disk.SimDisk.lose_power`);
* ``pause-server``, ``pause-client``: a process stopped (SIGSTOP, a GC pause), at times
  past the sessions' recovery window, then resumed;
* ``clock``: a host's clock (the server's or a client's) jumps forward, up to twice
  the recovery window, or runs at another rate for good, within
  :data:`~tenure.testing.sim._clocks.MAX_DRIFT` (:mod:`tenure.testing.sim._clocks`);
* ``crash-client``: a client killed (its holds stay until its session expires) and
  started again after a while as a new worker of the workload.

:meth:`Nemesis.heal` ends whatever is under way (the run's quiet end): the cuts are
healed, the paused resumed, a crashed server started.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
from typing import TYPE_CHECKING, Final

from tenure.testing.sim._clocks import MAX_DRIFT
from tenure.testing.sim._server import RestartError, SimServer
from tenure.testing.sim._workload import WINDOW, SimClients, SimNotes, client_host

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop

__all__ = ["FAULTS", "Nemesis"]

#: Each fault and its weight.
FAULTS: Final = {
    "cut": 3, "reset": 2, "slow": 2, "crash": 1, "power": 1, "pause-server": 2,
    "pause-client": 2, "crash-client": 1, "clock": 1,
}  # fmt: skip
#: Seconds between two faults, at random between the two.
GAP: Final = (0.5, 4.0)
#: How long a fault lasts, in seconds, at random between the two (past the window
#: at times).
LENGTH: Final = (0.1, WINDOW * 2)


class Nemesis:
    """The faults of one run (module docstring), drawn from ``rng``."""

    def __init__(
        self,
        loop: SimLoop,
        rng: random.Random,
        server: SimServer,
        clients: SimClients,
        notes: SimNotes,
        faults: tuple[str, ...] = tuple(FAULTS),
    ) -> None:
        unknown = set(faults) - set(FAULTS)
        if unknown:
            raise ValueError(f"no fault {sorted(unknown)[0]!r} (one of {', '.join(FAULTS)})")
        self.faults = faults
        self.loop = loop
        self.rng = rng
        self.server = server
        self.clients = clients
        self.notes = notes
        self._paused: set[str] = set()
        #: How many of each fault were made.
        self.counts: dict[str, int] = dict.fromkeys(faults, 0)
        #: The server could not start again (what it said): the run ends there.
        self.broken: str | None = None

    async def run(self, until: float) -> None:
        """Make faults until ``until`` (simulated seconds), each healed in its time."""
        names, weights = list(self.faults), [FAULTS[name] for name in self.faults]
        while names:
            await asyncio.sleep(self.rng.uniform(*GAP))
            if self.loop.now() >= until or self.broken is not None:
                return
            fault = self.rng.choices(names, weights)[0]
            length = self.rng.uniform(*LENGTH)
            await self._make(fault, length)
            self.counts[fault] += 1

    async def _make(self, fault: str, length: float) -> None:
        number = self.rng.randrange(self.clients.clients)
        client = client_host(number)
        network = self.loop.network
        self.notes.note("nemesis", fault, seconds=length, client=client)
        if fault == "cut":
            both = self.rng.random() < 0.5
            host, other = (client, self.server.host)
            if not both and self.rng.random() < 0.5:
                host, other = other, host
            network.cut(host, other, both=both)
            self._later(length, lambda: network.heal(host, other))
        elif fault == "reset":
            network.reset(client, self.server.host)
        elif fault == "slow":
            network.slow(client, self.server.host, self.rng.uniform(0.02, 0.5))
            self._later(length, lambda: network.heal(client, self.server.host))
            for _ in range(self.rng.randrange(3)):
                when = self.rng.uniform(0.0, length)
                self._later(when, lambda: network.reset(client, self.server.host))
        elif fault == "clock":
            host = self.server.host if self.rng.random() < 0.3 else client
            if self.rng.random() < 0.5:
                self.loop.jump_clock(host, length)
            else:
                self.loop.drift_clock(host, 1 + self.rng.uniform(-MAX_DRIFT, MAX_DRIFT))
        elif fault == "crash-client":
            if number in self.clients.tasks:
                self._paused.discard(client)
                self.clients.crash(number)
                self._later(length, lambda: self._restart(number))
        elif fault in ("crash", "power"):
            if self.server.running:
                kept, lost = self.server.crash(power=fault == "power")
                if fault == "power":
                    self.notes.note("nemesis", "torn", kept=kept, lost=lost)
                await asyncio.sleep(length)
                await self._start()
        else:
            host = self.server.host if fault == "pause-server" else client
            if host == self.server.host and not self.server.running:
                return
            if self.loop.processes.current[host] in self.loop.processes.paused:
                return  # (paused already, by its own pauses)
            self._paused.add(host)
            self.loop.pause(host)
            self._later(length, lambda: self._resume(host))

    async def _start(self) -> None:
        """Start the server again; one that cannot is a finding that ends the run."""
        try:
            await self.server.start()
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
        if not self.server.running and self.broken is None:
            await self._start()
        for number in range(self.clients.clients):
            self._restart(number)
