"""The simulation's workload: the linearizable workload's clients, each a process.

Each client is :class:`tenure.testing.workload.LinClient` (the fault suite's, the same
steps and recording rules) in a simulated process of its own (host ``c<n>``): the
network's faults and the nemesis's pauses reach each client alone. Its history goes
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
from tenure.testing.workload import Books, LinClient, LinConfig

if TYPE_CHECKING:
    from tenure.testing.sim._loop import SimLoop

__all__ = ["NODE", "REGISTERS", "SimNotes", "SimPauses", "create_keys", "start_clients"]

#: The node every key lives in.
NODE: Final = "sim"
#: The keys of each model (few: clients meet on them).
REGISTERS: Final = ["reg-0", "reg-1"]
COUNTERS: Final = ["cnt-0"]
MUTEXES: Final = ["mtx-0", "mtx-1"]
GROUPS: Final = ["grp-0"]
MEMBER_IDS: Final = ["id-0", "id-1", "id-2", "id-3"]
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
            self.notes.append(SimNote(self.loop.time(), process, kind, fields))

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

    def maybe(self, rng: random.Random, holder: str) -> None:
        """Stop the client's process now (from its next await) if a pause is due."""
        if self.every <= 0 or self.loop.time() - self.last < self.every:
            return
        seconds = WINDOW + rng.uniform(0.5, 1.5)
        self.notes.note(holder, "pause", seconds=seconds)
        self.loop.pause(self.host)
        # (its own timer would be held back with it: the resumption is no process's)
        self.loop.call_later(seconds, self.loop.resume, self.host, context=contextvars.Context())
        self.last = self.loop.time() + seconds


async def create_keys(url: str) -> None:
    """The node and the registers (data ``0``), as the fault suite's harness makes them."""
    async with tenure.connect(url) as client:
        with contextlib.suppress(AlreadyExistsError):
            await client.create_node(NODE)
        async with await client.session(NODE) as session:
            for name in REGISTERS:
                with contextlib.suppress(AlreadyExistsError):
                    await session.semaphore(name).create(limit=1, data=b"0")


def client_host(number: int) -> str:
    """The host (and process name) of client ``number``."""
    return f"c{number}"


def start_clients(
    loop: SimLoop,
    url: str,
    out_dir: Path,
    seed: int,
    clients: int,
    notes: SimNotes,
    stop: asyncio.Event,
) -> tuple[list[asyncio.Task[None]], Books]:
    """Start ``clients`` clients, each in a process of its own, until ``stop``; their
    tasks, and the books they record in (closed by the caller)."""
    config = LinConfig(
        index=0, doors=[url], node=NODE, clients=clients, out_dir=str(out_dir), history="",
        seed=seed, registers=REGISTERS, counters=COUNTERS, mutexes=MUTEXES, groups=GROUPS,
        member_ids=MEMBER_IDS, window=WINDOW, op_timeout=5.0,
    )  # fmt: skip
    books = Books(out_dir, 0, lambda: round(loop.time() * 1e9))
    tasks = []
    for number in range(clients):
        host = client_host(number)
        pauses = SimPauses(loop, host, PAUSE_EVERY if number == 0 else 0.0, notes)
        client = LinClient(config, number, books, pauses, notes)
        process = loop.processes.new(host)
        tasks.append(loop.processes.spawn(process, client.run(stop)))
    return tasks, books
