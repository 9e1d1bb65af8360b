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
import msgspec

from tenure._core import (
    Acquire,
    CancelAcquire,
    CancelWatch,
    Command,
    CreateNode,
    DescribeNode,
    DescribeSemaphore,
    DescribeSession,
    DetachSession,
    Engine,
    GetNodeAnnex,
    ListNodes,
    ListSemaphores,
    ListSessions,
    NodeConfig,
    Release,
    Renew,
)
from tenure._core.snapshot import dump, load, resume
from tenure._protocol.payloads import COMMAND, decode_command, encode_command
from tenure._protocol.wire import WireError
from tenure.errors import TenureError
from tenure.server._durability.storage import Compaction, CorruptLogError, DataDir

log = logging.getLogger("tenure.server")

COMMAND_RECORD: Final = 1
TICK_RECORD: Final = 2
RESUME_RECORD: Final = 3

#: A snapshot is due after at least this many records (and a quarter of the state).
COMPACT_EVERY: Final = 10_000
#: Records replayed at start-up between two looks at the event loop (:meth:`Journal.replay`).
REPLAY_STEP: Final = 2_000
#: Forking is how snapshots are written off the event loop; without it, inline.
CAN_FORK: Final = hasattr(os, "fork")

#: Commands that change nothing the journal keeps.
READ_ONLY: Final = frozenset(
    {
        DescribeNode,
        GetNodeAnnex,
        DescribeSemaphore,
        DescribeSession,
        CancelWatch,
        ListNodes,
        ListSemaphores,
        ListSessions,
    }
)


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
        with _collector_paused():
            if recovered.snapshot is None:
                engine = Engine(max_nodes=max_nodes)
            else:
                engine = load(msgpack.unpackb(recovered.snapshot, raw=False))
        records = recovered.records
        for start in range(0, len(records), REPLAY_STEP):
            with _collector_paused():
                for index in range(start, min(start + REPLAY_STEP, len(records))):
                    self._replay(engine, records[index], index)
            yield None
        self._since_snapshot = len(records)
        yield engine

    def resume(self, engine: Engine, now: float) -> Engine:
        """Put a replayed engine on this process's clock (``now``) and log that."""
        with _collector_paused():
            engine.take_effects()  # everyone heard of these before the restart
            resume(engine, now)
        self._append([RESUME_RECORD, now])
        self.commit()
        return engine

    def _replay(self, engine: Engine, record: bytes, index: int) -> None:
        where = self.data_dir.path
        try:
            read = _RECORD.decode(record)
            kind, when = read.kind, read.when
            if kind == TICK_RECORD and not read.command:
                engine.tick(when)
            elif kind == COMMAND_RECORD and read.command:
                command = _logged_command(read.command)
                assert isinstance(command, Command)
                engine.apply(command, when)
            elif kind == RESUME_RECORD and not read.command:
                engine.take_effects()
                resume(engine, when)
            else:
                raise ValueError(f"unknown record kind {kind!r}")
        except TenureError as error:
            problem = f"logged record {index} no longer applies: {error}"
            raise CorruptLogError(where, None, problem) from None
        except (ValueError, TypeError) as error:  # msgspec's errors are ValueErrors
            problem = f"logged record {index} is unreadable: {error}"
            raise CorruptLogError(where, None, problem) from None

    def log_command(self, command: Command[object], now: float) -> None:
        """Queue a record of a command that succeeded (read-only ones are skipped)."""
        if type(command) in READ_ONLY:
            return
        # The command in its wire layout, as encoded (and checked) by the protocol's codec.
        self._append([COMMAND_RECORD, now, msgspec.Raw(encode_command(command))])

    def log_tick(self, now: float) -> None:
        """Queue a record of a tick that handled deadlines."""
        self._append([TICK_RECORD, now])

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
        with _collector_paused():
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
        os.close(child.done_fd)
        _, status = os.waitpid(child.pid, 0)
        if os.waitstatus_to_exitcode(status) == 0:
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
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGKILL)
                os.waitpid(child.pid, 0)
            os.close(child.done_fd)
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

    def _append(self, record: list[object]) -> None:
        self.data_dir.append(msgspec.msgpack.encode(record))
        self._since_snapshot += 1


class _Record(msgspec.Struct, array_like=True, forbid_unknown_fields=True, gc=False):
    """A logged record as read back: ``[kind, now]``, or ``[1, now, command]``."""

    kind: int
    when: float
    command: msgspec.Raw = msgspec.Raw()  # the command's own msgpack, decoded apart


_RECORD: Final = msgspec.msgpack.Decoder(_Record)


def _logged_command(logged: msgspec.Raw) -> object:
    """The command of a record: in today's layout, or else in an older one (:func:`_upgraded`)."""
    try:
        return decode_command(logged)
    except WireError:
        older = msgspec.msgpack.decode(logged)
        return decode_command(msgspec.msgpack.encode(_upgraded(older)))


def _upgraded(raw: object) -> object:
    """A logged command in today's layout (layouts changed before the first release).

    * DetachSession was ``[12, session_id]`` before it counted the client's silence:
      it replays as a detach at the time it was logged (``silent_for`` 0);
    * CreateNode's NodeConfig had 8 fields before ``max_missed_per_session``: the
      node gets that setting's default;
    * Acquire, Release, CancelAcquire and Renew had no ``hold`` before a session
      could hold a semaphore more than once: they replay as hold 0.
    """
    if not isinstance(raw, list) or not raw:
        return raw
    if len(raw) == _BEFORE_HOLDS.get(raw[0], -1):
        return [*raw, 0]  # hold 0: the session's only hold, as it was then
    if raw[0] == _DETACH_TAG and len(raw) == 2:
        return [*raw, 0.0]
    config = raw[2] if raw[0] == _CREATE_NODE_TAG and len(raw) == 3 else None
    if isinstance(config, list) and len(config) == 8:
        return [*raw[:2], [*config, NodeConfig().max_missed_per_session]]
    return raw


_DETACH_TAG: Final = COMMAND.by_type[DetachSession].tag
#: Length (tag included) of the commands that gained ``hold``, as they were before.
_BEFORE_HOLDS: Final = {
    COMMAND.by_type[Acquire].tag: 9,
    COMMAND.by_type[Release].tag: 3,
    COMMAND.by_type[CancelAcquire].tag: 4,
    COMMAND.by_type[Renew].tag: 4,
}
_CREATE_NODE_TAG: Final = COMMAND.by_type[CreateNode].tag


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
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
