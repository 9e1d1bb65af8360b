"""How the data directory's records become durable: one writer per ``--fsync`` mode.

Each is the :class:`~tenure.server._commit_seams.BatchWriter` of a single server's
group commit, given each turn's records (:meth:`write`):

* :class:`WriterThread` (``always``): the turn is handed to the writer thread
  (:mod:`tenure.server._durability.writer`) as batch N, which makes it durable with
  one fdatasync (several batches share one while it syncs) and reports N durable; a
  lone step with nothing in flight is written and synced on the loop instead, where
  that is cheaper than the thread's two wake-ups.
* :class:`LoopCommit` (``off`` and ``batch``): nothing waits for the disk, so the loop
  writes the turn itself (cheaper than a hand-over) and it is durable as far as the
  mode asks at once; with ``batch`` a task makes what was written durable every
  ``--batch-interval`` (the syncer).

Neither holds a lease (what they made durable may leave for ever) nor refuses
commands: the thread's hand-over waits instead when too much is queued
(``MAX_QUEUED``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Final

from tenure.server._durability.storage import DataDir, FsyncMode
from tenure.server._durability.writer import Writer

__all__ = ["BATCH_INTERVAL", "LoopCommit", "WriterThread", "fsync_writer"]

#: How often ``--fsync batch`` makes what was committed durable, in seconds (the
#: default of ``--batch-interval``).
BATCH_INTERVAL: Final = 0.05


def fsync_writer(data_dir: DataDir, batch_interval: float) -> WriterThread | LoopCommit:
    """The writer of ``data_dir``'s ``--fsync`` mode (``batch_interval``: ``batch``'s
    syncing period, in seconds)."""
    if data_dir.fsync is FsyncMode.ALWAYS:
        return WriterThread(data_dir)
    return LoopCommit(data_dir, batch_interval if data_dir.fsync is FsyncMode.BATCH else None)


class WriterThread:
    """``--fsync always``: each turn handed to the writer thread (module docstring)."""

    #: (Never refuses: its hand-over waits while too much is queued.)
    max_pending: int | None = None
    #: (What it made durable may leave for ever: a data directory holds no lease.)
    valid_until: Callable[[], float] | None = None

    def __init__(self, data_dir: DataDir) -> None:
        self.data_dir = data_dir
        self._thread: Writer | None = None
        self._durable: Callable[[int, float | None], None] = lambda batch, seconds: None

    @property
    def pending(self) -> int:
        """Bytes handed to the thread that it has not taken yet."""
        return 0 if self._thread is None else self._thread.queued

    @property
    def thread(self) -> Writer:
        """The writer thread (once started)."""
        assert self._thread is not None, "start() first"
        return self._thread

    def start(
        self,
        durable: Callable[[int, float | None], None],
        failed: Callable[[str, BaseException], None],
    ) -> None:
        """Start the thread; it reports on the running loop."""
        self._durable = durable
        self._thread = Writer(
            self.data_dir,
            asyncio.get_running_loop(),
            durable,
            lambda error: failed("committing the journal", error),
        )

    def write(self, data: bytes, lone: bool) -> int:
        """Hand ``data`` to the thread as a batch, or write and sync it here if ``lone``
        and the thread is idle; the batch its turn's output waits for."""
        thread = self.thread
        if not data:  # (a turn of read-only commands logs nothing: no sync)
            return thread.handed
        started = time.perf_counter()
        if lone and thread.commit_here(data):
            self._durable(thread.handed, time.perf_counter() - started)  # (timed only)
            return thread.handed
        return thread.submit(data)

    def drain(self) -> None:
        """Block until the thread has made everything handed to it durable."""
        if self._thread is not None:
            self._thread.drain()

    def stop(self, *, discard: bool = False) -> None:
        """Let the thread finish what it was handed (or drop it), then end it."""
        if self._thread is not None:
            self._thread.stop(discard=discard)


class LoopCommit:
    """``--fsync off`` and ``batch``: the loop writes each turn (module docstring).
    ``sync_every``: ``batch``'s period (None: ``off``, never synced here)."""

    #: Nothing is ever handed over: every turn is written before :meth:`write` returns.
    pending: int = 0
    #: (Never refuses.)
    max_pending: int | None = None
    #: (What it wrote may leave for ever: a data directory holds no lease.)
    valid_until: Callable[[], float] | None = None

    def __init__(self, data_dir: DataDir, sync_every: float | None) -> None:
        self.data_dir = data_dir
        self.sync_every = sync_every
        self._unsynced = False
        self._task: asyncio.Task[None] | None = None
        self._durable: Callable[[int, float | None], None] = lambda batch, seconds: None
        self._failed: Callable[[str, BaseException], None] = lambda what, error: None

    def start(
        self,
        durable: Callable[[int, float | None], None],
        failed: Callable[[str, BaseException], None],
    ) -> None:
        """Start the syncer (``batch``)."""
        self._durable, self._failed = durable, failed
        if self.sync_every is not None:
            self._task = asyncio.ensure_future(self._sync_batches(self.sync_every))

    def write(self, data: bytes, lone: bool) -> int:
        """Write ``data`` now (timed): it is durable as the mode asks; batch 0 (nothing
        waits)."""
        started = time.perf_counter()
        if data:
            self.data_dir.write(data)
        self._durable(0, time.perf_counter() - started)
        self._unsynced = True
        return 0

    def drain(self) -> None:
        """Nothing: nothing is ever in flight."""

    def stop(self, *, discard: bool = False) -> None:
        """Stop the syncer (the data directory's close makes the rest durable)."""
        if self._task is not None:
            self._task.cancel()

    async def _sync_batches(self, every: float) -> None:
        """``--fsync batch``: make what was written durable every ``every`` seconds."""
        while True:
            await asyncio.sleep(every)
            if self._unsynced:
                self._unsynced = False
                started = time.perf_counter()
                try:
                    self.data_dir.commit(sync=True)
                except Exception as error:
                    self._failed("syncing the journal", error)
                    return
                self._durable(0, time.perf_counter() - started)
