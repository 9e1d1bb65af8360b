"""The leader's journal: the same records as a single server's, kept in etcd.

:class:`ClusterJournal` is what the leader's host logs to
(a :class:`~tenure.server._commit_seams.ServerJournal`): each command that succeeded
and each tick that changed the state is a record, exactly as in the data
directory's log (:mod:`tenure.server._durability.records`), framed the same way,
and the :class:`~tenure.server._cluster.appender.Appender` makes them durable by
appending them to the cluster's log.

Snapshots keep the log short. One is due, as in a single server, once the records
since the last number ``snapshot_every`` and a quarter of the state's size. The
leader's loop walks none of the state for it (see :meth:`ClusterJournal.start_snapshot`):
a process of its own (:mod:`tenure.server._cluster.state_process`) reads the state
from etcd, as a starting standby does, and writes its snapshot there in chunks; the
leader then puts it in use by one fenced Txn that also deletes the log entries it
covers (:meth:`ClusterStore.install`). A snapshot that fails is logged and retried
later: nothing is lost, standbys only replay more.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable

from tenure._core import Command, Engine
from tenure.server._cluster.appender import Appender
from tenure.server._cluster.keys import DEFAULT_CELL, Pointer
from tenure.server._cluster.state_process import StateProcessStarter, spawn
from tenure.server._cluster.store import ClusterStore
from tenure.server._durability.records import command_record, resume_record, tick_record
from tenure.server._durability.storage import FsyncMode, framed

log = logging.getLogger("tenure.cluster")

__all__ = ["ClusterJournal"]


class ClusterJournal:
    """See the module docstring (a :class:`~tenure.server._commit_seams.ServerJournal`)."""

    fsync = FsyncMode.ALWAYS  # an entry is acknowledged once etcd has it

    def __init__(
        self,
        store: ClusterStore,
        appender: Appender,
        *,
        snapshot_every: int,
        cluster: str,
        cell: tuple[str, str] = (DEFAULT_CELL, ""),
        max_nodes: int = 10_000,
        start_process: StateProcessStarter = spawn,
    ) -> None:
        """``cluster``: the ``--cluster`` URL and ``cell`` the member's ``--cell`` and
        ``--cell-etcd`` (the snapshots' process reads the cell's state there);
        ``max_nodes``: the server's; ``start_process``: what starts that
        process (:func:`~tenure.server._cluster.state_process.spawn`)."""
        self.start_process = start_process
        self.store = store
        self.cluster = cluster
        self.cell = cell
        self.max_nodes = max_nodes
        self.appender = appender
        self.snapshot_every = snapshot_every
        self._pending = bytearray()
        self._since_snapshot = 0
        self._upload: asyncio.Task[None] | None = None
        #: Told of every snapshot put in use: (seconds since it was begun, bytes).
        self.on_snapshot: Callable[[float, int], None] | None = None
        self._started = 0.0

    # -- records ----------------------------------------------------------------------

    def log_command(
        self, command: Command[object], now: float, actor: str = "", raw: bytes | None = None
    ) -> None:
        """Queue the record of a command that succeeded (read-only ones are skipped),
        sent by ``actor`` (its token's name), ``raw`` its bytes as a client sent them
        (None: encoded here; :func:`command_record`)."""
        record = command_record(command, now, actor, raw)
        if record is not None:
            self._pending += framed(record)
            self._since_snapshot += 1

    def log_tick(self, now: float) -> None:
        """Queue the record of a tick that handled deadlines."""
        self._pending += framed(tick_record(now))
        self._since_snapshot += 1

    def log_record(self, record: bytes) -> None:
        """Queue a record the host made whole (a step of a node's move between cells)."""
        self._pending += framed(record)
        self._since_snapshot += 1

    def log_resume(self, now: float) -> None:
        """Queue the record of this leader's takeover: the engine on its clock from ``now``."""
        self._pending += framed(resume_record(now))
        self._since_snapshot += 1

    def take_pending(self) -> bytes:
        """The queued records' bytes, for the appender."""
        data = bytes(self._pending)
        self._pending.clear()
        return data

    # -- snapshots --------------------------------------------------------------------

    def needs_snapshot(self, engine: Engine | None = None) -> bool:
        """Whether a snapshot is due (module docstring) and none is on its way."""
        busy = self._upload is not None and not self._upload.done()
        if busy or self._since_snapshot < self.snapshot_every:
            return False
        if engine is None:
            return True
        size = len(engine.sessions) + sum(len(node.semaphores) for node in engine.nodes.values())
        return self._since_snapshot >= size // 4

    @property
    def snapshot_fd(self) -> int | None:
        """None: the snapshot is made here, not by a child (see :meth:`start_snapshot`)."""
        return None

    def start_snapshot(self, engine: Engine) -> int | None:
        """Begin a snapshot, made apart (module docstring); None (nothing to wait for
        here).

        Not dumped by a forked child, as a single server's is: a child forked beside
        gRPC's threads crashed now and then (SIGSEGV, SIGABRT: gRPC and uvloop state
        copied half-made), and a leader that crashes its snapshots never trims its
        log. Nor on the event loop, as it was: that paused every client for 85 ms at
        100,000 holds and 877 ms at 1,000,000. A new process (a fork that execs at
        once) reads the state from etcd and writes the snapshot there; the loop only
        puts it in use.
        """
        self._started = time.monotonic()
        self._since_snapshot = 0
        self._upload = asyncio.ensure_future(self._made_apart())
        return None

    def finish_snapshot(self) -> bool:
        """Nothing: no child writes a cluster's snapshots."""
        return False

    async def _made_apart(self) -> None:
        appender, store = self.appender, self.store
        asked = {
            "act": "snapshot",
            "cluster": self.cluster,
            "cell": self.cell[0],
            "cell_etcd": self.cell[1],
            "term": appender.term,
            "max_entry": appender.max_entry,
            "max_nodes": self.max_nodes,
        }
        process = None
        try:
            process = await self.start_process(asked)
            out, err = await process.communicate()
            if process.returncode != 0:
                why = err.decode(errors="replace").strip() or f"exit code {process.returncode}"
                raise RuntimeError(why)
            said = json.loads(out.decode().strip().splitlines()[-1])["pointer"]
            if said is None:
                return  # the log has nothing past the newest snapshot
            pointer = Pointer(*said)
            replaced, _ = await store.pointer()
            if replaced is not None and replaced.index >= pointer.index:
                return  # (a newer one is in use: this one's chunks are its own keys)
            if not await store.install(pointer, appender.lease, replaced):
                await store.drop_chunks(pointer)
                log.info("snapshot %d not put in use: this server no longer leads", pointer.index)
                return
            seconds = round(time.monotonic() - self._started, 6)
            fields = {
                "index": pointer.index,
                "bytes": pointer.size,
                "chunks": pointer.chunks,
                "seconds": seconds,
            }
            log.info("snapshot in use", extra={"event": "snapshot_written", "fields": fields})
            if self.on_snapshot is not None:
                self.on_snapshot(seconds, pointer.size)
        except asyncio.CancelledError:
            if process is not None and process.returncode is None:
                process.kill()  # (its chunks, if any, are never put in use)
            raise
        except Exception as error:
            log.warning("a cluster snapshot failed (%s); the log is kept", error)
            self._since_snapshot += self.snapshot_every // 2  # try again sooner

    # -- the end ----------------------------------------------------------------------

    def close(self, engine: Engine | None = None) -> None:
        """Stop any snapshot on its way (a successor writes its own)."""
        self.abort()

    def abort(self) -> None:
        """Stop any snapshot on its way; forget what is queued."""
        self._pending.clear()
        if self._upload is not None:
            self._upload.cancel()
