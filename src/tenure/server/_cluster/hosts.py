"""The hosts of a cluster's server: the leader's, journaled to etcd, and the standby's.

:class:`LeaderHost` is the single server's
:class:`~tenure.server._durable_host.DurableHost` with a
:class:`~tenure.server._cluster.journal.ClusterJournal`: every change is logged,
each turn's records are handed to the :class:`~tenure.server._cluster.appender.Appender`
as one batch (group commit), and the answers of a batch leave once it is in etcd.
Two things differ:

* **The lease.** Nothing leaves once the leader's lease could have run out in etcd
  (``deadline``, from the last renewal etcd answered, less a margin): a flush past
  it releases nothing, and the journal fails, so the server steps down. An answer
  that only reads the state is released at the flush that follows it, so a leader
  paused past its lease (SIGSTOP, a stalled VM) answers no read when it wakes.
* **Failing.** An append that the fence refuses, or etcd out of reach until the
  deadline, fails the journal as a disk would a single server's: nothing more is
  acknowledged, and ``on_fatal`` (the server's step down) runs.

:class:`StandbyHost` serves nothing: every command fails ``NOT_LEADER`` naming the
leader, and it has no timer: the engine it shows (the dashboard, metrics) is the
follower's, which only the log changes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Final, TypeVar

from tenure._core import Command, Effect, Engine
from tenure.errors import NotLeaderError, UnavailableError
from tenure.server._cluster.appender import Appender
from tenure.server._cluster.journal import ClusterJournal
from tenure.server._durability.storage import FsyncMode
from tenure.server._durable_host import BatchWriter, DurableHost, DurableOutput
from tenure.server._observe import Observer

__all__ = ["MAX_PENDING", "LeaderHost", "StandbyHost"]

#: Bytes of records handed to the appender and not in etcd yet beyond which the leader
#: refuses commands (UnavailableError, "try again") instead of queueing more: an etcd
#: that answers slower than clients ask cannot make the leader's memory grow without
#: bound (a single server's writer thread stops the loop at the same size).
MAX_PENDING: Final = 64 * 1024 * 1024

log = logging.getLogger("tenure.cluster")

R = TypeVar("R")


class LeaderHost(DurableHost):
    """See the module docstring."""

    def __init__(
        self,
        journal: ClusterJournal,
        engine: Engine,
        *,
        deadline: Callable[[], float],
        deliver: Callable[[list[Effect]], None],
        output: DurableOutput,
        on_fatal: Callable[[], None],
        batch_interval: float = 0.05,
        slow_commit: float = 0.0,
        observer: Observer | None = None,
        max_pending: int = MAX_PENDING,
    ) -> None:
        """``deadline()``: the loop time when this leader's lease could end in etcd;
        ``max_pending``: see :data:`MAX_PENDING`."""
        super().__init__(
            journal,
            engine,
            deliver=deliver,
            output=output,
            on_fatal=on_fatal,
            batch_interval=batch_interval,
            slow_commit=slow_commit,
            observer=observer,
        )
        self.cluster_journal = journal
        self.appender: Appender = journal.appender
        self._deadline = deadline
        self.max_pending = max_pending

    def execute(self, command: Command[R], actor: str = "") -> R:
        """As a single server's, unless etcd is too far behind (:data:`MAX_PENDING`).

        Raises:
            UnavailableError: that many bytes wait for etcd already: try again.
        """
        pending = self.appender.pending
        if pending > self.max_pending:
            raise UnavailableError(
                f"the cluster's log in etcd is {pending} bytes behind (more than "
                f"{self.max_pending}): try again once etcd has caught up"
            )
        return super().execute(command, actor)

    def _make_writer(self) -> BatchWriter | None:
        self.appender.start(self._written, self._writer_failed)
        return self.appender

    def _before_snapshot(self) -> None:
        """Nothing to drain: the appender's barrier says which entries a snapshot covers."""

    def flush(self) -> None:
        """As a single server's, but never past the lease (module docstring)."""
        if not self.dead and self._loop.time() >= self._deadline():
            self._flush_handle = None
            why = NotLeaderError.pointing_to(None, "this leader's lease may have ended in etcd")
            self._fatal("holding the lease", why)
            return
        super().flush()

    def _fatal(self, what: str, error: BaseException) -> None:
        """Losing the lead is no disk failure: said as a warning, then the same end."""
        if isinstance(error, NotLeaderError | UnavailableError) and not self.dead:
            self.dead = True
            fields = {"what": what, "why": str(error)}
            log.warning(
                "no longer leading: nothing more is acknowledged",
                extra={"event": "leader_lost", "fields": fields},
            )
            self._abort()
            self._on_fatal()
            return
        super()._fatal(what, error)

    def settle(self) -> None:
        """Flush only: answers leave when etcd has their entries, never before."""
        self.flush()

    async def settled(self) -> None:
        """Flush, then until every entry handed over is in etcd (or the journal failed)."""
        self.flush()
        if self.dead:
            return
        await self.appender.idle()


class StandbyHost(DurableHost):
    """See the module docstring: every command is refused; nothing is journaled."""

    def __init__(
        self,
        engine: Engine,
        *,
        leader: Callable[[], str | None],
        shift: Callable[[], float | None],
        deliver: Callable[[list[Effect]], None],
        output: DurableOutput,
        on_fatal: Callable[[], None],
        observer: Observer | None = None,
    ) -> None:
        """``leader()``: the leader's native address (None: unknown), for the refusals;
        ``shift()``: what turns the engine's times (the leader's clock) into UNIX time
        (None: unknown, this server's own is used)."""
        super().__init__(
            _NO_JOURNAL,
            engine,
            deliver=deliver,
            output=output,
            on_fatal=on_fatal,
            observer=observer,
        )
        self._leader = leader
        self._shift = shift

    def wall_shift(self) -> float:
        """The leader's: the engine's times are on its clock (the log carries them)."""
        shift = self._shift()
        return super().wall_shift() if shift is None else shift

    def start(self) -> None:
        """No timer and no writer: only the log changes the engine."""

    def execute(self, command: Command[R], actor: str = "") -> R:
        """Refused: this server does not lead.

        Raises:
            NotLeaderError: always, naming the leader.
        """
        raise NotLeaderError.pointing_to(self._leader(), "this server is a standby")

    async def committed(self) -> None:
        """Nothing is ever pending here."""

    def shutdown(self) -> bool:
        """Stop (there is no journal to close)."""
        self.stop()
        return True


class _NoJournal:
    """The journal of a host that applies nothing (a standby's)."""

    fsync = FsyncMode.OFF
    snapshot_fd = None

    def log_command(self, command: Command[object], now: float, actor: str = "") -> None:
        raise AssertionError("a standby applies nothing")

    def log_tick(self, now: float) -> None:
        raise AssertionError("a standby applies nothing")

    def take_pending(self) -> bytes:
        return b""

    def commit(self) -> None:
        pass

    def sync(self) -> None:
        pass

    def needs_snapshot(self, engine: Engine | None = None) -> bool:
        return False

    def start_snapshot(self, engine: Engine) -> int | None:
        return None

    def finish_snapshot(self) -> bool:
        return False

    def close(self, engine: Engine | None = None) -> None:
        pass

    def abort(self) -> None:
        pass


_NO_JOURNAL = _NoJournal()
