"""The group commit: each turn's records made durable at once, and nothing told before. [compiled]

:class:`GroupCommit` is the writer of a server's :class:`~tenure._runtime.host.Host`
(a :class:`~tenure._runtime.host.HostWriter`): the host applies a command and logs
it to the journal; nothing the engine did may reach a client before it is committed,
so effects and answers are only *queued* by the server (its outboxes);
:meth:`GroupCommit.flush`, scheduled once per loop iteration, commits everything
logged in that iteration at once and *seals* the output queued so far to that
commit: it leaves once the commit is durable.

How a turn's records become durable is its writer's (a ``BatchWriter``,
:mod:`tenure.server._commit_seams`), one plain object per way: the writer thread of
``--fsync always``, or the loop writing each turn itself (``batch``, whose syncer
makes it durable every ``--batch-interval``, and ``off``)
(:mod:`tenure.server._durability.fsync_modes`); for a cluster's leader, the fenced
appender to etcd (:mod:`tenure.server._cluster.appender`). A writer that takes the
records off the loop hands them over as batch N and reports N durable later; the
output sealed to N (and to every batch before it) is released then, in the order it
was queued, so an answer never overtakes an earlier one. A turn of one step with
nothing in flight (a sequential client) is committed on the loop instead when the
writer can (:data:`INLINE_MAX_STEPS`): the thread's two wake-ups would only lengthen
its answer's wait.

A leader's writer says besides until when what it committed may leave (its lease: a
flush past it releases nothing, and the journal fails, so the server steps down; an
answer that only reads the state is released at the flush that follows it, so a
leader paused past its lease answers no read when it wakes), and how far behind it
may fall before commands are refused. A writer that fails with NotLeaderError or
UnavailableError (only a leader's: its fence refused, or etcd was out of reach until
its lease could end) lost the lead, which is said as a warning; any other failure is
the disk's, critical. Either way the same end follows: the journal is aborted (what
is not committed is forgotten, as a crash would), ``on_fatal`` is called, and every
later command fails with UnavailableError; output sealed to a batch not yet durable
never leaves. A due snapshot is begun after a commit (:mod:`tenure.server._snapshots`).

A group commit without a journal is a standby's: only the log in etcd changes its
engine, so no command is applied here (each fails NotLeaderError naming the
leader) and no deadline runs; its answers, refusals all, leave at the end of their
turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Final

from tenure._core import Command, Engine
from tenure.errors import NotLeaderError, UnavailableError
from tenure.server._commit_seams import BatchWriter, CommitJournal, DurableOutput
from tenure.server._net.token_rates import TokenRates
from tenure.server._observe import ServerObserver
from tenure.server._role import STANDALONE_ROLE, Role
from tenure.server._snapshots import Snapshots

log = logging.getLogger("tenure.server")
leader_log = logging.getLogger("tenure.cluster")

#: A turn of at most this many engine steps, with nothing in flight, commits on the
#: event loop when its writer can: a lone request (a sequential client) would only
#: wait longer for the writer thread's two wake-ups, and nothing else is waiting.
INLINE_MAX_STEPS: Final = 1


class GroupCommit:
    """See the module docstring; a :class:`~tenure._runtime.host.HostWriter`.

    ``journal`` and ``writer`` are both given, or neither (a standby's). Its server
    attaches its output and its ``on_fatal`` (:meth:`attach`) before :meth:`start`.
    """

    _output: DurableOutput
    _on_fatal: Callable[[], None]

    def __init__(
        self,
        engine: Engine,
        journal: CommitJournal | None,
        writer: BatchWriter | None,
        *,
        role: Role = STANDALONE_ROLE,
        slow_commit: float = 0.0,
        observer: ServerObserver | None = None,
    ) -> None:
        """``engine``: the one whose changes ``journal`` logs (snapshots are of it);
        ``role``: whom a standby's refusals name; ``slow_commit``: a commit slower than
        this many seconds is logged (0: none); ``observer``: told of every commit
        (None: nobody measures)."""
        if (journal is None) is not (writer is None):
            raise ValueError("a journal and its writer, or neither (a standby's)")
        self.engine = engine
        self.journal = journal
        self.writer = writer
        self.role = role
        self.slow_commit = slow_commit
        self.observer = observer
        self.dead = False  # the journal failed: nothing more is applied or acknowledged
        self.stopped = False  # shutting down: no more commands or ticks
        #: Whether deadlines run (a standby's never do: ticks must be logged).
        self.ticking = journal is not None
        #: The ``requests_per_second`` quotas of the tokens (None: none), which every
        #: request of a token's, on any face, is counted against at its door
        #: (:meth:`admit_request`; set by the server).
        self.rates: TokenRates | None = None
        self._loop = asyncio.get_running_loop()
        self._dirty = False
        self._flush_handle: asyncio.Handle | None = None
        self._handed = 0  # the last batch handed to the writer
        self._durable = 0  # the last batch the writer made durable
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []  # for :meth:`committed`
        self._steps = 0  # engine steps (commands, ticks) since the last flush
        self._snapshots = (
            None
            if journal is None or writer is None
            else Snapshots(journal, writer.drain, engine, self._loop, self._fatal)
        )

    def attach(self, output: DurableOutput, on_fatal: Callable[[], None]) -> None:
        """What the server gives its host: the output sealed to each commit, and what to
        call once the journal failed."""
        self._output = output
        self._on_fatal = on_fatal

    def start(self) -> None:
        """Start the writer."""
        if self.writer is not None:
            self.writer.start(self._written, self._fatal)

    # -- HostWriter ---------------------------------------------------------------------

    def admit(self, command: Command[object], actor: str, now: float) -> None:
        """Refuse ``command`` (raise) if this server may not apply it now. (Its token's
        ``requests_per_second`` counted the request it is part of: :meth:`admit_request`.)

        Raises:
            NotLeaderError: a standby's, naming the leader.
            UnavailableError: stopped, dead, or the writer too far behind.
        """
        writer = self.writer
        if writer is None:
            raise NotLeaderError.pointing_to(self.role.leader(), "this server is a standby")
        limit = writer.max_pending
        if limit is not None and writer.pending > limit:
            raise UnavailableError(
                f"the cluster's log in etcd is {writer.pending} bytes behind (more than "
                f"{limit}): try again once etcd has caught up"
            )
        if self.dead or self.stopped:
            raise UnavailableError("the server is shutting down")

    def admit_request(self, actor: str, now: float) -> None:
        """Count one request of token ``actor`` at ``now`` against its
        ``requests_per_second`` (:class:`~tenure.server._net.token_rates.TokenRates`).

        Raises:
            LimitExceededError: the token is over it.
        """
        if self.rates is not None:
            self.rates.take(actor, now)

    def stepped(self, logged: bool) -> None:
        """A step is done (``logged``: it logged a change): :meth:`flush` at the end of
        this turn."""
        if logged:
            self._dirty = True
        self._steps += 1
        if self._flush_handle is None and not self.dead:
            self._flush_handle = self._loop.call_soon(self.flush)

    def failed(self, what: str, error: BaseException) -> None:
        """Logging a change failed: fatal (module docstring)."""
        self._fatal(what, error)

    async def committed(self) -> None:
        """:meth:`flush`, then wait until what was logged so far is durable (or the
        journal failed: see :attr:`dead`)."""
        self.flush()
        if self.dead or self._handed <= self._durable:
            return
        done: asyncio.Future[None] = self._loop.create_future()
        self._waiting.append((self._handed, done))
        await done

    # -- the turn -----------------------------------------------------------------------

    def request_flush(self) -> None:
        """Have :meth:`flush` run soon (once, however often this is called)."""
        if self._flush_handle is None and not self.dead:
            self._flush_handle = self._loop.call_soon(self.flush)

    def flush(self) -> None:
        """Commit what was logged (snapshot if due); the output queued so far leaves once
        that is durable (at once if it already is)."""
        self._flush_handle = None
        if self.dead:
            return
        writer, journal = self.writer, self.journal
        valid_until = None if writer is None else writer.valid_until
        if valid_until is not None and self._loop.time() >= valid_until():
            why = NotLeaderError.pointing_to(None, "this leader's lease may have ended in etcd")
            self._fatal("holding the lease", why)
            return
        if self._dirty and writer is not None and journal is not None:
            try:
                lone = self._steps <= INLINE_MAX_STEPS and self._handed == self._durable
                self._handed = writer.write(journal.take_pending(), lone)
                if journal.needs_snapshot(self.engine):
                    self._start_snapshot()
            except Exception as error:
                self._fatal("committing the journal", error)
                return
            self._dirty = False
        self._steps = 0
        self._output.seal(self._handed, self._durable)

    def _start_snapshot(self) -> None:
        assert self._snapshots is not None  # (a journal has them)
        self._snapshots.start(in_flight=self._handed > self._durable)

    async def settled(self) -> None:
        """:meth:`flush`, then until everything logged is durable and every answer written
        out (or the journal failed: see :attr:`dead`). For shutting down."""
        self.flush()
        if self.writer is None or self.dead:
            return
        try:
            self.writer.drain()
        except Exception as error:
            self._fatal("committing the journal", error)
            return
        await self.committed()

    def _written(self, batch: int, seconds: float | None) -> None:
        """The writer made batches up to ``batch`` durable: release their output."""
        if self.dead:
            return
        if seconds is not None:
            self._timed(seconds)
        if batch <= self._durable:
            return  # (a commit on the loop: its output was never held)
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
        snapshots = self._snapshots
        if (
            snapshots is not None
            and snapshots.due_at is not None
            and batch == self._handed
            and not (self._dirty or self.stopped)
        ):
            # The writer has nothing in flight and nothing is logged since: the
            # snapshot that waited for it starts now (still due: none began meanwhile).
            snapshots.resume()

    # -- the end ------------------------------------------------------------------------

    def stop(self) -> None:
        """No more commands or ticks (the state stays as it is for :meth:`shutdown`)."""
        self.stopped = True
        self.ticking = False

    def shutdown(self) -> bool:
        """Stop, then commit and close the journal; False if that failed (logged)."""
        self.stop()
        if self._snapshots is not None:
            self._snapshots.stop_hearing()
        if self.dead:
            return False
        if self.journal is None or self.writer is None:
            return True  # (a standby's: nothing to close)
        try:
            self.writer.stop()  # what it was handed is durable first
            self.journal.close(self.engine)
        except OSError:
            log.exception("closing the journal failed")
            return False
        return True

    def abandon(self) -> None:
        """Stop at once, acknowledging nothing more: what was handed over and is not
        durable yet is dropped (a cluster's leader stepping down). Idempotent."""
        if self.dead:
            return
        self.dead = True
        self.ticking = False
        self._abort()

    def _fatal(self, what: str, error: BaseException) -> None:
        if self.dead:
            return
        self.dead = True
        self.ticking = False
        if isinstance(error, NotLeaderError | UnavailableError):
            # Losing the lead is no disk failure (module docstring): said as a warning.
            fields = {"what": what, "why": str(error)}
            leader_log.warning(
                "no longer leading: nothing more is acknowledged",
                extra={"event": "leader_lost", "fields": fields},
            )
        else:
            log.critical(
                "%s failed; stopping without acknowledging anything more", what, exc_info=error
            )
        self._abort()
        self._on_fatal()

    def _abort(self) -> None:
        """Drop what is not durable, stop the writer and any snapshot."""
        if self._snapshots is not None:
            self._snapshots.stop_hearing()
        for _, done in self._waiting:
            if not done.done():
                done.set_result(None)  # they look at `dead`
        self._waiting.clear()
        if self.journal is None or self.writer is None:
            return
        try:
            self.writer.stop(discard=True)  # before the file it writes is closed
            self.journal.abort()
        except OSError:
            log.exception("aborting the journal failed too")

    # -- measuring ----------------------------------------------------------------------

    def _timed(self, seconds: float) -> None:
        """A commit took ``seconds``: measured, and logged if slower than ``slow_commit``."""
        if self.observer is not None:
            self.observer.committed(seconds)
        if 0 < self.slow_commit < seconds and self.journal is not None:
            fields = {
                "seconds": round(seconds, 6),
                "slow_commit": self.slow_commit,
                "fsync": self.journal.fsync.value,
            }
            log.warning("slow commit", extra={"event": "slow_commit", "fields": fields})
