"""The tenure server: a thin asyncio shell around the engine (sockets, timers, disk).

The runtime, here:

* :mod:`tenure.server._serve`: the network server, which runs the rest;
* :mod:`tenure.server._server_host`: the server's host, built before the server: the
  runtime's :class:`~tenure._runtime.host.Host` given the server's journal and its
  group commit (:mod:`tenure.server._group_commit`), every change journaled; what
  the group commit is given, its journal and its writer, in
  :mod:`tenure.server._commit_seams`, and its snapshots begun and heard in
  :mod:`tenure.server._snapshots`;
* :mod:`tenure.server._reception`: the server's sockets admitted and connections
  served; :mod:`tenure.server._routing`: where the engine's effects go;
* :mod:`tenure.server._session_table`: which connection owns which session;
* :mod:`tenure.server._role`: whether this server leads (a lone server always does),
  what the parts that face clients are told of it;
* :mod:`tenure.server.plug`: the boundary with the faces of other lock services
  (:mod:`tenure.compat`): what the server lends a face, and what a face must be; the
  only module of the server they import;
* :mod:`tenure.server._faces`: the face registry, one line per face naming its entry
  in its own folder (its settings, counters, advertised address and maker: the one
  place the server imports :mod:`tenure.compat`), and :mod:`tenure.server._face_set`:
  the faces one server runs;
* :mod:`tenure.server._startup`: ``tenure serve`` from start to exit, and
  :mod:`tenure.server._start_failure`: why a start failed, in one line;
* :mod:`tenure.server._reload`: the TLS and auth files read again, all or nothing
  (SIGHUP, ``tenure reload``);
* :mod:`tenure.server._server_acts`: the server's own acts for its native clients
  (``tenure backup`` and ``tenure reload`` at its ``tenure://`` URL: who may, a backup
  read a part at a time), over :mod:`tenure.server._backups`: a backup of the running
  state as its bytes, from a forked child or a cluster's process, the places of
  ``--max-backups`` (the HTTP endpoint's backups read it too), and the clock of
  ``--backup-timeout`` that takes a stalled backup's place back;
* :mod:`tenure.server._shards`: ``tenure serve --shards N``, N servers on one host,
  started, signalled and stopped together.

By concern:

* :mod:`tenure.server._net`: connections: accepting them, the native face, the
  handshake, tokens and timeouts, the auth file, TLS, and the outboxes;
* :mod:`tenure.server._durability`: the data directory (a write-ahead log with
  snapshots), the engine made durable over it, the directory's lock and instance id;
* :mod:`tenure.server._config`: the settings of ``tenure serve`` from flags,
  environment and config file (see docs/operations.md);
* :mod:`tenure.server._http`: the HTTP endpoint of ``--http-port`` (``/metrics``,
  ``/healthz``, ``/readyz``; the ``server`` extra), fed through the hooks of
  :mod:`tenure.server._observe`; :mod:`tenure.server._logs`: the log's formats;
  :mod:`tenure.server._audit`: the audit log of ``--audit-log`` (a JSON line per
  administrative act and refusal, written off the loop); :mod:`tenure.server._long_holds`:
  each hold past its node's ``long_hold`` or ``--long-hold-seconds`` told once (log,
  audit, metrics); :mod:`tenure.server._state_walk`: every semaphore walked a slice
  of ``--step-budget`` at a time (what ``/metrics`` counts and the long holds read);
* :mod:`tenure.server._cluster`: ``tenure serve --cluster``, several servers as one
  replicated service over a log in etcd: a member's terms as standby and leader, its
  fenced appends, its warm engine (docs/cluster.md).

The cluster's package (``_cluster``: etcd's client, the ``etcd`` extra) is imported
only where a cluster is served, so that a lone server needs no more than
``tenure[server]`` (tests/install, issue 57).

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._runtime, tenure._protocol, tenure.server._cluster (lazily) and tenure.errors.
"""

from __future__ import annotations

from tenure.server._config.serve_config import ConfigError, ServeConfig
from tenure.server._durability.journal import Journal
from tenure.server._durability.storage import CorruptLogError, DataDir, FsyncMode, Recovered
from tenure.server._serve import Server
from tenure.server._server_host import ServerHost, wal_host
from tenure.server._startup import serve

__all__ = [
    "ConfigError",
    "CorruptLogError",
    "DataDir",
    "FsyncMode",
    "Journal",
    "Recovered",
    "ServeConfig",
    "Server",
    "ServerHost",
    "serve",
    "wal_host",
]
