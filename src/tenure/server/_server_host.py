"""The host a server serves through: a Host and its group commit, built before the server.

A server's host is composed, not derived: a :class:`~tenure._runtime.host.Host` (the
one that runs ``memory://`` too) is given the server's journal and, as its writer, a
:class:`~tenure.server._group_commit.GroupCommit` over that journal and the plain
object that makes each turn's records durable (a ``--fsync`` mode's writer, or a
cluster leader's appender to etcd). :func:`server_host` builds them, and
:func:`wal_host` a single server's, over its data directory; a cluster's are built by
:mod:`tenure.server._cluster.hosts`. :class:`ServerHost` holds the three and runs
them as one (started, stopped, abandoned, failed together). Who built it hands it to
the :class:`~tenure.server._serve.Server`, which attaches what only it owns
(:meth:`ServerHost.attach`): where effects go, the outboxes sealed to each commit,
and what to do once the journal fails.

The engine's clock is the :class:`~tenure.server._net.pauses.HeardClock`: the
server's own stalls, which its gate watches (:attr:`ServerHost.pauses`), do not count
against its clients (docs/guarantees.md 6e). A standby's host keeps the loop's clock
(it never ticks) and shows times on its leader's (``leader_shift``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from tenure._core import Effect, Engine
from tenure._runtime.clock import Clock, LoopClock
from tenure._runtime.host import Host
from tenure.server._commit_seams import BatchWriter, DurableOutput, ServerJournal
from tenure.server._config.serve_config import ServeConfig
from tenure.server._durability.fsync_modes import fsync_writer
from tenure.server._durability.journal import Journal
from tenure.server._group_commit import GroupCommit
from tenure.server._net.pauses import HeardClock, PauseWatch
from tenure.server._observe import ServerObserver
from tenure.server._role import STANDALONE_ROLE, Role

__all__ = ["ServerHost", "server_host", "wal_host"]


@dataclass(eq=False)
class ServerHost:
    """A server's host, its group commit and the pauses its clock leaves out (module
    docstring); the server's lifecycle calls go to it, its commands to :attr:`host`."""

    host: Host
    commit: GroupCommit
    #: The server's stalls (its gate watches them; the host's HeardClock leaves them out).
    pauses: PauseWatch

    def attach(
        self,
        route: Callable[[list[Effect]], None],
        output: DurableOutput,
        on_fatal: Callable[[], None],
    ) -> None:
        """What the server owns: where each step's effects go, the output sealed to each
        commit, and what to do once the journal failed (after the host has stopped)."""
        self.host.route = route

        def fatal() -> None:
            self._halt()
            on_fatal()

        self.commit.attach(output, fatal)

    @property
    def dead(self) -> bool:
        """Whether the journal failed: nothing more is applied or acknowledged."""
        return self.commit.dead

    def start(self) -> None:
        """Start the writer, the heard clock (deadlines run on it) and the timer."""
        self.commit.start()
        clock = self.host.clock
        if isinstance(clock, HeardClock) and self.commit.ticking:
            clock.start()  # (stalls told from idle time while deadlines run)
        self.host.start()

    def flush(self) -> None:
        """Commit what was logged; what is owed leaves once that is durable."""
        self.commit.flush()

    async def settled(self) -> None:
        """Until everything logged is durable and every answer written out."""
        await self.commit.settled()

    def stop(self) -> None:
        """No more commands or ticks (the state stays as it is for :meth:`shutdown`);
        whoever waits for the host to catch up is woken, and refused."""
        self.commit.stop()
        self._halt()

    def shutdown(self) -> bool:
        """Stop, then commit and close the journal; False if that failed (logged)."""
        self.stop()
        return self.commit.shutdown()

    def abandon(self) -> None:
        """Stop at once, acknowledging nothing more (a cluster's leader stepping down)."""
        self.commit.abandon()
        self._halt()

    def _halt(self) -> None:
        self.host.close()
        clock = self.host.clock
        if isinstance(clock, HeardClock):
            clock.stop()


def server_host(
    config: ServeConfig,
    engine: Engine,
    journal: ServerJournal | None,
    writer: BatchWriter | None,
    *,
    observer: ServerObserver | None = None,
    role: Role = STANDALONE_ROLE,
    leader_shift: Callable[[], float | None] | None = None,
) -> ServerHost:
    """A server's host over ``engine``, logging to ``journal`` made durable by
    ``writer`` (neither: a standby's, see :mod:`tenure.server._group_commit`).

    ``observer``: told of every command, every step's effects and every commit (None:
    nobody measures); ``role``: whom a standby's refusals name; ``leader_shift``: a
    standby's, what turns its engine's times (its leader's clock) into UNIX time
    (returning None while no leader is known: this server's own).
    """
    loop = asyncio.get_running_loop()
    pauses = PauseWatch(loop)
    # (Not state, none of these: a replay decides no deadlock, lifts the node limits
    # (the serving engine holds new nodes to them), ticks whole; the quotas and the
    # memory budget are the server's: tenure._core.quotas.)
    engine.deadlock_search_limit = config.deadlock_search_limit
    engine.why_look_limit = config.why_look_limit
    engine.name_stats.resize(config.contention_names, config.contention_share)
    engine.max_nodes = config.max_nodes
    engine.max_prefix_watches_per_node = config.max_prefix_watches_per_node
    engine.max_watches_per_semaphore = config.max_watches_per_semaphore
    engine.max_listed_per_firing = config.max_listed_per_firing
    engine.node_ceilings = config.node_ceilings
    engine.ledger.budget = config.memory_budget
    commit = GroupCommit(
        engine, journal, writer, role=role, slow_commit=config.slow_commit, observer=observer
    )
    clock: Clock = HeardClock(pauses)
    wall_clock: Callable[[], float] = time.time
    if leader_shift is not None:
        clock = LoopClock(loop)
        shift = leader_shift

        def wall_clock() -> float:
            leader = shift()
            return time.time() if leader is None else loop.time() + leader

    host = Host(
        engine,
        clock,
        journal,
        commit,
        wall_clock=wall_clock,
        step_budget=config.step_budget,
        observer=observer,
    )
    return ServerHost(host, commit, pauses)


def wal_host(
    config: ServeConfig, journal: Journal, engine: Engine, observer: ServerObserver | None = None
) -> ServerHost:
    """A single server's host: ``engine`` recovered from ``journal`` (the data
    directory's), each turn made durable as its ``--fsync`` mode says."""
    writer = fsync_writer(journal.data_dir, config.batch_interval)
    return server_host(config, engine, journal, writer, observer=observer)
