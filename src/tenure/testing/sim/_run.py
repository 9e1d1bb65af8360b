"""One simulated run: a seed, a target and a length in; a history, its hash and the
verdicts out.

A run (:func:`run_seed`) on target ``server``: a tenure server (:class:`SimServer`); on
target ``cluster``: three members of a cluster over the simulated etcd
(:class:`~tenure.testing.sim._cluster.SimCluster`, the ``etcd`` extra), once one leads.
Then the node and registers made, :attr:`SimOptions.clients` clients of the linearizable
workload (:mod:`tenure.testing.sim._workload`) for :attr:`SimOptions.minutes` of
simulated time, the nemesis's faults (:mod:`tenure.testing.sim._nemesis`) all along
but the last :data:`QUIET` seconds, when everything is healed and every client must
make progress again. Then the clients stop, the servers are killed, and the history is
judged (:mod:`tenure.testing.sim._verdicts`).

The **history sha256** is that of every model's merged history (lincheck's events,
times in simulated nanoseconds), in the order of the models: one seed and one set of
options give one hash, on any machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import random
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast

from tenure.server import FsyncMode
from tenure.testing.sim._chance import seeded
from tenure.testing.sim._loop import SimDeadlockError, SimLivelockError, SimLoop
from tenure.testing.sim._mutants import planted
from tenure.testing.sim._nemesis import FAULTS, FAULTS_OF, Nemesis, SimTarget
from tenure.testing.sim._server import SERVER_PORT, SimServer
from tenure.testing.sim._verdicts import Verdicts, judge, merged_histories, watched
from tenure.testing.sim._workload import NODE, SimClients, SimNotes, create_keys

if TYPE_CHECKING:
    from tenure.testing.sim._cells import SimCells

__all__ = ["QUIET", "TARGETS", "SimOptions", "SimResult", "end_every_task", "run_seed"]

#: The targets a run can simulate.
TARGETS: Final = ("server", "cluster", "cells")
#: Simulated seconds a service of cells is given, once each cell leads, for every
#: member's record to be in the directory (each writes it every second).
CELLS_KNOWN_WAIT: Final = 2.0
#: Simulated seconds a cluster is given to elect its first leader.
FIRST_LEADER_WAIT: Final = 60.0
#: Seconds at the end of a run with no fault, in which every client must progress.
QUIET: Final = 15.0
#: Frames an unhandled exception's verdict names (the innermost).
UNHANDLED_FRAMES: Final = 6
#: Rounds of :func:`end_every_task` (each ends the tasks the last one's started).
END_ROUNDS: Final = 10
#: The loggers whose lines a run keeps in its directory (:func:`_logs_kept`).
LOGGERS: Final = ("tenure", "dflockd_client")
#: Seconds the clients are given to stop once told.
STOP_WAIT: Final = 30.0


@dataclass(frozen=True)
class SimOptions:
    """What a run is: its seed and the options that, with it, decide everything."""

    seed: int
    target: str = "server"
    #: Simulated minutes of workload (the quiet end included).
    minutes: float = 1.0
    clients: int = 8
    #: The faults the nemesis draws from (None: every fault of the target,
    #: :data:`~tenure.testing.sim._nemesis.FAULTS_OF`).
    faults: tuple[str, ...] | None = None
    #: The server's ``--fsync`` (``always``: the simulated disk's fsyncs).
    fsync: str = "always"
    #: A bug put back for the run (:mod:`tenure.testing.sim._mutants`), or None.
    mutant: str | None = None
    #: Whether the clients also take mutexes through dflockd's face, with
    #: ``dflockd-client`` (:mod:`tenure.testing.workload._dflockd`; a single server's).
    dflockd: bool = False

    def command(self) -> str:
        """The command that runs this again."""
        words = [
            "python", "-m", "tenure.testing.sim", "--seed", str(self.seed),
            "--target", self.target,
            "--minutes", f"{self.minutes:g}", "--clients", str(self.clients),
        ]  # fmt: skip
        if self.faults is not None and self.faults != self.every_fault():
            words += ["--faults", ",".join(self.faults) or "none"]
        if self.fsync != "always":
            words += ["--fsync", self.fsync]
        if self.mutant:
            words += ["--mutant", self.mutant]
        if self.dflockd:
            words += ["--dflockd"]
        return " ".join(words)

    def every_fault(self) -> tuple[str, ...]:
        """Every fault of the target."""
        return tuple(FAULTS_OF.get(self.target, FAULTS))

    def chosen_faults(self) -> tuple[str, ...]:
        """The faults the nemesis draws from."""
        return self.every_fault() if self.faults is None else self.faults


@dataclass
class SimResult:
    """What a run found."""

    options: SimOptions
    #: The history sha256 (module docstring).
    digest: str
    verdicts: Verdicts
    #: Simulated seconds the run lasted, and the CPU seconds it took.
    simulated: float
    cpu: float
    faults: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every verdict held."""
        return not self.verdicts.violations

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON-ready data."""
        return {
            "seed": self.options.seed,
            "target": self.options.target,
            "mutant": self.options.mutant,
            "digest": self.digest,
            "ok": self.ok,
            "violations": self.verdicts.violations,
            "operations": self.verdicts.operations,
            "simulated_seconds": round(self.simulated, 3),
            "cpu_seconds": round(self.cpu, 3),
            "faults": self.faults,
        }


def run_seed(options: SimOptions, work_dir: Path | None = None) -> SimResult:
    """Run ``options`` once, in ``work_dir`` (a temporary directory if None)."""
    if options.target not in TARGETS:
        raise ValueError(f"unknown target {options.target!r} (one of {', '.join(TARGETS)})")
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="tenure-sim-") as tmp:
            return run_seed(options, Path(tmp))
    work_dir.mkdir(parents=True, exist_ok=True)
    with seeded(options.seed), planted(options.mutant), _logs_kept(work_dir / "server.log"):
        return _run(options, work_dir)


def _run(options: SimOptions, work_dir: Path) -> SimResult:
    started = time.process_time()
    loop = SimLoop(options.seed, host="harness")
    unhandled = _Unhandled()
    loop.set_exception_handler(unhandled.handle)
    notes = SimNotes(loop)
    ended = _Ended()
    try:
        loop.run_until_complete(_main(loop, options, work_dir, notes, ended))
    except (SimDeadlockError, SimLivelockError) as error:
        notes.note("harness", "stuck", error=f"{type(error).__name__}: {error}")
        notes.closed = True
        loop.crash_all()  # (what spun stops with them)
    finally:
        notes.closed = True  # (what the ends of its processes say is not of the run)
        loop.run_until_complete(end_every_task(loop))
        loop.close()
        loop.processes.forget_the_dead()
    histories = merged_histories(work_dir / "lin")
    seen = watched(work_dir / "lin")
    verdicts = judge(histories, seen, notes, unhandled.errors, QUIET, ended.operating, ended.dead)
    digest = hashlib.sha256()
    for model, events in histories.items():
        digest.update(model.encode() + b"\n")
        for event in events:
            digest.update(json.dumps(event, sort_keys=True).encode() + b"\n")
    for record in seen:
        digest.update(json.dumps([record.watcher, record.key, record.armed, record.seen]).encode())
    return SimResult(
        options,
        digest.hexdigest(),
        verdicts,
        loop.now(),
        time.process_time() - started,
        ended.faults,
    )


@dataclass
class _Ended:
    """What a run's end leaves to judge it by: the faults made, the clients that
    operated at the end and those killed on the way (by their labels)."""

    faults: dict[str, int] = field(default_factory=dict)
    operating: list[str] = field(default_factory=list)
    dead: set[str] = field(default_factory=set)


async def _main(
    loop: SimLoop, options: SimOptions, work_dir: Path, notes: SimNotes, ended: _Ended
) -> None:
    lin_dir = work_dir / "lin"
    lin_dir.mkdir(parents=True, exist_ok=True)
    target, doors = await _start_target(loop, options, work_dir, notes)
    await create_keys(doors[-1])
    stop = asyncio.Event()
    clients = SimClients(loop, doors, lin_dir, options.seed, options.clients, notes, stop)
    if options.dflockd:  # (the face on the server's own port: its first byte tells)
        clients.dflockd = [f"{host}:{SERVER_PORT}" for host in target.hosts]
    clients.start()
    rng = random.Random(f"{options.seed}-nemesis")
    nemesis = Nemesis(loop, rng, target, clients, notes, options.chosen_faults())
    end = loop.now() + options.minutes * 60
    try:
        await nemesis.run(end - QUIET)
        await nemesis.heal()
        if nemesis.broken is None:
            notes.note("harness", "heal")
            await asyncio.sleep(max(0.0, end - loop.now()))
            if target.kind == "cells":  # (importing nothing of etcd's on the others)
                for wrong in await cast("SimCells", target).placement(NODE):
                    notes.note("harness", "misplaced", error=wrong)
        notes.note("harness", "stop")
        stop.set()
        _, late = await asyncio.wait(clients.running(), timeout=STOP_WAIT)
        for task in late:
            notes.note("harness", "client-stuck", task=task.get_name())
            task.cancel()
    finally:
        clients.close()
        for host in target.hosts:  # (nothing of them is judged after the stop)
            target.kill(host)
        ended.faults = nemesis.counts
        ended.operating = clients.operating()
        ended.dead = set(clients.dead)


async def _start_target(
    loop: SimLoop, options: SimOptions, work_dir: Path, notes: SimNotes
) -> tuple[SimTarget, list[str]]:
    """Start the run's servers; them, and the doors clients reach them through (the
    last: every server)."""
    if options.target == "server":
        server = SimServer(loop, work_dir / "data", fsync=FsyncMode(options.fsync))
        await server.start()
        return server, [server.url]
    from tenure.testing.sim._cluster import SimCluster  # (the etcd extra: only here)

    rng = random.Random(f"{options.seed}-etcd")
    if options.target == "cells":
        cells = _cells_class()(loop, rng, notes)
        cells.start()
        async with asyncio.timeout(FIRST_LEADER_WAIT):
            while not cells.leads_every_cell():  # noqa: ASYNC110 (as below)
                await asyncio.sleep(0.05)
        await asyncio.sleep(CELLS_KNOWN_WAIT)  # (each cell's members in the directory)
        return cells, cells.doors
    cluster = SimCluster(loop, rng)
    cluster.start()
    async with asyncio.timeout(FIRST_LEADER_WAIT):
        # (a member's role says nothing when it changes; a poll in simulated time
        # costs a few turns of the loop)
        while not cluster.leaders():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    return cluster, cluster.doors


def _cells_class() -> type[SimCells]:
    """:class:`~tenure.testing.sim._cells.SimCells` (the etcd extra: imported here)."""
    from tenure.testing.sim._cells import SimCells

    return SimCells


@contextlib.contextmanager
def _logs_kept(path: Path) -> Iterator[None]:
    """The log lines of the run (tenure's, and those of the clients it runs:
    ``dflockd-client``'s) go to ``path`` (not the terminal), in its simulated
    processes' words."""
    loggers = [logging.getLogger(name) for name in LOGGERS]
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved = [(logger.handlers[:], logger.propagate, logger.level) for logger in loggers]
    for logger in loggers:
        logger.handlers, logger.propagate = [handler], False
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, (handlers, propagate, level) in zip(loggers, saved, strict=True):
            logger.handlers, logger.propagate = handlers, propagate
            logger.setLevel(level)
        handler.close()


async def end_every_task(loop: SimLoop) -> None:
    """Cancel what is left running, and close the coroutines of crashed processes'
    tasks while the loop is open (what their ``finally`` blocks schedule is dropped:
    they are crashed; closed later, by the collector, they would call a closed loop).
    A task that a cancelled one starts on its way out (a server's step down) is ended
    the same way, in the next round (at most :data:`END_ROUNDS`)."""
    ended: set[asyncio.Task[object]] = {asyncio.current_task()}  # type: ignore[arg-type]
    for _ in range(END_ROUNDS):
        left = loop.processes.in_order(t for t in asyncio.all_tasks() if t not in ended)
        if not left:
            return
        running = []
        for task in left:
            ended.add(task)
            if loop.processes.of_task(task) in loop.processes.crashed:
                loop.processes.bury(task)
            else:
                task.cancel()
                running.append(task)
        await asyncio.gather(*running, return_exceptions=True)


class _Unhandled:
    """The loop's exception handler: what a callback or a task raised unhandled, kept
    (a crashed process's tasks, destroyed pending, are expected and left out)."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Keep what ``context`` says was raised."""
        message = str(context.get("message", ""))
        if message.startswith("Task was destroyed but it is pending"):
            return
        error = context.get("exception")
        if error is None:
            self.errors.append(message)
            return
        # Where it was raised (the last frames): a run seen once must say where to look.
        frames = traceback.extract_tb(error.__traceback__)[-UNHANDLED_FRAMES:]
        where = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
        self.errors.append(f"{message}: {error!r} at {where}" if where else f"{message}: {error!r}")
