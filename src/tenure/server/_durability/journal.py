"""The engine made durable: each change is logged before anybody hears of it.

The engine is deterministic, so its state is fully described by the commands and
ticks that changed it, each with its time. The journal logs exactly those, as
records in the :class:`~tenure.server._durability.storage.DataDir`:

* ``[1, now, command]``: a command that succeeded and can change state (read-only
  commands and watches are not logged: watches belong to connections);
* ``[2, now]``: a tick that handled at least one deadline;
* ``[3, now]``: a restart: the engine was resumed on a new process's clock, whose
  time was ``now`` (fresh recovery windows and lease TTLs, see
  :func:`tenure._core.snapshot.resume`). The records after it are on that clock.

A failed command changes nothing (engine rule 1). The host ticks *before* every
command and logs that tick if it did anything, so no change is ever hidden inside
a command that was not logged.

At start-up the journal loads the newest snapshot, replays every record after it,
resumes the engine and logs that (a resume is deterministic, so a record of it
is all the next start-up needs: no snapshot is written before serving).

Snapshots bound what a start-up replays. One is due once the records since the
last number ``compact_every`` and a quarter of the state's size (sessions plus
semaphores), so writing them costs a bounded share of the work that made the
records. :meth:`Journal.start_snapshot` writes it in a forked child process, from
the child's copy of the engine as it was at the fork, while the server goes on
serving (the log moves to a new segment at that instant, see
:meth:`DataDir.begin_compaction`); :meth:`Journal.finish_snapshot` puts it in
place when the child is done. A graceful stop writes one too if the tail is long.

The host's contract: apply, then ``log_*``, then ``commit()`` (or hand
:meth:`Journal.take_pending` to the writer thread and wait for its sync), and only
then send replies and effects. Many commands may share one commit (group commit).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Final, NoReturn

import msgpack

from tenure._core import Command, Engine
from tenure._core.snapshot import dump, load, resume
from tenure.server._durability.records import (
    COMMAND_RECORD as COMMAND_RECORD,
)
from tenure.server._durability.records import (
    READ_ONLY as READ_ONLY,
)
from tenure.server._durability.records import (
    RESUME_RECORD as RESUME_RECORD,
)
from tenure.server._durability.records import (
    TICK_RECORD as TICK_RECORD,
)
from tenure.server._durability.records import (
    apply_record,
    command_record,
    resume_record,
    tick_record,
)
from tenure.server._durability.storage import Compaction, DataDir, FsyncMode

log = logging.getLogger("tenure.server")

#: A snapshot is due after at least this many records (and a quarter of the state).
COMPACT_EVERY: Final = 10_000
#: Records replayed at start-up between two looks at the event loop (:meth:`Journal.replay`).
REPLAY_STEP: Final = 2_000
#: Forking is how snapshots are written off the event loop; without it, inline.
CAN_FORK: Final = hasattr(os, "fork")


@dataclass(frozen=True, slots=True)
class _Child:
    """A process writing a snapshot, and the read end of a pipe it holds open until done."""

    pid: int
    done_fd: int
    compaction: Compaction
    records: int  # records since the previous snapshot, should this one fail
    started: float  # time.monotonic() at the fork


class Journal:
    """Logs an engine's changes to a data directory, and rebuilds the engine from it."""

    def __init__(
        self, data_dir: DataDir, *, compact_every: int = COMPACT_EVERY, background: bool = True
    ) -> None:
        if compact_every < 1:
            raise ValueError("compact_every must be at least 1")
        self.data_dir = data_dir
        self.compact_every = compact_every
        self.background = background and CAN_FORK
        self._since_snapshot = 0
        self._child: _Child | None = None
        #: Told of every snapshot put in place: (seconds since it was begun, bytes).
        self.on_snapshot: Callable[[float, int], None] | None = None

    @property
    def fsync(self) -> FsyncMode:
        """When what is logged reaches the disk (the data directory's ``--fsync``)."""
        return self.data_dir.fsync

    def open(self, now: float, *, max_nodes: int = 10_000) -> Engine:
        """Rebuild the engine from disk and put it on this process's clock (``now``).

        Raises:
            CorruptLogError: the data cannot be trusted (see DataDir), or a logged
                command no longer applies (the log and the engine disagree).
        """
        for engine in self.replay(max_nodes=max_nodes):
            if engine is not None:
                return self.resume(engine, now)
        raise AssertionError("replay() ends with the engine")  # pragma: no cover

    def replay(self, *, max_nodes: int = 10_000) -> Iterator[Engine | None]:
        """:meth:`open` a step at a time: ``None`` after every :data:`REPLAY_STEP`
        records (the server answers its HTTP endpoint in between), then the rebuilt
        engine, to be put on this process's clock with :meth:`resume`.

        Raises:
            CorruptLogError: as :meth:`open`.
        """
        recovered = self.data_dir.recover()
        with collector_paused():
            if recovered.snapshot is None:
                engine = Engine(max_nodes=max_nodes)
            else:
                # Not counted here: the host counts once it sets a quota or the
                # budget, else pauses the counting (tenure.server._serve).
                engine = load(msgpack.unpackb(recovered.snapshot, raw=False), counted=False)
        records = recovered.records
        for start in range(0, len(records), REPLAY_STEP):
            with collector_paused():
                for index in range(start, min(start + REPLAY_STEP, len(records))):
                    self._replay(engine, records[index], index)
            yield None
        self._since_snapshot = len(records)
        yield engine

    def resume(self, engine: Engine, now: float) -> Engine:
        """Put a replayed engine on this process's clock (``now``) and log that."""
        with collector_paused():
            engine.take_effects()  # everyone heard of these before the restart
            resume(engine, now)
        self._append(resume_record(now))
        self.commit()
        return engine

    def _replay(self, engine: Engine, record: bytes, index: int) -> None:
        apply_record(engine, record, f"logged record {index}", self.data_dir.path)

    def log_command(
        self, command: Command[object], now: float, actor: str = "", raw: bytes | None = None
    ) -> None:
        """Queue a record of a command that succeeded (read-only ones are skipped),
        sent by ``actor`` (its token's name), ``raw`` its bytes as a client sent them
        (None: encoded here; :func:`command_record`)."""
        record = command_record(command, now, actor, raw)
        if record is not None:  # (_append, inline: once per request served)
            self.data_dir.append(record)
            self._since_snapshot += 1

    def log_tick(self, now: float) -> None:
        """Queue a record of a tick that handled deadlines."""
        self._append(tick_record(now))

    def log_record(self, record: bytes) -> None:
        """Queue a record the host made whole (a step of a node's move between cells)."""
        self._append(record)

    def commit(self) -> None:
        """Make every queued record durable (as the fsync mode says)."""
        self.data_dir.commit()

    def take_pending(self) -> bytes:
        """The queued records' bytes, for a writer thread to commit (see DataDir.write)."""
        return self.data_dir.take_pending()

    # -- snapshots --------------------------------------------------------------------

    def needs_snapshot(self, engine: Engine | None = None) -> bool:
        """Whether a snapshot is due (see the module docstring) and none is being written."""
        if self._child is not None or self._since_snapshot < self.compact_every:
            return False
        if engine is None:
            return True
        size = len(engine.sessions) + sum(len(node.semaphores) for node in engine.nodes.values())
        return self._since_snapshot >= size // 4

    def snapshot(self, engine: Engine) -> None:
        """Write the engine's state as the new starting point and drop older records."""
        started, records = time.monotonic(), self._since_snapshot
        with collector_paused():
            data = msgpack.packb(dump(engine), use_bin_type=True)
        compaction = self.data_dir.begin_compaction()
        compaction.write(data)
        self.data_dir.finish_compaction(compaction)
        self._since_snapshot = 0
        self._written(compaction, started, records)

    @property
    def snapshot_fd(self) -> int | None:
        """While a child writes a snapshot: a file descriptor readable once it is done."""
        return None if self._child is None else self._child.done_fd

    def start_snapshot(self, engine: Engine) -> int | None:
        """Write a snapshot in a forked child; returns :attr:`snapshot_fd`.

        Without fork (or with ``background=False``) it is written here, and None
        is returned. Call :meth:`finish_snapshot` once the descriptor is readable.
        Call it with no write in flight (a writer thread drained): the log moves to
        a new segment here, after every record logged so far.
        """
        if not self.background:
            self.snapshot(engine)
            return None
        assert self._child is None, "one snapshot at a time"
        compaction = self.data_dir.begin_compaction()
        pid, read_fd = fork_snapshot(engine, compaction)
        self._child = _Child(pid, read_fd, compaction, self._since_snapshot, time.monotonic())
        self._since_snapshot = 0
        return read_fd

    def finish_snapshot(self) -> bool:
        """Wait for the child; put its snapshot in place if it wrote it whole (True).

        A child that failed leaves the older snapshot and the log as they were
        (logged as a warning): nothing is lost, start-up only replays more.
        """
        child, self._child = self._child, None
        if child is None:
            return False
        status = reap_snapshot(child.pid, child.done_fd)
        if status == 0:
            self.data_dir.finish_compaction(child.compaction)
            self._written(child.compaction, child.started, child.records)
            return True
        fields = {"status": status, "number": child.compaction.number}
        log.warning(
            "writing a snapshot failed (status %d); the log is kept",
            status,
            extra={"event": "snapshot_failed", "fields": fields},
        )
        self.data_dir.abandon_compaction(child.compaction)
        self._since_snapshot += child.records
        return False

    # -- the end ----------------------------------------------------------------------

    def close(self, engine: Engine | None = None) -> None:
        """Commit and close the data directory.

        A snapshot being written is waited for; with ``engine``, one more is
        written if the records since the last one are many (``compact_every``), so
        the next start-up does not replay them.
        """
        self.finish_snapshot()
        if engine is not None and self._since_snapshot >= self.compact_every:
            self.snapshot(engine)
        self.data_dir.close()

    def abort(self) -> None:
        """Close without committing what is queued (see DataDir.abort); stop any child."""
        child, self._child = self._child, None
        if child is not None:
            kill_snapshot(child.pid, child.done_fd)
            self.data_dir.abandon_compaction(child.compaction)
        self.data_dir.abort()

    def _written(self, compaction: Compaction, started: float, records: int) -> None:
        """A snapshot is in place: log it, and tell :attr:`on_snapshot`."""
        seconds = time.monotonic() - started
        size = compaction.final.stat().st_size
        fields = {
            "number": compaction.number,
            "bytes": size,
            "seconds": round(seconds, 6),
            "records": records,  # the log records it replaces
        }
        log.info("snapshot written", extra={"event": "snapshot_written", "fields": fields})
        if self.on_snapshot is not None:
            self.on_snapshot(seconds, size)

    def _append(self, record: bytes) -> None:
        self.data_dir.append(record)
        self._since_snapshot += 1


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: building or walking a large state makes
    hundreds of thousands of objects, each collection would walk them all, and none
    of them is garbage."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def fork_snapshot(engine: Engine, compaction: Compaction) -> tuple[int, int]:
    """Fork a child that writes the snapshot of ``engine`` (as it is now) to
    ``compaction``'s temp file; returns its pid and a descriptor readable once it is
    done (:func:`reap_snapshot` then). Call it with no other thread holding a lock."""
    read_fd, write_fd = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns of fork() beside other threads: the journal's writer
        # thread is drained (idle, holding no lock) by then, and the child only
        # writes the snapshot and exits (os._exit).
        warnings.filterwarnings("ignore", r".*multi-threaded.*fork", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        _write_in_child(engine, compaction, write_fd)
    os.close(write_fd)
    return pid, read_fd


def reap_snapshot(pid: int, done_fd: int) -> int:
    """Wait for a snapshot's child (its descriptor is readable); its exit code (0: written)."""
    os.close(done_fd)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def kill_snapshot(pid: int, done_fd: int) -> None:
    """Stop a snapshot's child and forget it (what it wrote is abandoned by the caller)."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    os.close(done_fd)


def _write_in_child(engine: Engine, compaction: Compaction, done_fd: int) -> NoReturn:
    """The forked child: write the snapshot of its copy of the engine, then exit.

    It lets go of every descriptor it inherited but ``done_fd`` first: the data
    directory's lock, the listening socket and the connections must not outlive
    the server because a child still writes (a restart could not lock or listen).
    Its exit closes ``done_fd``, which tells the server it is done.
    """
    status = 1
    try:
        gc.disable()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        os.closerange(3, done_fd)
        os.closerange(done_fd + 1, _max_fd())
        compaction.write(msgpack.packb(dump(engine), use_bin_type=True))
        status = 0
    except BaseException as error:
        with contextlib.suppress(OSError):  # stderr is the server's log
            os.write(2, f"snapshot child: {error!r}\n".encode())
    finally:
        os._exit(status)


def _max_fd() -> int:
    try:
        return max(int(os.sysconf("SC_OPEN_MAX")), 1024)
    except (OSError, ValueError):
        return 65536
