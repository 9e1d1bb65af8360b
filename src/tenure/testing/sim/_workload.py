"""The simulation's workload: the linearizable workload's clients, each a process.

Each client is :class:`tenure.testing.workload.LinClient` (the fault suite's, the same
steps and recording rules) in a simulated process of its own (host ``c<n>``): the
network's faults and the nemesis's pauses reach each client alone. With three clients
or more, the first watches instead: one register (:class:`~tenure.testing.workload.RegisterWatcher`,
an even seed's) or every register through a prefix cache
(:class:`~tenure.testing.workload.PrefixWatcher`, an odd seed's), and what it saw is held
to the registers' linearization. Its history goes
to lincheck's files in the run's directory on the loop's clock; what is not an
operation (a lost session, a pause, a client's error) to :class:`SimNotes`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import tenure
from tenure.errors import AlreadyExistsError
from tenure.testing.workload import (
    DFLOCKD_STEPS,
    NATIVE_SEMAPHORES,
    STEPS,
    Books,
    LinClient,
    LinConfig,
    PrefixWatcher,
    RegisterWatcher,
    Resume,
    watcher,
)
from tenure.testing.workload import create_keys as create_workload_keys

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop

__all__ = [
    "NODE", "REGISTERS", "SimClients", "SimNotes", "SimPauses", "create_keys", "watchers",
]  # fmt: skip

#: The node every key lives in.
NODE: Final = "sim"
#: The keys of each model (few: clients meet on them).
REGISTERS: Final = ["reg-0", "reg-1"]
COUNTERS: Final = ["cnt-0"]
MUTEXES: Final = ["mtx-0", "mtx-1"]
GROUPS: Final = ["grp-0"]
MEMBER_IDS: Final = ["id-0", "id-1", "id-2", "id-3"]
ELECTIONS: Final = ["elc-0"]
#: The name claimed for slots (one: every claim of a run contends).
CLAIMS: Final = ["clm-0"]
#: The mutexes taken through dflockd's face (``--dflockd``).
DFLOCKD_KEYS: Final = ["dfl-0"]
#: The sessions' recovery window, in seconds.
WINDOW: Final = 3.0
#: Seconds between two pauses of the first client past the window.
PAUSE_EVERY: Final = 8.0


@dataclass
class SimNote:
    """Something a client or the nemesis did that is not an operation."""

    at: float
    process: str
    kind: str
    fields: dict[str, Any] = field(default_factory=dict)


class SimNotes:
    """A run's notes, in the order they were made (:class:`~tenure.testing.workload.Notes`)."""

    def __init__(self, loop: SimLoop) -> None:
        self.loop = loop
        self.notes: list[SimNote] = []
        #: Set when the run was cut short (a stuck loop): what its processes' ends
        #: say after that is not of the run.
        self.closed = False

    def note(self, process: str, kind: str, **fields: Any) -> None:
        """Record a note of ``kind`` by ``process``, now (unless :attr:`closed`)."""
        if not self.closed:
            self.notes.append(SimNote(self.loop.now(), process, kind, fields))

    def of(self, kind: str) -> list[SimNote]:
        """The notes of one kind."""
        return [note for note in self.notes if note.kind == kind]


class SimPauses:
    """A client's pauses (:class:`~tenure.testing.workload.Pauses`): its process stopped
    past the window, at most every ``every`` seconds, while it holds a lock."""

    def __init__(self, loop: SimLoop, host: str, every: float, notes: SimNotes) -> None:
        self.loop = loop
        self.host = host
        self.every = every
        self.notes = notes
        self.last = loop.time()

    async def maybe(self, rng: random.Random, holder: str) -> None:
        """Stop the client's process here if a pause is due: it goes on from here once
        resumed (what came due meanwhile, its deadline's timer, runs after it)."""
        if self.every <= 0 or self.loop.time() - self.last < self.every:
            return
        seconds = WINDOW + rng.uniform(0.5, 1.5)
        self.notes.note(holder, "pause", seconds=seconds)
        self.loop.pause(self.host)
        # (its own timer would be held back with it: the resumption is no process's)
        self.loop.call_later(seconds, self.loop.resume, self.host, context=contextvars.Context())
        self.last = self.loop.time() + seconds
        await asyncio.sleep(0)  # (held from here until resumed)


async def create_keys(url: str) -> None:
    """The node, and the workload's keys in it (as the fault suite's harness makes them:
    :func:`tenure.testing.workload.create_keys`)."""
    async with tenure.connect(url) as client:
        with contextlib.suppress(AlreadyExistsError):
            await client.create_node(NODE)
        async with await client.session(NODE) as session:
            await create_workload_keys(session, REGISTERS)


def watchers(clients: int) -> int:
    """How many of ``clients`` watch (the first ones): one, from three clients on."""
    return 1 if clients >= 3 else 0


def prefix_watchers(seed: int, clients: int) -> int:
    """How many of the watchers watch every register through a prefix cache: the
    watcher of an odd seed does; an even seed's watches one register."""
    return watchers(clients) if seed % 2 else 0


def client_host(number: int) -> str:
    """The host (and process name) of client ``number``."""
    return f"c{number}"


class SimClients:
    """The run's clients, each in a process of its own (module docstring), until
    ``stop``; each reaches the service through one of ``doors`` (a URL each:
    :meth:`~tenure.testing.workload.LinConfig.door_of`). A client killed
    (:meth:`crash`) is started again (:meth:`restart`) as a new worker of the workload
    (``w<generation>c<n>``: its process ids are new, its files its own), as a process
    restarted by its supervisor would be, taking its predecessor's session back."""

    def __init__(
        self,
        loop: SimLoop,
        doors: list[str],
        out_dir: Path,
        seed: int,
        clients: int,
        notes: SimNotes,
        stop: asyncio.Event,
    ) -> None:
        self.loop, self.doors, self.out_dir, self.seed = loop, doors, out_dir, seed
        self.clients, self.notes, self.stop = clients, notes, stop
        self.watchers = watchers(clients)
        self.tasks: dict[int, asyncio.Task[None]] = {}
        #: Each client's loop now (a killed one's until it is started again).
        self.runners: dict[int, LinClient | RegisterWatcher | PrefixWatcher] = {}
        #: Each client's worker generation (its label's ``w<generation>``).
        self.generation = dict.fromkeys(range(clients), 0)
        #: The labels of the clients killed (what they left unanswered is nobody's).
        self.dead: set[str] = set()
        self._books: dict[int, Books] = {}
        #: Where dflockd's face is served (``host:port``; none: no dflockd steps).
        self.dflockd: list[str] = []

    def label(self, number: int) -> str:
        """Client ``number``'s label now."""
        return f"w{self.generation[number]}c{number}"

    def operating(self) -> list[str]:
        """The labels of the clients that operate (not watch), as they are now."""
        return [self.label(n) for n in range(self.watchers, self.clients)]

    def start(self) -> None:
        """Start every client."""
        for number in range(self.clients):
            self._start(number)

    def _start(self, number: int, resume: Resume | None = None) -> None:
        generation = self.generation[number]
        config = LinConfig(
            index=generation, doors=self.doors, node=NODE, clients=self.clients,
            out_dir=str(self.out_dir), history="", seed=self.seed, registers=REGISTERS,
            counters=COUNTERS, mutexes=MUTEXES, groups=GROUPS, member_ids=MEMBER_IDS,
            semaphores=NATIVE_SEMAPHORES, elections=ELECTIONS, claims=CLAIMS, window=WINDOW,
            op_timeout=5.0,
            watchers=self.watchers, prefix_watchers=prefix_watchers(self.seed, self.clients),
            dflockd=self.dflockd, dflockd_keys=DFLOCKD_KEYS if self.dflockd else [],
        )  # fmt: skip
        steps = {**STEPS, **DFLOCKD_STEPS} if self.dflockd else STEPS
        books = self._books.get(generation)
        if books is None:
            books = Books(self.out_dir, generation, lambda: round(self.loop.now() * 1e9))
            self._books[generation] = books
        host = client_host(number)
        first = number == self.watchers  # (the first that operates pauses)
        pauses = SimPauses(self.loop, host, PAUSE_EVERY if first else 0.0, self.notes)
        runner = (
            watcher(config, number, books, self.notes)
            if number < self.watchers
            else LinClient(config, number, books, pauses, self.notes, steps, resume=resume)
        )
        self.runners[number] = runner
        process = self.loop.processes.new(host)
        self.tasks[number] = self.loop.processes.spawn(process, runner.run(self.stop))

    def crash(self, number: int) -> None:
        """Kill client ``number``'s process (its holds stay until its session expires)."""
        self.dead.add(self.label(number))
        self.loop.crash(client_host(number))
        self.tasks.pop(number, None)

    def restart(self, number: int) -> None:
        """Start client ``number`` again, as a new worker generation, which takes back
        the session its predecessor had last, by its ticket, if it had one (a process
        that restarts within the recovery window resumes with all it held)."""
        killed = self.runners.get(number)
        resume = killed.resumable() if isinstance(killed, LinClient) else None
        self.generation[number] = max(self.generation.values()) + 1
        self._start(number, resume=resume)

    def running(self) -> list[asyncio.Task[None]]:
        """The tasks of the clients alive."""
        return list(self.tasks.values())

    def close(self) -> None:
        """Close every generation's books."""
        for books in self._books.values():
            books.close()
