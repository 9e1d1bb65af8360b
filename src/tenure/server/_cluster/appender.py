"""The leader's writer: group commit to the cluster's log in etcd.

The server's host hands each turn's records to :meth:`Appender.submit` as batch N
and goes on serving (as it hands them to the journal's writer thread in a single
server). The appender takes what waits as one *round*: one log entry, or several in
a row when the records exceed ``max_entry`` bytes (a record is never split: the
configuration keeps every record within the limit). Up to ``max_in_flight`` rounds
are on their way to etcd at once; while they are, later batches accumulate, and the
next round carries all of them, so the busier the leader, the more batches share
one Txn, and a round never waits for the one before it to be answered (a lone
client's request need not wait for a whole append in flight). Rounds are reported
durable in order: once every entry of a round and of each before it is in etcd, the
host hears that batches up to the last one taken are durable, and their answers
leave.

Each entry is one fenced Txn (:meth:`ClusterStore.append`): it holds only while
this server leads in its term, and only if the entry before it is the log's last
(``P head``): entries sent together may reach etcd in any order, so one that comes
early is sent again once the entry before it is in. If this server no longer leads,
the append fails and the host is told the journal failed: it steps down, and
nothing not yet reported durable is acknowledged. An etcd that cannot be reached is
tried again until the leader's lease could have run out (``deadline``), then it
fails the same way.

A snapshot needs the index of the last entry that holds its records and none after
(:meth:`Appender.barrier`): a round never takes batches on both sides of a barrier.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from tenure.errors import NotLeaderError, UnavailableError
from tenure.server._cluster.keys import Entry
from tenure.server._cluster.store import Appended, ClusterStore
from tenure.server._durability.storage import unframed

log = logging.getLogger("tenure.cluster")

__all__ = ["MAX_IN_FLIGHT", "Appender"]

#: The pause between two tries of an append etcd did not answer, in seconds.
RETRY_PAUSE: Final = 0.05
#: Rounds on their way to etcd at once, by default (``--cluster-appends-in-flight``;
#: see the module docstring). One: on a machine whose cores the leader and etcd share,
#: more rounds are more, smaller Txns for the same work (measured: par 2,673 pairs/s
#: with one, 2,249 with two, 1,471 with four, three members and etcd on two cores);
#: more pay where etcd is far and the leader's CPU is not what it waits for.
MAX_IN_FLIGHT: Final = 1


@dataclass(eq=False)
class _Round:
    """Batches up to ``upto``, as entries ``first`` to ``last``, and their bytes."""

    upto: int
    first: int
    last: int
    size: int
    started: float
    entries: list[asyncio.Future[None]] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(entry.done() for entry in self.entries)


class Appender:
    """See the module docstring. ``on_durable(batch, seconds)`` and ``on_failed(error)``
    are called on the event loop; ``deadline()`` is when the leader's lease could end
    (loop time)."""

    def __init__(
        self,
        store: ClusterStore,
        *,
        lease: int,
        term: int,
        next_index: int,
        max_entry: int,
        deadline: Callable[[], float],
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        if max_in_flight < 1:
            raise ValueError("max_in_flight must be at least 1")
        self.store = store
        self.lease = lease
        self.term = term
        self.max_entry = max_entry
        self.max_in_flight = max_in_flight
        #: The index the next entry gets (one past the last sent).
        self.next_index = next_index
        #: The index of the last entry in etcd, with every entry before it.
        self.last_index = next_index - 1
        self._deadline = deadline
        self._loop = asyncio.get_running_loop()
        self._queue: list[tuple[int, bytes]] = []
        #: Bytes handed over and not reported durable yet (queued, or on their way).
        self.pending = 0
        self._handed = 0
        self._rounds: deque[_Round] = deque()  # on their way, in index order
        self._reported = 0  # the last batch reported durable
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._barriers: list[tuple[int, asyncio.Future[int]]] = []
        self._task: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None
        self.on_durable: Callable[[int, float], None] = lambda batch, seconds: None
        self.on_failed: Callable[[BaseException], None] = lambda error: None

    @property
    def handed(self) -> int:
        """The number of the last batch submitted (0: none yet)."""
        return self._handed

    def start(
        self, on_durable: Callable[[int, float], None], on_failed: Callable[[BaseException], None]
    ) -> None:
        """Begin appending what is submitted, telling the host through these two."""
        self.on_durable, self.on_failed = on_durable, on_failed
        self._task = asyncio.ensure_future(self._run())

    # -- BatchWriter ------------------------------------------------------------------

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

    def commit_here(self, data: bytes) -> bool:
        """Never: an append is a round trip to etcd, made by the appender's task."""
        return False

    def drain(self) -> None:
        """Nothing to do here: the loop cannot block for etcd (await :meth:`idle`)."""

    def stop(self, *, discard: bool = False) -> None:
        """Stop appending; what was not reported durable is dropped (never acknowledged)."""
        if self._task is not None:
            self._task.cancel()
        for task in self._tasks:
            task.cancel()
        self._queue.clear()
        self._rounds.clear()
        self.pending = 0
        for _, waiting in self._barriers:
            waiting.cancel()
        self._barriers.clear()
        self._idle.set()

    # -- for the leader ---------------------------------------------------------------

    async def idle(self) -> None:
        """Until everything submitted is appended (or the appender failed or stopped)."""
        await self._idle.wait()

    def barrier(self) -> asyncio.Future[int]:
        """The index of the last entry holding records of the batches submitted so far
        and of none after (what a snapshot of the state now covers)."""
        done: asyncio.Future[int] = self._loop.create_future()
        if not self._queue and not self._rounds:
            done.set_result(self.last_index)
        else:
            self._barriers.append((self._handed, done))
        return done

    # -- the task -----------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while True:
                if self._failed is not None:
                    raise self._failed
                if not self._queue or len(self._rounds) >= self.max_in_flight:
                    if not self._queue and not self._rounds:
                        self._idle.set()
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                self._send_round()
        except asyncio.CancelledError:
            raise
        except BaseException as error:
            self._fail(error)

    def _send_round(self) -> None:
        """Take what waits (up to the first barrier) and send it as entries."""
        pending = [batch for batch, _ in self._barriers if batch > self._taken()]
        upto = min(pending) if pending else self._handed
        taken = [data for batch, data in self._queue if batch <= upto]
        self._queue = [(batch, data) for batch, data in self._queue if batch > upto]
        data = b"".join(taken)
        chunks = _chunks(data, self.max_entry)
        first = self.next_index
        self.next_index += len(chunks)
        round_ = _Round(upto, first, self.next_index - 1, len(data), time.perf_counter())
        before = self._rounds[-1].entries[-1] if self._rounds else None
        for offset, chunk in enumerate(chunks):
            task = asyncio.ensure_future(
                self._append(first + offset, Entry(self.term, chunk), before)
            )
            self._tasks.add(task)
            task.add_done_callback(self._entry_done)
            round_.entries.append(task)
            before = task
        self._rounds.append(round_)

    def _taken(self) -> int:
        """The last batch taken into a round (0: none)."""
        return self._rounds[-1].upto if self._rounds else self._reported

    def _entry_done(self, task: asyncio.Task[None]) -> None:
        """An entry is in etcd (or failed): report the rounds done, in order."""
        self._tasks.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:
            self._fail(error)
            return
        while self._rounds and self._rounds[0].done:
            round_ = self._rounds.popleft()
            self._reported = round_.upto
            self.last_index = round_.last
            self.pending -= round_.size
            self.on_durable(round_.upto, time.perf_counter() - round_.started)
            while self._barriers and self._barriers[0][0] <= round_.upto:
                _, waiting = self._barriers.pop(0)
                if not waiting.done():
                    waiting.set_result(round_.last)
        self._wake.set()  # room for another round

    def _fail(self, error: BaseException) -> None:
        if self._failed is not None:
            return
        self._failed = error
        for task in self._tasks:
            task.cancel()
        self._queue.clear()
        self._rounds.clear()
        self._idle.set()
        self.on_failed(error)

    async def _append(self, index: int, entry: Entry, before: asyncio.Future[None] | None) -> None:
        """Append ``entry`` at ``index``, after ``before`` (the entry before it, if it
        is on its way too), trying again while the lease may last.

        Raises:
            NotLeaderError: this server no longer leads (the fence held it off).
            UnavailableError: etcd did not answer before the lease could have ended.
        """
        while True:
            try:
                result = await self.store.append(index, entry, self.lease)
            except UnavailableError as error:
                if self._loop.time() + RETRY_PAUSE >= self._deadline():
                    raise UnavailableError(
                        f"etcd did not take log entry {index} before this "
                        f"leader's lease could end: {error}"
                    ) from None
                log.warning("appending entry %d: %s; trying again", index, error)
                await asyncio.sleep(RETRY_PAUSE)
                continue
            if result is Appended.DONE:
                return
            if result is Appended.EARLY and before is not None:
                # Sent before the entry before it was in: again, once it is (if it
                # fails, so does the appender, and this entry with it).
                await asyncio.wait({before})
                if not before.cancelled() and before.exception() is None:
                    continue
            why = {
                Appended.DEPOSED: "its election key is gone",
                Appended.TAKEN: f"log entry {index} was written by another leader",
                Appended.EARLY: f"log entry {index - 1} is not in the log",
            }[result]
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
