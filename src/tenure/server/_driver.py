"""The engine on the event loop, made durable: EngineHost's job plus the journal's contract.

:class:`JournaledEngine` is a :class:`tenure._runtime.host.EngineHost` (the same commands,
timer and effects) whose hooks log every change: a tick that handled deadlines, then the
command that succeeded. Nothing the engine did may reach a client before it is
committed, so effects and answers are only *queued* by the server; :meth:`flush`,
scheduled once per loop iteration, commits everything logged in that iteration at
once (group commit) and only then calls ``on_durable`` to write them out. When a
snapshot is due it starts one there, written by a forked child while the loop goes
on (:meth:`Journal.start_snapshot`), and puts it in place when the child is done.

A journal that cannot be written or committed is fatal: the journal is aborted
(what is not committed is forgotten, as a crash would), ``on_fatal`` is called, and
every later command fails with UnavailableError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Final, TypeVar

from tenure._core import Command, Effect, Engine
from tenure._runtime.clock import LoopClock
from tenure._runtime.host import EngineHost
from tenure.errors import UnavailableError
from tenure.server._durability.journal import Journal
from tenure.server._durability.storage import FsyncMode
from tenure.server._observe import Observer

log = logging.getLogger("tenure.server")

R = TypeVar("R")

#: How often ``--fsync batch`` makes what was committed durable, in seconds (the
#: default of ``--batch-interval``).
BATCH_INTERVAL: Final = 0.05


class JournaledEngine(EngineHost):
    """An :class:`EngineHost` whose every change is logged (see the module docstring)."""

    def __init__(
        self,
        journal: Journal,
        engine: Engine,
        *,
        deliver: Callable[[list[Effect]], None],
        on_durable: Callable[[], None],
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
        self._on_durable = on_durable
        self._on_fatal = on_fatal
        self.batch_interval = batch_interval
        self.slow_commit = slow_commit
        self.observer = observer
        self._loop = asyncio.get_running_loop()
        self._dirty = self._unsynced = False
        self._flush_handle: asyncio.Handle | None = None
        self._sync_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Arm the timer (deadlines carried over by recovery) and, for batch fsync, the syncer."""
        if self.journal.data_dir.fsync is FsyncMode.BATCH:
            self._sync_task = asyncio.ensure_future(self._sync_batches())
        self._arm_timer()

    def execute(self, command: Command[R]) -> R:
        """Apply ``command`` now, logged; its effects are delivered even if it fails.

        Raises:
            The command's error; UnavailableError once stopped or dead.
        """
        if self.dead or self.stopped:
            raise UnavailableError("the server is shutting down")
        value = super().execute(command)
        if self.observer is not None:
            self.observer.applied(command, value)
        return value

    def request_flush(self) -> None:
        """Have :meth:`flush` run soon (once, however often this is called)."""
        if self._flush_handle is None and not self.dead:
            self._flush_handle = self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Commit what was logged (snapshot if due), then let the server write its output."""
        self._flush_handle = None
        if self.dead:
            return
        if self._dirty:
            try:
                self._commit(self.journal.commit)
                if self.journal.needs_snapshot(self.engine):
                    fd = self.journal.start_snapshot(self.engine)
                    if fd is not None:  # a child writes it: hear when it is done
                        self._loop.add_reader(fd, self._snapshot_written)
            except Exception:
                self._fatal("committing the journal")
                return
            self._dirty = False
            self._unsynced = True
        self._on_durable()

    def _snapshot_written(self) -> None:
        """The snapshot's child is done: put the snapshot in place (or keep the log)."""
        self._stop_hearing_snapshot()
        try:
            self.journal.finish_snapshot()
        except Exception:
            self._fatal("finishing a snapshot")

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
            self.journal.close(self.engine)
        except OSError:
            log.exception("closing the journal failed")
            return False
        return True

    # -- EngineHost hooks -----------------------------------------------------------------

    def _ticked(self, now: float) -> None:
        self._log(lambda: self.journal.log_tick(now))

    def _applied(self, command: Command[R], now: float) -> None:
        self._log(lambda: self.journal.log_command(command, now))

    def _deliver(self, effects: list[Effect]) -> None:
        # Queued by the server, written only after the flush has committed them.
        if effects and self.observer is not None:
            self.observer.effects(effects)
        self._deliver_to_server(effects)

    def _timer_allowed(self) -> bool:
        return not (self.dead or self.stopped)

    def _after_step(self) -> None:
        super()._after_step()
        self.request_flush()

    def _on_timer(self) -> None:
        with contextlib.suppress(UnavailableError):  # the journal failed: already fatal
            super()._on_timer()

    # -- inside ---------------------------------------------------------------------------

    def _commit(self, commit: Callable[[], None]) -> None:
        """Run a journal commit, timed: measured, and logged if slower than ``slow_commit``."""
        started = time.perf_counter()
        commit()
        seconds = time.perf_counter() - started
        if self.observer is not None:
            self.observer.committed(seconds)
        if 0 < self.slow_commit < seconds:
            fields = {
                "seconds": round(seconds, 6),
                "slow_commit": self.slow_commit,
                "fsync": self.journal.data_dir.fsync.value,
            }
            log.warning("slow commit", extra={"event": "slow_commit", "fields": fields})

    def _log(self, write: Callable[[], None]) -> None:
        try:
            write()
        except Exception:
            self._fatal("writing to the journal")
            raise UnavailableError("the server failed to log a change") from None
        self._dirty = True

    def _fatal(self, what: str) -> None:
        if self.dead:
            return
        self.dead = True
        log.critical("%s failed; stopping without acknowledging anything more", what, exc_info=True)
        self._stop_hearing_snapshot()
        try:
            self.journal.abort()
        except OSError:
            log.exception("aborting the journal failed too")
        self._cancel_timer()
        self._on_fatal()

    async def _sync_batches(self) -> None:
        """``--fsync batch``: make what was committed durable every ``batch_interval``."""
        while not (self.dead or self.stopped):
            await asyncio.sleep(self.batch_interval)
            if self._unsynced and not (self.dead or self.stopped):
                self._unsynced = False
                try:
                    self._commit(lambda: self.journal.data_dir.commit(sync=True))
                except Exception:
                    self._fatal("syncing the journal")
