"""What one worker of the linearizable workload is given (written as JSON by the fault
suite's ``linearizable`` scenario; made in-process by the simulation).

Each client of a worker reaches the service through its *door*: one address of the
target (a cluster's member: its reads and writes go there first, and follow the
leader it names from there), or every address at once. :attr:`LinConfig.doors` lists
the URLs, each single door and then all of them; client ``n`` of worker ``i`` takes
the ``(i * clients + n)``-th, round the list, so every door has clients and some
have every door. Given :attr:`LinConfig.max_staleness`, a client of every door also
reads the registers stale (:meth:`LinConfig.reads_standbys`): a cluster's standbys
answer those.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from tenure.errors import AlreadyExistsError
from tenure.testing.workload._books import SEMAPHORES

if TYPE_CHECKING:
    from tenure.client import Session

#: The semaphores the native clients hold (their limits: :data:`SEMAPHORES`).
NATIVE_SEMAPHORES: Final = ["sem-0"]
#: What a register holds when it is made (the register model starts from ``0``).
REGISTER_START: Final = b"0"


async def create_keys(session: Session, registers: Iterable[str]) -> None:
    """Make the workload's keys in ``session``'s node, as every run of it needs them:
    ``registers`` (data :data:`REGISTER_START`) and :data:`NATIVE_SEMAPHORES` (their
    limits :data:`SEMAPHORES`'). One already there is kept."""
    for name in registers:
        with contextlib.suppress(AlreadyExistsError):
            await session.semaphore(name).create(limit=1, data=REGISTER_START)
    for name in NATIVE_SEMAPHORES:
        with contextlib.suppress(AlreadyExistsError):
            await session.semaphore(name).create(limit=SEMAPHORES[name])


@dataclass
class LinConfig:
    """One worker's clients, keys and bounds (see the module docstring)."""

    index: int
    #: The URLs of the doors a client may be given (module docstring).
    doors: list[str]
    node: str
    clients: int
    #: Where the lincheck files go (:mod:`tenure.testing.workload._books`).
    out_dir: str
    #: The suite's history file of the worker's notes (client errors, pauses).
    history: str
    seed: int
    registers: list[str]
    counters: list[str]
    mutexes: list[str]
    groups: list[str]
    member_ids: list[str]
    #: Semaphores of :data:`~tenure.testing.workload.SEMAPHORES`'s limits, held a count
    #: at a time (none: no semaphore steps), and elections (none: no election steps).
    #: The harness makes each semaphore; an election makes itself.
    semaphores: list[str] = field(default_factory=list)
    elections: list[str] = field(default_factory=list)
    #: The names claimed for slots (none: no claim steps; a claim makes its semaphore).
    claims: list[str] = field(default_factory=list)
    #: The sessions' recovery window, in seconds (short: holds expire under pauses).
    window: float = 3.0
    #: Seconds a hold lasts before its release, at random between the two.
    hold: tuple[float, float] = (0.01, 0.2)
    #: Seconds a lock is waited for before the acquire gives up (``fail``).
    acquire_wait: float = 1.0
    #: Seconds one request may take before its answer counts as lost (``info``).
    op_timeout: float = 5.0
    #: Seconds between two pauses of the worker's loop past the window (0: none).
    pause_every: float = 0.0
    #: Clients (the first ones) that watch a register instead (the fault suite's
    #: :mod:`tenure.testing.workload._watcher`).
    watchers: int = 0
    #: Of the watchers, how many (the last ones) watch every register at once through a
    #: prefix cache instead (:class:`~tenure.testing.workload.PrefixWatcher`).
    prefix_watchers: int = 0
    #: Whether the target tells a hold's end that its release crossed (the hold adopted,
    #: its max_hold passed, before the release reached it: every store makes it the
    #: lease's ``lost_reason`` as ``release()`` returns, docs/guarantees.md 6g). False,
    #: for a target that does not: a hold offered for a hand-off may end untold
    #: (:mod:`tenure.testing.workload._hold_steps`).
    told_when_crossed: bool = True
    #: Operations per client at most (the loop is also bounded by the run's time).
    max_ops: int = 100_000
    #: ``host:port`` of each door that serves dflockd's protocol (none: no dflockd
    #: steps: :mod:`tenure.testing.workload._dflockd`), and the mutexes taken through it.
    dflockd: list[str] = field(default_factory=list)
    dflockd_keys: list[str] = field(default_factory=list)
    #: The YDB face's endpoint (``grpc://host:port``, where discovery begins; empty: no
    #: YDB visits; the fault suite's ``tools/faults/lin_ydb.py``).
    ydb: str = ""
    #: Seconds of staleness the stale reads of the registers allow (None: no stale
    #: reads): made by the clients of several doors (:meth:`reads_standbys`), whose
    #: reads a cluster's standbys answer (the ``stale-read-register`` step).
    max_staleness: float | None = None
    extra: dict[str, str] = field(default_factory=dict)

    def labels(self) -> list[str]:
        """The process labels of the worker's clients."""
        return [f"w{self.index}c{n}" for n in range(self.clients)]

    def door_of(self, number: int) -> str:
        """The URL client ``number`` connects through (module docstring)."""
        return self.doors[(self.index * self.clients + number) % len(self.doors)]

    def reads_standbys(self, number: int) -> bool:
        """Whether client ``number`` reads the registers stale: :attr:`max_staleness` is
        given and its door lists several addresses (a client of one door sends every
        read to the leader, whichever member that door is)."""
        return self.max_staleness is not None and "," in urlsplit(self.door_of(number)).netloc

    def dflockd_door_of(self, number: int) -> tuple[str, int]:
        """Where client ``number`` speaks dflockd's protocol (as :meth:`door_of` picks)."""
        door = self.dflockd[(self.index * self.clients + number) % len(self.dflockd)]
        host, _, port = door.rpartition(":")
        return host, int(port)

    def dump(self, path: Path) -> None:
        """Write the config as JSON."""
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> LinConfig:
        """Read a config written by :meth:`dump`."""
        data = json.loads(path.read_text())
        data["hold"] = tuple(data["hold"])
        return cls(**data)
