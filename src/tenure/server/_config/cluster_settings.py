"""The settings of ``tenure serve --cluster``: a server that is one member of a cluster.

Rows of the settings table (:data:`tenure.server._config.settings.SETTINGS` ends
with them); what they mean is in docs/cluster.md. Without ``--cluster`` none of them
matters: the server keeps its own write-ahead log, as it always did.
"""

from __future__ import annotations

from typing import Final

from tenure.server._config.setting import Setting, in_range

__all__ = [
    "CLUSTER_SETTINGS",
    "DEFAULT_CELL",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_MAX_ENTRY",
    "DEFAULT_SNAPSHOT_EVERY",
    "DEFAULT_STALE_READ_WAIT",
    "ENTRY_OVERHEAD",
]

#: The cell of a member started without ``--cell``: every cluster made before cells
#: existed is a service of this one cell (docs/cluster.md, "Cells").
DEFAULT_CELL: Final = "default"
#: The leader's lease in etcd, in seconds: a dead leader's successor is elected about
#: this long after it died, and a leader cut off from etcd stops serving within it.
DEFAULT_LEASE_TTL: Final = 5
#: The largest log entry (and snapshot chunk) written to etcd, in bytes: within etcd's
#: default ``--max-request-bytes`` (1.5 MiB) with room for the Txn around it.
DEFAULT_MAX_ENTRY: Final = 1_310_720
#: What a journal record adds to a command's frame (its kind, time and framing), at
#: most: ``--max-frame-size`` plus this must fit in ``--cluster-max-entry``.
ENTRY_OVERHEAD: Final = 1024
#: Records appended between two snapshots, at least (and a quarter of the state).
DEFAULT_SNAPSHOT_EVERY: Final = 10_000
#: How long a standby waits to confirm its state fresh enough for a read that allows
#: some staleness, in seconds, before it answers UNAVAILABLE (the client asks the leader).
DEFAULT_STALE_READ_WAIT: Final = 1.0

CLUSTER_SETTINGS: Final = (
    Setting(
        "cluster",
        str,
        "",
        "URL",
        "serve as one member of a replicated cluster whose log lives in etcd: "
        "etcd://HOST:PORT[,HOST:PORT...]/NAME (etcds:// for TLS; ?prefix=, ?user=&password=, "
        "?ca=&cert=&key= as for the etcd:// backend); the servers started with the same URL "
        "elect one leader, the others are standbys; empty: a single server with its own "
        "write-ahead log in --data-dir (default: empty)",
    ),
    Setting(
        "cell",
        str,
        DEFAULT_CELL,
        "CELL",
        "cluster: the cell of the service this member belongs to: the members started with "
        "the same --cluster and --cell are one cell (a leader and standbys), the cells of one "
        '--cluster one service, each node served by one cell (docs/cluster.md, "Cells") '
        "(default: %(default)s)",
    ),
    Setting(
        "cell_etcd",
        str,
        "",
        "URL",
        "cluster: the etcd this cell's log lives in, etcd://HOST:PORT[,HOST:PORT...] "
        "(options as --cluster's); the service's directory stays in --cluster's etcd; "
        "empty: --cluster's (default: empty)",
    ),
    Setting(
        "advertise",
        str,
        "",
        "HOST:PORT",
        "cluster: the address clients reach this server at, which standbys name when they "
        "send clients to the leader; empty: --host and the port bound (a wildcard --host "
        "needs it) (default: empty)",
    ),
    Setting(
        "member_name",
        str,
        "",
        "NAME",
        "cluster: this server's name among the members; empty: its advertised address "
        "(default: empty)",
    ),
    Setting(
        "cluster_lease_ttl",
        int,
        DEFAULT_LEASE_TTL,
        "SECONDS",
        "cluster: the leader's lease in etcd: a dead leader is replaced about this long after "
        "it died, and a leader that cannot renew it stops serving before it ends, 2 to 120 "
        "(default: %(default)s)",
        in_range(2, 120),
    ),
    Setting(
        "cluster_max_entry",
        int,
        DEFAULT_MAX_ENTRY,
        "BYTES",
        "cluster: the largest log entry or snapshot chunk written to etcd; at most etcd's "
        "--max-request-bytes less 64 KiB, and at least --max-frame-size + 1024 "
        "(default: %(default)s)",
        in_range(65_536 + ENTRY_OVERHEAD, 256 * 1024 * 1024),
    ),
    Setting(
        "cluster_snapshot_every",
        int,
        DEFAULT_SNAPSHOT_EVERY,
        "RECORDS",
        "cluster: a snapshot is written to etcd (and the log before it deleted) after at "
        "least this many records and a quarter of the state's size (default: %(default)s)",
        in_range(1, 100_000_000),
    ),
    Setting(
        "stale_read_wait",
        float,
        DEFAULT_STALE_READ_WAIT,
        "SECONDS",
        "cluster: how long a standby waits to confirm its state fresh enough for a read "
        "that allows some staleness (a client's max_staleness) before it answers "
        "UNAVAILABLE and the client asks the leader, 0.01 to 10: the connection's later "
        "frames, its Pings too, wait for that answer (default: %(default)s)",
        in_range(0.01, 10.0),
    ),
)
