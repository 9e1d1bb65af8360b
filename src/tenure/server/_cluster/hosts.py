"""The hosts of a cluster's server: the leader's, journaled to etcd, and the standby's.

Each is the single server's host (:mod:`tenure.server._server_host`) given other
plain objects:

* **The leader's** logs to a :class:`~tenure.server._cluster.journal.ClusterJournal`
  and makes each turn durable through the
  :class:`~tenure.server._cluster.appender.Appender` (group commit: the answers of a
  batch leave once it is in etcd). The appender brings the leader's two rules: its
  lease (nothing leaves once the lease could have run out in etcd, and the journal
  then fails, so the server steps down) and its bound on what waits for etcd
  (:data:`~tenure.server._cluster.appender.MAX_PENDING`). An append that the fence
  refuses, or etcd out of reach until the lease could end, fails the journal as a
  disk would a single server's: nothing more is acknowledged, and the server steps
  down; that is said as a warning (losing the lead is no disk failure).
* **The standby's** has neither journal nor writer: only the log changes its engine
  (the :class:`~tenure.server._cluster.follower.Follower`'s, swapped for a new one
  when the follower loads the state afresh), so every command fails ``NOT_LEADER``
  naming the leader, and no deadline runs; the engine's times are the leader's, shown
  in UNIX time by the leader's shift. What the follower applies reaches the
  standby's server (:func:`follow_into`): each engine it loads afresh, and each
  entry's effects, which fire the watches armed on the standby
  (:mod:`tenure.server._net.standby_watches`).
"""

from __future__ import annotations

from tenure._core import Engine
from tenure.server._cluster.appender import Appender
from tenure.server._cluster.follower import Follower
from tenure.server._cluster.journal import ClusterJournal
from tenure.server._cluster.role import ClusterRole
from tenure.server._config.serve_config import ServeConfig
from tenure.server._net.standby_watches import StandbyWatches
from tenure.server._observe import ServerObserver
from tenure.server._server_host import ServerHost, server_host

__all__ = ["follow_into", "leader_host", "standby_host", "unfollow"]


def leader_host(
    config: ServeConfig,
    journal: ClusterJournal,
    engine: Engine,
    role: ClusterRole,
    observer: ServerObserver | None = None,
) -> ServerHost:
    """The leader's host: ``engine`` (the follower's, resumed on this leader's clock),
    every change logged to ``journal`` and appended by its appender."""
    appender: Appender = journal.appender
    return server_host(config, engine, journal, appender, observer=observer, role=role)


def standby_host(
    config: ServeConfig, engine: Engine, role: ClusterRole, observer: ServerObserver | None = None
) -> ServerHost:
    """The standby's host: ``engine`` (the follower's), shown, never changed here."""
    return server_host(
        config,
        engine,
        None,
        None,
        observer=observer,
        role=role,
        leader_shift=lambda: role.leader_shift,
    )


def follow_into(follower: Follower, host: ServerHost, watches: StandbyWatches) -> None:
    """From now on, ``follower`` tells the standby's ``host`` of each engine it loads
    afresh (``watches``, armed in the old one, are given up), and ``watches`` of each
    entry's effects (those armed here fire). :func:`unfollow` undoes the second."""

    def loaded(engine: Engine) -> None:
        host.host.engine = engine
        watches.reloaded()

    follower.on_load = loaded
    follower.on_effects = watches.fired


def unfollow(follower: Follower) -> None:
    """The standby's term ends: the effects of the entries it applies go to no one."""
    follower.on_effects = None
