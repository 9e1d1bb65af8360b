"""The engine made durable: each change is logged before anybody hears of it.

The engine is deterministic, so its state is fully described by the commands and
ticks that changed it, each with its time. The journal logs exactly those, as
records in the :class:`~tenure.server._storage.DataDir`:

* ``[1, now, command]``: a command that succeeded and can change state (read-only
  commands and watches are not logged: watches belong to connections);
* ``[2, now]``: a tick that handled at least one deadline.

A failed command changes nothing (engine rule 1). The host ticks *before* every
command and logs that tick if it did anything, so no change is ever hidden inside
a command that was not logged.

At start-up the journal loads the newest snapshot, replays every record after it,
resumes the engine on the new process's clock (fresh recovery windows, fresh lease
TTLs, see :func:`tenure._core.snapshot.resume`), and writes a snapshot of the
result, so the next start-up replays only what happened since. Every
``compact_every`` records it snapshots again.

The host's contract: apply, then ``log_*``, then ``commit()``, and only then send
replies and effects. Many commands may share one ``commit()`` (group commit).
"""

from __future__ import annotations

from typing import Final

import msgpack

from tenure._core import CancelWatch, Command, DescribeNode, DescribeSemaphore, Engine
from tenure._core.snapshot import dump, load, resume
from tenure._protocol.compiled import compile_dump, compile_load
from tenure._protocol.payloads import COMMAND
from tenure._protocol.schema import SchemaError
from tenure.errors import TenureError
from tenure.server._storage import CorruptLogError, DataDir

# The schema's compiled fast path (same checks): one of these runs per command logged,
# and per record replayed at start-up.
_dump_command: Final = compile_dump(COMMAND)
_load_command: Final = compile_load(COMMAND)

COMMAND_RECORD: Final = 1
TICK_RECORD: Final = 2

#: Commands that change nothing the journal keeps.
READ_ONLY: Final = frozenset({DescribeNode, DescribeSemaphore, CancelWatch})


class Journal:
    """Logs an engine's changes to a data directory, and rebuilds the engine from it."""

    def __init__(self, data_dir: DataDir, *, compact_every: int = 100_000) -> None:
        if compact_every < 1:
            raise ValueError("compact_every must be at least 1")
        self.data_dir = data_dir
        self.compact_every = compact_every
        self._since_snapshot = 0

    def open(self, now: float, *, max_nodes: int = 10_000) -> Engine:
        """Rebuild the engine from disk and put it on this process's clock (``now``).

        Raises:
            CorruptLogError: the data cannot be trusted (see DataDir), or a logged
                command no longer applies (the log and the engine disagree).
        """
        recovered = self.data_dir.recover()
        if recovered.snapshot is None:
            engine = Engine(max_nodes=max_nodes)
        else:
            engine = load(msgpack.unpackb(recovered.snapshot, raw=False))
        for index, record in enumerate(recovered.records):
            self._replay(engine, record, index)
        engine.take_effects()  # everyone heard of these before the restart
        if recovered.snapshot is not None or recovered.records:
            resume(engine, now)
        else:
            engine.now = now
        self.snapshot(engine)
        return engine

    def _replay(self, engine: Engine, record: bytes, index: int) -> None:
        where = self.data_dir.path
        try:
            kind, when, *rest = msgpack.unpackb(record, raw=False)
            if kind == TICK_RECORD and not rest:
                engine.tick(when)
            elif kind == COMMAND_RECORD and len(rest) == 1:
                command = _load_command(rest[0])
                assert isinstance(command, Command)
                engine.apply(command, when)
            else:
                raise ValueError(f"unknown record kind {kind!r}")
        except TenureError as error:
            problem = f"logged record {index} no longer applies: {error}"
            raise CorruptLogError(where, None, problem) from None
        except (SchemaError, ValueError, TypeError, msgpack.UnpackException) as error:
            problem = f"logged record {index} is unreadable: {error}"
            raise CorruptLogError(where, None, problem) from None

    def log_command(self, command: Command[object], now: float) -> None:
        """Queue a record of a command that succeeded (read-only ones are skipped)."""
        if type(command) in READ_ONLY:
            return
        self._append([COMMAND_RECORD, now, _dump_command(command)])

    def log_tick(self, now: float) -> None:
        """Queue a record of a tick that handled deadlines."""
        self._append([TICK_RECORD, now])

    def commit(self) -> None:
        """Make every queued record durable (as the fsync mode says)."""
        self.data_dir.commit()

    def needs_snapshot(self) -> bool:
        """Whether enough records piled up since the last snapshot."""
        return self._since_snapshot >= self.compact_every

    def snapshot(self, engine: Engine) -> None:
        """Write the engine's state as the new starting point and drop older records."""
        self.data_dir.compact(msgpack.packb(dump(engine), use_bin_type=True))
        self._since_snapshot = 0

    def close(self) -> None:
        """Commit and close the data directory."""
        self.data_dir.close()

    def abort(self) -> None:
        """Close without committing what is queued (see DataDir.abort)."""
        self.data_dir.abort()

    def _append(self, record: list[object]) -> None:
        self.data_dir.append(msgpack.packb(record, use_bin_type=True))
        self._since_snapshot += 1
