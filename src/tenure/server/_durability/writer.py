"""The journal's writer thread: group commit off the event loop (``--fsync always``).

The event loop hands each turn's records (bytes) to :meth:`Writer.submit`, which
numbers the batch and returns at once. The thread writes everything handed to it
since its last sync and makes it durable with ONE fdatasync: while it syncs, later
batches accumulate, so the busier the server, the more batches share a sync. It
then tells the loop (``call_soon_threadsafe``) the number of the last batch that is
durable; only the answers and effects of those batches may leave (the driver and
:mod:`tenure.server._net.outbox` see to that).

Between syncs, when nothing is waiting, the thread keeps the segment preallocated
(:meth:`DataDir.preallocate`): a commit then overwrites zeros inside the file, and
fdatasync has no file size to write.

A failed write or sync is fatal, and so is a full disk (seen after a sync, see
:meth:`DataDir.check_space`): the thread stops, takes nothing more, and tells the
loop, which aborts the journal (nothing more is acknowledged). The loop may touch
the file itself (open a new segment for a snapshot, close it) only once
:meth:`Writer.drain` says nothing is in flight, or after :meth:`Writer.stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from tenure.server._durability.storage import DataDir

log = logging.getLogger("tenure.storage")

#: The most bytes of records handed over and not yet taken by the thread: beyond it,
#: :meth:`Writer.submit` waits (the event loop stops, as it did when it synced itself),
#: so a disk that stalls cannot make answers pile up in memory without bound.
MAX_QUEUED: Final = 64 * 1024 * 1024
#: How long :meth:`Writer.drain` and :meth:`Writer.stop` wait for the disk (seconds)
#: before they give up and report it as a failure of the journal.
DRAIN_TIMEOUT: Final = 60.0


class WriterFailedError(OSError):
    """The writer thread could not write or sync (or did not finish in time)."""


class Writer:
    """One thread that writes and syncs the batches the event loop hands it.

    ``on_durable(batch, seconds)`` runs on the loop once batches up to ``batch`` are
    durable (``seconds``: how long that write and sync took); ``on_failed(error)``
    runs there once if the thread failed (it has stopped).
    """

    def __init__(
        self,
        data_dir: DataDir,
        loop: asyncio.AbstractEventLoop,
        on_durable: Callable[[int, float], None],
        on_failed: Callable[[BaseException], None],
        *,
        preallocate: bool = True,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        """``preallocate``: keep zeros ahead of the records (False: let the file grow);
        ``max_queued``: see :data:`MAX_QUEUED`."""
        if max_queued < 1:
            raise ValueError("max_queued must be at least 1 byte")
        self.data_dir = data_dir
        self.max_queued = max_queued
        self._queued = 0  # bytes in _queue
        self._loop = loop
        self._on_durable = on_durable
        self._on_failed = on_failed
        self._cond = threading.Condition()
        self._queue: list[bytes] = []
        self._handed = 0  # the number of the last batch submitted
        self._busy = False  # the thread is writing, syncing or preallocating
        self._stopping = False
        self._failed: BaseException | None = None
        self._preallocating = preallocate
        self._preallocation_wanted = False  # after a commit_here: the thread extends
        self._thread = threading.Thread(target=self._run, name="tenure-journal", daemon=True)
        self._thread.start()

    @property
    def handed(self) -> int:
        """The number of the last batch submitted (0: none yet)."""
        return self._handed

    @property
    def queued(self) -> int:
        """Bytes handed over that the thread has not taken yet."""
        return self._queued

    def submit(self, data: bytes, timeout: float = DRAIN_TIMEOUT) -> int:
        """Hand one batch of records' bytes to the thread; returns its number.

        Returns at once unless :attr:`max_queued` bytes wait already: then it waits
        (up to ``timeout``) for the thread to take them.

        Raises:
            WriterFailedError: the thread failed or was stopped (nothing was taken),
                or it took nothing for ``timeout``.
        """
        with self._cond:
            if self._queued >= self.max_queued:
                self._cond.wait_for(
                    lambda: self._queued < self.max_queued or self._failed is not None, timeout
                )
            if self._failed is not None or self._stopping:
                raise WriterFailedError("the journal's writer has stopped")
            if self._queued >= self.max_queued:
                raise WriterFailedError(f"the journal's writer took nothing for {timeout} s")
            self._queue.append(data)
            self._queued += len(data)
            self._handed += 1
            self._cond.notify_all()
            return self._handed

    def commit_here(self, data: bytes) -> bool:
        """Write and sync ``data`` on the calling thread, if the writer is idle.

        For the event loop when a hand-over costs more than it saves: nothing is in
        flight and the loop has nothing else to do (one request in a turn). The
        thread's two wake-ups would then only add to the one answer's wait. Any
        preallocation that becomes due is left to the thread. Returns False (and
        does nothing) if the thread has work: :meth:`submit` then.

        Raises:
            WriterFailedError: the writer failed or was stopped.
            OSError: the write or the sync failed, or the disk is full (fatal).
        """
        with self._cond:
            if self._failed is not None or self._stopping:
                raise WriterFailedError("the journal's writer has stopped")
            if not self._idle():
                return False
            self._busy = True
        try:
            self.data_dir.write(data)
            self.data_dir.sync()
            self.data_dir.check_space()
        except BaseException as error:
            with self._cond:
                self._failed = error
                self._busy = False
                self._cond.notify_all()
            raise
        with self._cond:
            self._busy = False
            self._preallocation_wanted = self._preallocating and self.data_dir.preallocation_due()
            self._cond.notify_all()
        return True

    def drain(self, timeout: float = DRAIN_TIMEOUT) -> None:
        """Block until everything submitted is durable and the thread is idle.

        Raises:
            WriterFailedError: the thread failed, or was still busy after ``timeout``.
        """
        with self._cond:
            idle = self._cond.wait_for(lambda: self._failed is not None or self._idle(), timeout)
            if self._failed is not None:
                raise WriterFailedError("the journal's writer failed") from self._failed
            if not idle:
                raise WriterFailedError(f"the journal's writer was busy for {timeout} s")

    def stop(self, timeout: float = DRAIN_TIMEOUT, *, discard: bool = False) -> None:
        """Let the thread finish what it was handed (if it can), then end it.

        ``discard``: drop what it was handed and has not started writing (the
        journal failed: none of it will be acknowledged, and its file is closed next).

        Raises:
            WriterFailedError: it did not end within ``timeout`` (it is left behind,
                a daemon thread that takes nothing more).
        """
        with self._cond:
            self._stopping = True
            if discard:
                self._queue.clear()
                self._queued = 0
            self._cond.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise WriterFailedError(f"the journal's writer did not stop within {timeout} s")

    def _idle(self) -> bool:
        """Nothing to write, and nothing being written or preallocated (under the lock)."""
        return not (self._queue or self._busy or self._preallocation_wanted)

    # -- the thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: bool(self._queue) or self._stopping or self._preallocation_wanted
                )
                if not self._queue and self._stopping:
                    return  # everything handed is durable
                batch, upto = b"".join(self._queue), self._handed
                self._queue.clear()
                self._queued = 0
                self._preallocation_wanted = False
                self._busy = True
                self._cond.notify_all()  # a submit waiting for room
            if batch:
                try:
                    started = time.perf_counter()
                    self.data_dir.write(batch)
                    self.data_dir.sync()
                    seconds = time.perf_counter() - started
                    self.data_dir.check_space()  # a full disk is fatal, preallocated or not
                except BaseException as error:  # every failure is the journal's end
                    self._fail(error)
                    return
                self._tell(self._on_durable, upto, seconds)
            if self._preallocating and not self._stopping:
                self._preallocate()
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def _preallocate(self) -> None:
        """Keep zeros ahead of the records, when no batch waits (off the commit path)."""
        with self._cond:
            if self._queue:
                return  # a batch waits: it goes first, this comes after a later sync
        try:
            self.data_dir.preallocate()
        except OSError as error:
            # Best effort: a full disk leaves appends to grow the file as before (and
            # fail, fatally, when the disk refuses a record).
            self._preallocating = False
            log.warning(
                "cannot preallocate the journal (%s); appending without",
                error,
                extra={"event": "preallocate_failed", "fields": {"error": str(error)}},
            )

    def _fail(self, error: BaseException) -> None:
        with self._cond:
            self._failed = error
            self._busy = False
            self._queue.clear()
            self._queued = 0
            self._cond.notify_all()
        self._tell(self._on_failed, error)

    def _tell(self, callback: Callable[..., None], *args: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody to tell
            self._loop.call_soon_threadsafe(callback, *args)
