"""The server's host: the engine driven on the event loop, every change journaled.

:class:`DurableHost` is a :class:`tenure._runtime.host.Host` (the same commands, timer
and effects) whose hooks log every change: a tick that handled deadlines, then the
command that succeeded. Nothing the engine did may reach a client before it is
committed, so effects and answers are only *queued* by the server (its
:class:`DurableOutput`); :meth:`DurableHost.flush`, scheduled once per loop
iteration, commits everything logged in that iteration at once (group commit) and
*seals* the output queued so far to that commit: it leaves once the commit is
durable.

With ``--fsync always`` the commit is the writer thread's
(:mod:`tenure.server._durability.writer`): :meth:`flush` hands the iteration's
records over as batch N and the loop goes on serving; when the thread reports N
durable, the output sealed to N (and to every batch before it) is released, in the
order it was queued. Output queued later waits for its own batch, so an answer
never overtakes an earlier one. A turn of one step with nothing in flight (a
sequential client) is committed on the loop instead (:data:`INLINE_MAX_STEPS`):
nothing else waits then, and the hand-over's two thread wake-ups would only
lengthen its answer's wait. With ``batch`` and ``off`` nothing waits for the disk,
and the loop writes the records itself (cheaper than a hand-over).

When a snapshot is due it starts one there, written by a forked child while the
loop goes on (:meth:`Journal.start_snapshot`), and puts it in place when the child
is done; the writer is drained first, so the new segment starts after every record
handed over.

A journal that cannot be written or committed is fatal: the journal is aborted
(what is not committed is forgotten, as a crash would), ``on_fatal`` is called, and
every later command fails with UnavailableError; output sealed to a batch not yet
durable never leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final, Protocol, TypeVar

from tenure._core import Command, Effect, Engine
from tenure._runtime.clock import LoopClock
from tenure._runtime.host import Host
from tenure.errors import UnavailableError
from tenure.server._durability.journal import Journal
from tenure.server._durability.storage import FsyncMode
from tenure.server._durability.writer import Writer
from tenure.server._net.token_rates import TokenRates
from tenure.server._observe import Observer

log = logging.getLogger("tenure.server")

R = TypeVar("R")

#: How often ``--fsync batch`` makes what was committed durable, in seconds (the
#: default of ``--batch-interval``).
BATCH_INTERVAL: Final = 0.05
#: A turn of at most this many engine steps, with nothing in flight, commits on the
#: event loop (``--fsync always``): a lone request (a sequential client) would only
#: wait longer for the writer thread's two wake-ups, and nothing else is waiting.
INLINE_MAX_STEPS: Final = 1


class DurableOutput(Protocol):
    """What the server owes its clients, sealed to commits (the server's Outboxes)."""

    def seal(self, batch: int, durable: int) -> None:
        """Everything queued so far leaves once ``batch`` is durable (now, if ``durable``
        already covers it)."""

    def release(self, durable: int) -> None:
        """Batches up to ``durable`` are durable: write what was sealed to them."""


class HostJournal(Protocol):
    """What the host logs every change to: the data directory's
    :class:`~tenure.server._durability.journal.Journal`, or a cluster's journal in
    etcd (:mod:`tenure.server._cluster`)."""

    @property
    def fsync(self) -> FsyncMode:
        """When what is logged is durable (a cluster's: ``always``, in etcd)."""
        ...

    @property
    def snapshot_fd(self) -> int | None:
        """While a snapshot is being written apart: a descriptor readable once done."""
        ...

    def log_command(self, command: Command[object], now: float, actor: str = "") -> None:
        """Queue a record of a command that succeeded."""

    def log_tick(self, now: float) -> None:
        """Queue a record of a tick that handled deadlines."""

    def take_pending(self) -> bytes:
        """The queued records' bytes, for a writer."""
        ...

    def commit(self) -> None:
        """Make every queued record durable, here and now."""

    def sync(self) -> None:
        """Make what was committed durable (``--fsync batch``)."""

    def needs_snapshot(self, engine: Engine | None = None) -> bool:
        """Whether a snapshot is due."""
        ...

    def start_snapshot(self, engine: Engine) -> int | None:
        """Begin a snapshot of ``engine`` as it is now; :attr:`snapshot_fd` (None: done)."""
        ...

    def finish_snapshot(self) -> bool:
        """The snapshot begun apart is written: put it in place."""
        ...

    def close(self, engine: Engine | None = None) -> None:
        """Commit and close."""

    def abort(self) -> None:
        """Close without committing what is queued."""


class BatchWriter(Protocol):
    """What makes the turns' records durable apart from the event loop: the journal's
    writer thread (:class:`~tenure.server._durability.writer.Writer`), or a cluster's
    appender to etcd."""

    def submit(self, data: bytes) -> int:
        """Hand one batch over; its number (the writer reports it durable later)."""
        ...

    def commit_here(self, data: bytes) -> bool:
        """Make ``data`` durable on the caller's thread if that is cheaper; False: not done."""
        ...

    def drain(self) -> None:
        """Block until everything handed over is durable."""

    def stop(self, *, discard: bool = False) -> None:
        """Finish (or with ``discard``, drop) what was handed over, then stop."""


class DurableHost(Host):
    """A :class:`~tenure._runtime.host.Host` whose every change is journaled (see the
    module docstring); the faces call it through :class:`tenure.server.plug.HostCalls`."""

    def __init__(
        self,
        journal: HostJournal,
        engine: Engine,
        *,
        deliver: Callable[[list[Effect]], None],
        output: DurableOutput,
        on_fatal: Callable[[], None],
        batch_interval: float = BATCH_INTERVAL,
        slow_commit: float = 0.0,
        observer: Observer | None = None,
    ) -> None:
        """``slow_commit``: a commit slower than this many seconds is logged (0: none);
        ``observer``: told of every command applied, every step's effects and every
        commit (None: nobody measures)."""
        super().__init__(LoopClock(), engine)
        self.journal = journal
        self.dead = False  # the journal failed: nothing more is applied or acknowledged
        self.stopped = False  # shutting down: no more commands or ticks
        self._deliver_to_server = deliver
        self._output = output
        self._on_fatal = on_fatal
        self.batch_interval = batch_interval
        self.slow_commit = slow_commit
        self.observer = observer
        #: The ``requests_per_second`` quotas of the tokens (None: none), checked
        #: before a token's command is applied (set by the server).
        self.rates: TokenRates | None = None
        self._loop = asyncio.get_running_loop()
        self._dirty = self._unsynced = False
        self._flush_handle: asyncio.Handle | None = None
        self._sync_task: asyncio.Task[None] | None = None
        self._writer: BatchWriter | None = None
        self._handed = 0  # the last batch handed to the writer
        self._durable = 0  # the last batch the writer made durable
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []  # for :meth:`committed`
        self._steps = 0  # engine steps (commands, ticks) since the last flush

    def start(self) -> None:
        """Arm the timer (deadlines carried over by recovery) and the fsync mode's helper:
        the writer thread for ``always``, the syncer for ``batch``."""
        self._writer = self._make_writer()
        if self._writer is None and self.journal.fsync is FsyncMode.BATCH:
            self._sync_task = asyncio.ensure_future(self._sync_batches())
        self._arm_timer()

    def _make_writer(self) -> BatchWriter | None:
        """The writer of ``--fsync always`` (None: the loop commits itself)."""
        journal = self.journal
        if journal.fsync is not FsyncMode.ALWAYS or not isinstance(journal, Journal):
            return None
        return Writer(journal.data_dir, self._loop, self._written, self._writer_failed)

    def execute(self, command: Command[R], actor: str = "") -> R:
        """Apply ``command`` now, logged; its effects are delivered even if it fails.

        ``actor`` is who sends it: the name of its connection's token ("" without an
        auth file). What it makes is that token's, and counts against its quotas
        (:mod:`tenure._core.quotas`); the engine knows it only while it applies it.

        Raises:
            The command's error; UnavailableError once stopped or dead.
        """
        if self.dead or self.stopped:
            raise UnavailableError("the server is shutting down")
        if actor:
            if self.rates is not None:
                self.rates.take(actor, self.clock.now())
            engine = self.engine
            engine.actor = actor
            try:
                value = super().execute(command)
            finally:
                engine.actor = ""
        else:
            value = super().execute(command)
        if self.observer is not None:
            self.observer.applied(command, value)
        return value

    def request_flush(self) -> None:
        """Have :meth:`flush` run soon (once, however often this is called)."""
        if self._flush_handle is None and not self.dead:
            self._flush_handle = self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Commit what was logged (snapshot if due); the output queued so far leaves once
        that is durable (at once without a writer thread)."""
        self._flush_handle = None
        if self.dead:
            return
        if self._dirty:
            try:
                if self._writer is not None:
                    data = self.journal.take_pending()
                    if data:  # (a turn of read-only commands logs nothing: no sync)
                        self._hand_over(self._writer, data)
                else:
                    self._commit(self.journal.commit)
                if self.journal.needs_snapshot(self.engine):
                    self._before_snapshot()
                    fd = self.journal.start_snapshot(self.engine)
                    if fd is not None:  # a child writes it: hear when it is done
                        self._loop.add_reader(fd, self._snapshot_written)
            except Exception as error:
                self._fatal("committing the journal", error)
                return
            self._dirty = False
            self._unsynced = True
        self._steps = 0
        self._output.seal(self._handed, self._durable)

    def _before_snapshot(self) -> None:
        """Drain the writer: the log's new segment starts after every record handed over."""
        if self._writer is not None:
            self._writer.drain()

    def _hand_over(self, writer: BatchWriter, data: bytes) -> None:
        """Give a turn's records to the writer thread, or commit them here when that
        is cheaper: a lone step with nothing in flight (:data:`INLINE_MAX_STEPS`)."""
        lone = self._steps <= INLINE_MAX_STEPS and self._handed == self._durable
        started = time.perf_counter()
        if lone and writer.commit_here(data):
            self._timed(time.perf_counter() - started)
        else:
            self._handed = writer.submit(data)

    async def committed(self) -> None:
        """:meth:`flush`, then wait until what was logged so far is durable (or the
        journal failed: see :attr:`dead`)."""
        self.flush()
        if self.dead or self._handed <= self._durable:
            return
        done: asyncio.Future[None] = self._loop.create_future()
        self._waiting.append((self._handed, done))
        await done

    def settle(self) -> None:
        """:meth:`flush` and wait (blocking) for the writer: everything logged is durable
        and every answer written out. For shutting down (or a failure, see :attr:`dead`)."""
        self.flush()
        if self._writer is None or self.dead:
            return
        try:
            self._writer.drain()
        except Exception as error:
            self._fatal("committing the journal", error)
            return
        self._written(self._handed, None)

    async def settled(self) -> None:
        """:meth:`settle`, for an event loop that may wait (a cluster's host waits for
        etcd here)."""
        self.settle()

    def _written(self, batch: int, seconds: float | None) -> None:
        """The writer made batches up to ``batch`` durable: release their output."""
        if self.dead:
            return
        if seconds is not None:
            self._timed(seconds)
        if batch <= self._durable:
            return  # settle() got there first
        self._durable = batch
        self._output.release(batch)
        if self._waiting:
            still = []
            for wanted, done in self._waiting:
                if wanted > batch:
                    still.append((wanted, done))
                elif not done.done():
                    done.set_result(None)
            self._waiting = still

    def _writer_failed(self, error: BaseException) -> None:
        self._fatal("committing the journal", error)

    def _snapshot_written(self) -> None:
        """The snapshot's child is done: put the snapshot in place (or keep the log)."""
        self._stop_hearing_snapshot()
        try:
            self.journal.finish_snapshot()
        except Exception as error:
            self._fatal("finishing a snapshot", error)

    def _stop_hearing_snapshot(self) -> None:
        fd = self.journal.snapshot_fd
        if fd is not None:
            self._loop.remove_reader(fd)

    def stop(self) -> None:
        """No more commands or ticks (the state stays as it is for :meth:`close`)."""
        self.stopped = True
        self._cancel_timer()

    def shutdown(self) -> bool:
        """Stop, then commit and close the journal; False if that failed (logged)."""
        self.stop()
        if self._sync_task is not None:
            self._sync_task.cancel()
        self._stop_hearing_snapshot()
        if self.dead:
            return False
        try:
            if self._writer is not None:
                self._writer.stop()  # what it was handed is durable first
            self.journal.close(self.engine)
        except OSError:
            log.exception("closing the journal failed")
            return False
        return True

    # -- the Host's hooks -----------------------------------------------------------------

    def _ticked(self, now: float) -> None:
        self._log(lambda: self.journal.log_tick(now))

    def _applied(self, command: Command[R], now: float) -> None:
        # (What _log does, inline: this runs for every command.)
        try:
            self.journal.log_command(command, now, self.engine.actor)
        except Exception as error:
            self._fatal("writing to the journal", error)
            raise UnavailableError("the server failed to log a change") from None
        self._dirty = True

    def _deliver(self, effects: list[Effect]) -> None:
        # Queued by the server, written only after the flush has committed them.
        if effects and self.observer is not None:
            self.observer.effects(effects)
        self._deliver_to_server(effects)

    def _timer_allowed(self) -> bool:
        return not (self.dead or self.stopped)

    def _after_step(self) -> None:
        super()._after_step()
        self._steps += 1
        self.request_flush()

    def _on_timer(self) -> None:
        with contextlib.suppress(UnavailableError):  # the journal failed: already fatal
            super()._on_timer()

    # -- inside ---------------------------------------------------------------------------

    def _commit(self, commit: Callable[[], None]) -> None:
        """Run a journal commit, timed: measured, and logged if slower than ``slow_commit``."""
        started = time.perf_counter()
        commit()
        self._timed(time.perf_counter() - started)

    def _timed(self, seconds: float) -> None:
        """A commit took ``seconds``: measured, and logged if slower than ``slow_commit``."""
        if self.observer is not None:
            self.observer.committed(seconds)
        if 0 < self.slow_commit < seconds:
            fields = {
                "seconds": round(seconds, 6),
                "slow_commit": self.slow_commit,
                "fsync": self.journal.fsync.value,
            }
            log.warning("slow commit", extra={"event": "slow_commit", "fields": fields})

    def _log(self, write: Callable[[], None]) -> None:
        try:
            write()
        except Exception as error:
            self._fatal("writing to the journal", error)
            raise UnavailableError("the server failed to log a change") from None
        self._dirty = True

    def abandon(self) -> None:
        """Stop at once, acknowledging nothing more: what was handed over and is not
        durable yet is dropped (a cluster's leader stepping down). Idempotent."""
        if self.dead:
            return
        self.dead = True
        self._abort()

    def _fatal(self, what: str, error: BaseException) -> None:
        if self.dead:
            return
        self.dead = True
        log.critical(
            "%s failed; stopping without acknowledging anything more", what, exc_info=error
        )
        self._abort()
        self._on_fatal()

    def _abort(self) -> None:
        """Drop what is not durable, stop the writer, the timer and any snapshot."""
        self._stop_hearing_snapshot()
        for _, done in self._waiting:
            if not done.done():
                done.set_result(None)  # they look at `dead`
        self._waiting.clear()
        try:
            if self._writer is not None:
                self._writer.stop(discard=True)  # before the file it writes is closed
            self.journal.abort()
        except OSError:
            log.exception("aborting the journal failed too")
        self._cancel_timer()

    async def _sync_batches(self) -> None:
        """``--fsync batch``: make what was committed durable every ``batch_interval``."""
        while not (self.dead or self.stopped):
            await asyncio.sleep(self.batch_interval)
            if self._unsynced and not (self.dead or self.stopped):
                self._unsynced = False
                try:
                    self._commit(self.journal.sync)
                except Exception as error:
                    self._fatal("syncing the journal", error)
