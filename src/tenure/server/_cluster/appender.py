"""The leader's writer: group commit to the cluster's log in etcd.

The leader's group commit (:mod:`tenure.server._group_commit`, whose
:class:`~tenure.server._commit_seams.BatchWriter` the appender is) hands each turn's
records to :meth:`Appender.write` as batch N and goes on serving (as it hands them
to the journal's writer thread in a single server). One append is in flight at a
time: while it is, later batches accumulate, and the next append carries all of
them, so the busier the leader, the more batches share one Txn. An append is one
log entry, or several in a row when the records exceed ``max_entry`` bytes (a
record is never split: the configuration keeps every record within the limit,
:mod:`tenure.server._cluster.settings`). Once every entry of a round is in etcd,
the group commit hears that batches up to the last one taken are durable, and
their answers leave.

Each append is a fenced Txn (:meth:`ClusterStore.append`): if this server no
longer leads, it fails, and the group commit is told the journal failed: it steps down, and
nothing of those batches is acknowledged. An etcd that cannot be reached is tried
again until the leader's lease could have run out (``deadline``), then it fails
the same way. Until that deadline, and never after it, what the appender made
durable may leave (:attr:`Appender.valid_until`); and while more than ``max_pending``
bytes wait for etcd, the leader refuses commands (:data:`MAX_PENDING`).

(A snapshot needs nothing of it: a process of its own reads the state from what the
appender made durable, :mod:`tenure.server._cluster.state_process`.)
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final

from tenure.errors import NotLeaderError, UnavailableError
from tenure.server._cluster.keys import LogEntry
from tenure.server._cluster.store import Appended, ClusterStore
from tenure.server._durability.storage import unframed

log = logging.getLogger("tenure.cluster")

__all__ = ["MAX_PENDING", "Appender"]

#: Bytes of records handed to the appender and not in etcd yet beyond which the leader
#: refuses commands (UnavailableError, "try again") instead of queueing more: an etcd
#: that answers slower than clients ask cannot make the leader's memory grow without
#: bound (a single server's writer thread stops the loop at the same size).
MAX_PENDING: Final = 64 * 1024 * 1024

#: The pause between two tries of an append etcd did not answer, in seconds.
RETRY_PAUSE = 0.05


class Appender:
    """See the module docstring. ``on_durable(batch, seconds)`` and
    ``on_failed(what, error)`` are called on the event loop; ``deadline()`` is when the
    leader's lease could end (loop time); ``max_pending``: see :data:`MAX_PENDING`."""

    def __init__(
        self,
        store: ClusterStore,
        *,
        lease: int,
        term: int,
        next_index: int,
        max_entry: int,
        deadline: Callable[[], float],
        max_pending: int = MAX_PENDING,
    ) -> None:
        self.store = store
        self.max_pending: int | None = max_pending
        self.lease = lease
        self.term = term
        self.max_entry = max_entry
        #: The index the next entry gets (one past the last appended).
        self.next_index = next_index
        self._deadline = deadline
        #: Until when what it appended may leave: the leader's lease (BatchWriter's).
        self.valid_until: Callable[[], float] | None = deadline
        self._loop = asyncio.get_running_loop()
        self._queue: list[tuple[int, bytes]] = []
        #: Bytes handed over and not appended yet (queued, or in the append in flight).
        self.pending = 0
        self._handed = 0
        self._busy = False
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None
        self.on_durable: Callable[[int, float | None], None] = lambda batch, seconds: None
        self.on_failed: Callable[[str, BaseException], None] = lambda what, error: None

    @property
    def handed(self) -> int:
        """The number of the last batch submitted (0: none yet)."""
        return self._handed

    @property
    def last_index(self) -> int:
        """The index of the last entry appended."""
        return self.next_index - 1

    def start(
        self,
        on_durable: Callable[[int, float | None], None],
        on_failed: Callable[[str, BaseException], None],
    ) -> None:
        """Begin appending what is submitted, telling the group commit through these two."""
        self.on_durable, self.on_failed = on_durable, on_failed
        self._task = asyncio.ensure_future(self._run())

    # -- BatchWriter ------------------------------------------------------------------

    def write(self, data: bytes, lone: bool) -> int:
        """Hand one turn's records over (:meth:`submit`; never appended here: an append is
        a round trip to etcd, made by the appender's task); the batch its output waits
        for (the last one handed, if ``data`` is empty).

        Raises:
            NotLeaderError: as :meth:`submit`.
        """
        return self.submit(data) if data else self._handed

    def submit(self, data: bytes) -> int:
        """Hand one batch of framed records over; returns its number at once.

        Raises:
            NotLeaderError: the appender failed or was stopped (nothing was taken).
        """
        if self._failed is not None or self._task is None or self._task.done():
            raise NotLeaderError.pointing_to(None, "this server no longer appends to the log")
        self._handed += 1
        self._queue.append((self._handed, data))
        self.pending += len(data)
        self._idle.clear()
        self._wake.set()
        return self._handed

    def drain(self) -> None:
        """Nothing to do here: the loop cannot block for etcd (await :meth:`idle`)."""

    def stop(self, *, discard: bool = False) -> None:
        """Stop appending; what was not appended is dropped (never acknowledged)."""
        if self._task is not None:
            self._task.cancel()
        self._queue.clear()
        self.pending = 0
        self._idle.set()

    # -- for the leader ---------------------------------------------------------------

    async def idle(self) -> None:
        """Until everything submitted is appended (or the appender failed or stopped)."""
        await self._idle.wait()

    # -- the task -----------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                if not self._queue:
                    self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                upto = self._handed
                taken = [data for _, data in self._queue]
                self._queue = []
                self._busy = True
                started = time.perf_counter()
                data = b"".join(taken)
                for chunk in _chunks(data, self.max_entry):
                    await self._append(LogEntry(self.term, chunk))
                self.pending -= len(data)
                self._busy = False
                self.on_durable(upto, time.perf_counter() - started)
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self._failed = error
            self._queue.clear()
            self._idle.set()
            self.on_failed("committing the journal", error)

    async def _append(self, entry: LogEntry) -> None:
        """Append one entry at the next index, trying again while the lease may last.

        Raises:
            NotLeaderError: this server no longer leads (the fence held it off).
            UnavailableError: etcd did not answer before the lease could have ended.
        """
        while True:
            try:
                result = await self.store.append(self.next_index, entry, self.lease)
            except UnavailableError as error:
                if self._loop.time() + RETRY_PAUSE >= self._deadline():
                    raise UnavailableError(
                        f"etcd did not take log entry {self.next_index} before this "
                        f"leader's lease could end: {error}"
                    ) from None
                log.warning("appending entry %d: %s; trying again", self.next_index, error)
                await asyncio.sleep(RETRY_PAUSE)
                continue
            if result is Appended.DONE:
                self.next_index += 1
                return
            why = (
                "its election key is gone"
                if result is Appended.DEPOSED
                else f"log entry {self.next_index} was written by another leader"
            )
            raise NotLeaderError.pointing_to(None, f"this server no longer leads: {why}")


def _chunks(data: bytes, limit: int) -> list[bytes]:
    """``data`` (framed records) cut into runs of whole records of at most ``limit`` bytes.

    Raises:
        ValueError: one record alone is larger than ``limit``, or ``data`` is not whole
            records.
    """
    if len(data) <= limit:
        return [data] if data else []
    view = memoryview(data)
    chunks: list[bytes] = []
    start = 0
    header = 8  # length and crc32 before each payload
    last_end = 0
    for span_start, span_end in unframed(view):
        record_start = span_start - header
        if span_end - record_start > limit:
            raise ValueError(
                f"a journal record of {span_end - record_start} bytes is larger than "
                f"--cluster-max-entry ({limit})"
            )
        if span_end - start > limit:
            chunks.append(bytes(view[start:record_start]))
            start = record_start
        last_end = span_end
    chunks.append(bytes(view[start:last_end]))
    with contextlib.suppress(Exception):
        view.release()
    return chunks
