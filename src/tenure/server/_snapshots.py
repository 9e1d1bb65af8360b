"""A server's snapshots: begun when due and the writer has nothing in flight, heard once written.

The server's group commit (:mod:`tenure.server._group_commit`) asks its journal after
each commit whether a snapshot is due, and :meth:`Snapshots.start` begins it: the
data directory's is written by a forked child while the loop goes on
(:meth:`~tenure.server._durability.journal.Journal.start_snapshot`), and put in place
when the child is done (:meth:`Snapshots` hears its descriptor); a cluster leader's
is uploaded by a task of its journal.

The new segment of the log must start after every record handed to the writer, so
the writer must have nothing in flight: a due snapshot waits for the writer's report
that the last batch handed over is durable (and nothing logged since), and starts
then (:meth:`Snapshots.resume`), rather than blocking the loop on the writer's fsync
(issue 37: under a tenant's writes, snapshots are frequent and each such wait stalled
every client). Only a writer never idle for :data:`SNAPSHOT_WAIT` is drained on the
loop, as before. (A leader's appender needs no drain: its barrier says which entries
a snapshot covers.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Final, Protocol

from tenure._core import Engine

#: Seconds a due snapshot waits for the writer to have nothing in flight before it
#: drains it on the loop instead (a writer kept busy by a load that never pauses).
SNAPSHOT_WAIT: Final = 1.0


class SnapshotJournal(Protocol):
    """What :class:`Snapshots` asks of a journal (the data directory's, or a cluster
    leader's)."""

    @property
    def snapshot_fd(self) -> int | None:
        """While a snapshot is being written apart: a descriptor readable once done."""
        ...

    def needs_snapshot(self, engine: Engine | None = None) -> bool:
        """Whether a snapshot is due."""
        ...

    def start_snapshot(self, engine: Engine) -> int | None:
        """Begin a snapshot of ``engine`` as it is now; :attr:`snapshot_fd` (None: done)."""
        ...

    def finish_snapshot(self) -> bool:
        """The snapshot begun apart is written: put it in place."""
        ...


class Snapshots:
    """See the module docstring. ``drain()``: the writer's (blocks until what was handed
    over is durable); ``fatal(what, error)``: a snapshot could not be begun or put in
    place (the journal's end)."""

    def __init__(
        self,
        journal: SnapshotJournal,
        drain: Callable[[], None],
        engine: Engine,
        loop: asyncio.AbstractEventLoop,
        fatal: Callable[[str, BaseException], None],
    ) -> None:
        self.journal = journal
        self._drain = drain
        self.engine = engine
        self._loop = loop
        self._fatal = fatal
        #: Loop time a snapshot fell due while the writer had batches in flight (None:
        #: none waits).
        self.due_at: float | None = None

    def start(self, *, in_flight: bool) -> None:
        """Begin the due snapshot, unless the writer has batches ``in_flight``: then
        :meth:`resume` begins it once they are durable (or, after
        :data:`SNAPSHOT_WAIT`, the writer is drained here: module docstring).

        Raises:
            What the writer's drain or the journal raises (fatal to the journal).
        """
        now = self._loop.time()
        if self.due_at is None:
            self.due_at = now
        if in_flight and now - self.due_at < SNAPSHOT_WAIT:
            return
        self.due_at = None
        self._drain()  # (nothing in flight: at once)
        fd = self.journal.start_snapshot(self.engine)
        if fd is not None:  # a child writes it: hear when it is done
            self._loop.add_reader(fd, self._written)

    def resume(self) -> None:
        """The writer has nothing in flight any more (and nothing was logged since): the
        snapshot that waited for it begins now, if it is still due."""
        try:
            if self.journal.needs_snapshot(self.engine):
                self.start(in_flight=False)
            else:
                self.due_at = None
        except Exception as error:
            self._fatal("starting a snapshot", error)

    def stop_hearing(self) -> None:
        """Stop listening for a snapshot's child (shutting down, or the journal failed)."""
        fd = self.journal.snapshot_fd
        if fd is not None:
            self._loop.remove_reader(fd)

    def _written(self) -> None:
        """The snapshot's child is done: put the snapshot in place (or keep the log)."""
        self.stop_hearing()
        try:
            self.journal.finish_snapshot()
        except Exception as error:
            self._fatal("finishing a snapshot", error)
