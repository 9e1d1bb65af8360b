"""What a server's group commit is given: its journal, its writer, and the output it seals.

The seam between :class:`~tenure.server._group_commit.GroupCommit` and the plain
objects it is built of: the journal it commits and snapshots (:class:`CommitJournal`;
a :class:`ServerJournal` is what the host logs to as well: the data directory's
:class:`~tenure.server._durability.journal.Journal`, or a cluster leader's
:class:`~tenure.server._cluster.journal.ClusterJournal`), the writer that makes each
turn's records durable (:class:`BatchWriter`: a ``--fsync`` mode's,
:mod:`tenure.server._durability.fsync_modes`, or a cluster leader's appender,
:mod:`tenure.server._cluster.appender`), and what the server owes its clients, sealed
to each commit (:class:`DurableOutput`, the server's outboxes). Each implementation
says what it is by these few members alone: none derives from another.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tenure._core import Engine
from tenure._runtime.host import HostJournal
from tenure.server._durability.storage import FsyncMode
from tenure.server._snapshots import SnapshotJournal

__all__ = ["BatchWriter", "CommitJournal", "DurableOutput", "ServerJournal"]


class DurableOutput(Protocol):
    """What the server owes its clients, sealed to commits (the server's Outboxes)."""

    def seal(self, batch: int, durable: int) -> None:
        """Everything queued so far leaves once ``batch`` is durable (now, if ``durable``
        already covers it)."""

    def release(self, durable: int) -> None:
        """Batches up to ``durable`` are durable: write what was sealed to them."""


class CommitJournal(SnapshotJournal, Protocol):
    """What a group commit asks of its journal (the data directory's
    :class:`~tenure.server._durability.journal.Journal`, or a cluster leader's
    :class:`~tenure.server._cluster.journal.ClusterJournal`), besides the records its
    host logs to it and its snapshots."""

    @property
    def fsync(self) -> FsyncMode:
        """When what is logged is durable (a cluster's: ``always``, in etcd)."""
        ...

    def take_pending(self) -> bytes:
        """The records logged since the last call, framed, for the writer."""
        ...

    def close(self, engine: Engine | None = None) -> None:
        """Commit and close."""

    def abort(self) -> None:
        """Close without committing what is queued."""


class ServerJournal(HostJournal, CommitJournal, Protocol):
    """A server's journal: what its host logs each change to, and its group commit
    commits and snapshots."""


class BatchWriter(Protocol):
    """How a turn's records become durable (module docstring)."""

    @property
    def pending(self) -> int:
        """Bytes handed over and not durable yet (0: none are, the loop writes them)."""
        ...

    @property
    def max_pending(self) -> int | None:
        """Beyond this many :attr:`pending` bytes commands are refused, UnavailableError
        ("try again"), instead of handed over (None: never; a writer that waits)."""
        ...

    def start(
        self,
        durable: Callable[[int, float | None], None],
        failed: Callable[[str, BaseException], None],
    ) -> None:
        """Begin; on the event loop, ``durable(batch, seconds)`` once batches up to
        ``batch`` are durable (``seconds``: how long that took; None: not measured),
        ``failed(what, error)`` once if the writer fails doing ``what`` (it has stopped
        then)."""

    def write(self, data: bytes, lone: bool) -> int:
        """Make one turn's records (``data``, maybe none) durable, or hand them over to
        be; the number of the batch the turn's output waits for (durable already when
        it is at most the last one reported). ``lone``: the turn is one step with
        nothing in flight (module docstring).

        Raises:
            Whatever stops the writer (fatal to the journal).
        """
        ...

    def drain(self) -> None:
        """Block until what was handed over is durable, where that can be waited for
        on the loop (a snapshot's new segment starts after it); may raise as
        :meth:`write`."""

    @property
    def valid_until(self) -> Callable[[], float] | None:
        """The loop time until which what this writer made durable may leave, asked at
        every flush: a leader's lease (None: for ever, a data directory's)."""
        ...

    def stop(self, *, discard: bool = False) -> None:
        """Finish (or with ``discard``, drop) what was handed over, then stop."""
