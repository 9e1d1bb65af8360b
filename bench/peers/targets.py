"""What a scripts/bench run is judged against, by workload; and whether one run meets it.

A :class:`Target` is one goal: tenure's value against a peer's (a ratio), or a
bound, with a one-line reason for its threshold. :data:`TARGETS` keys them by the
workload they judge (the report's targets tables, in this order); :func:`judge`
decides one from the Measures of one run. A ratio compares like with like: durable
tenure with etcd (both fsync every change), tenure's cluster (its log in etcd) with
etcd and with durable single-server tenure, non-durable tenure with Redis without
persistence, a *client each* tenure row with the peer's *client each* row, and
tenure's release awaited (seq-awaited) with redis-py's, which always waits.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.tools.results import Measure, client_each


@dataclass(frozen=True)
class Target:
    """A goal: tenure's value against a peer's (a ratio), or a bound.

    ``goal=None`` is a comparison that is reported without a goal.
    """

    label: str  # what is compared, unique within its workload
    reason: str  # one line: why this threshold
    workload: str  # of the Measures judged
    metric: str
    goal: float | None
    systems: tuple[str, ...] = ("tenure-off",)  # the first measured is used
    peer: str | None = None  # the peer system, for a ratio
    peer_workload: str | None = None  # when it differs from ``workload``
    peer_metric: str | None = None  # when it differs from ``metric``
    scale: float = 1.0  # tenure's value is multiplied by this (a pair = 2 round trips)
    at_most: bool = False  # the value must be <= goal (else >=)
    context: str | None = None  # a peer whose value is shown beside a bound, no ratio


@dataclass(frozen=True)
class Verdict:
    """One row of a targets table: what was compared and whether the goal was met."""

    target: Target
    mine: Measure | None
    peer: Measure | None  # the ratio's peer, or the context peer of a bound
    value: float | None  # the ratio (with a peer) or tenure's value; None: not run
    met: bool | None  # None: not run, or nothing to meet (goal None)


OFF, ALWAYS = "tenure-off", "tenure-always"
OFF_EACH, ALWAYS_EACH = client_each(OFF), client_each(ALWAYS)
REDIS_EACH, ETCD_EACH = client_each("redis"), client_each("etcd")
SERVERS = (OFF, ALWAYS, "tenure-memory")
ON_ETCD, ON_REDIS, ON_PG = ("tenure-etcd",), ("tenure-redis",), ("tenure-postgres",)
CLUSTER = "tenure-cluster"
CLUSTER_EACH = client_each(CLUSTER)

# The reasons, each shared by the targets it explains.
_LEAN = "in memory on both sides: a server built only for locks should do far less per call"
_AWAITED = (
    "both wait for the release's answer, two round trips a pair: what is left is a request's"
    " cost on each side, where a lock-only server should beat a general one"
)
_CEILING = "a server that only echoes bounds any Python server here: locks may cost 30% of it"
_QUEUE = "a server-side queue should beat a lock that polls every 0.1 s"
_FIFO = "waiters are served in arrival order: a later wait is never granted first"
_JAIN = "every client of a contended lock gets its share of the grants"
_DURABLE = "both fsync every change: one journal should beat a Raft log and its MVCC store"
_SERVER_CPU = (
    "an asyncio echo over uvloop costs about 40 µs a round trip a side here, Redis 25 µs a"
    " request: a lock-only server below the echo"
)
_LONE_CPU = (
    "one request at a time, the server's turn is all wake-up and syscalls: a lone request"
    " should cost its server little more than an echo server's round trip"
)
_CLIENT_CPU = (
    "redis-py spends about 100 µs a request here, an asyncio echo 40 µs a side: a client no"
    " dearer than the echo bounds seq's rate and a user's cores"
)
_ETCD = "on etcd:// tenure's API should cost no more than etcd's own lock API"
_REDIS = "on redis:// tenure's API, one script per call, should cost no more than redis-py's Lock"
_REDIS_PUSH = "waiters woken by a push, not a 0.1 s poll: twice redis-py's Lock"
_REDIS_AWAITED = "no goal: a script per call and its answer awaited, as redis-py's Lock does"
_PG = "no goal: how far tenure on postgres:// is from the advisory locks it is built beside"
_PG_SCALE = (
    "PostgreSQL commits many sessions' transactions at once: 32 clients on distinct keys must"
    " not queue on one row"
)
_PG_HALF = (
    "a grant is a transaction with a queue and a token, an advisory lock a hash-table entry:"
    " half its rate"
)
_CLUSTER_SEQ = (
    "one fenced Txn per call, the grant decided in the leader's memory, where etcd's lock API"
    " keeps a key, a lease and its owner check per call: a fifth ahead"
)
_CLUSTER_MANY = (
    "group commit: a leader's turn of many calls is one Txn in etcd, where etcd's lock API"
    " writes (and watches) per call"
)
_CLUSTER_SINGLE = "no goal: what replication through etcd costs against one server's own fsync"

#: The targets, keyed by the workload they judge, in the report's order.
TARGETS: dict[str, tuple[Target, ...]] = {
    "seq": (
        Target(">= 2x redis-py Lock (block form)", _LEAN, "seq", "pairs_per_s", 2,
               peer="redis"),
        Target(">= 1.5x redis-py Lock (release awaited)", _AWAITED, "seq-awaited",
               "pairs_per_s", 1.5, peer="redis"),
        Target(">= 0.7x echo ceiling (round trips; a pair is 2)", _CEILING, "seq",
               "pairs_per_s", 0.7, peer="echo-uvloop", peer_workload="ceiling",
               peer_metric="seq_rt_per_s", scale=2),
    ),
    "par": (
        Target(">= 3x redis-py Lock (shared client)", _LEAN, "par", "pairs_per_s", 3,
               peer="redis"),
        Target(">= 3x redis-py Lock (client each)", _LEAN, "par", "pairs_per_s", 3,
               (OFF_EACH,), peer=REDIS_EACH),
    ),
    "cont": (
        Target(">= 1.5x redis-py Lock (shared client)", _QUEUE, "cont", "grants_per_s", 1.5,
               peer="redis"),
        Target(">= 1.5x redis-py Lock (client each)", _QUEUE, "cont", "grants_per_s", 1.5,
               (OFF_EACH,), peer=REDIS_EACH),
        Target("zero overtakes (shared client)", _FIFO, "cont", "max_overtaken", 0,
               at_most=True),
        Target("zero overtakes (client each)", _FIFO, "cont", "max_overtaken", 0, (OFF_EACH,),
               at_most=True),
        Target("Jain >= 0.99 (shared client)", _JAIN, "cont", "jain", 0.99),
        Target("Jain >= 0.99 (client each)", _JAIN, "cont", "jain", 0.99, (OFF_EACH,)),
    ),
    "durable seq": (
        Target(">= 3x etcd", _DURABLE, "seq", "pairs_per_s", 3, (ALWAYS,), peer="etcd"),
    ),
    "durable par": (
        Target(">= 3x etcd (shared client)", _DURABLE, "par", "pairs_per_s", 3, (ALWAYS,),
               peer="etcd"),
        Target(">= 3x etcd (client each)", _DURABLE, "par", "pairs_per_s", 3, (ALWAYS_EACH,),
               peer=ETCD_EACH),
    ),
    "durable cont": (
        Target(">= 3x etcd (shared client)", _DURABLE, "cont", "grants_per_s", 3, (ALWAYS,),
               peer="etcd"),
        Target(">= 3x etcd (client each)", _DURABLE, "cont", "grants_per_s", 3, (ALWAYS_EACH,),
               peer=ETCD_EACH),
    ),
    # seq measures CPU per pair, and a pair is two requests (acquire, release): the
    # goals per request (30 µs server, 40 µs client) are doubled.
    "CPU per request": (
        Target("client <= 80 µs per seq pair (40 µs a request; a pair is 2)", _CLIENT_CPU,
               "seq", "client_cpu_us", 80, at_most=True, context="redis"),
        Target("server <= 60 µs per seq pair (30 µs a request; a pair is 2)", _SERVER_CPU,
               "seq", "server_cpu_us", 60, at_most=True, context="redis"),
        Target("server per lone request <= 1.3x the uvloop echo's per round trip"
               " (seq-awaited; a pair is 2)", _LONE_CPU, "seq-awaited", "server_cpu_us", 1.3,
               peer="echo-uvloop", peer_workload="ceiling", peer_metric="seq_server_cpu_us",
               scale=0.5, at_most=True),
    ),
    "hold memory": (
        Target("<= 300 B per held lock at 100k",
               "a million held locks should fit in a few hundred MB of one server",
               "hold", "bytes_per_lock", 300, SERVERS, at_most=True),
    ),
    "idle sessions": (
        Target("100k in <= 1 GB", "a session per process of a large fleet fits one server",
               "sessions", "rss_mb", 1024, SERVERS, at_most=True),
        Target("keepalive <= 10% of a core",
               "100k idle sessions must leave the server's core to the requests",
               "sessions", "keepalive_cpu_pct", 10, SERVERS, at_most=True),
    ),
    "recovery": (
        Target("<= 1 s for 100k leases",
               "clients wait out a restart: it must be far shorter than their timeouts",
               "recovery", "restart_s", 1, SERVERS, at_most=True),
    ),
    "watch fan-out": (
        Target("p99 <= 25 ms for 1,000 watchers",
               "a thousand watchers of one key is a modest fleet: all must see a change soon",
               "watch", "p99_ms", 25, SERVERS, at_most=True),
    ),
    "seq, par, cont on etcd://": (
        Target("seq >= etcd's lock API", _ETCD, "seq", "pairs_per_s", 1, ON_ETCD, peer="etcd"),
        Target("par >= etcd's lock API", _ETCD, "par", "pairs_per_s", 1, ON_ETCD, peer="etcd"),
        Target("cont >= etcd's lock API", _ETCD, "cont", "grants_per_s", 1, ON_ETCD,
               peer="etcd"),
        Target("cont: zero overtakes", _FIFO, "cont", "max_overtaken", 0, ON_ETCD,
               at_most=True),
    ),
    "seq, par, cont in a cluster": (
        Target("seq >= 1.2x etcd's lock API", _CLUSTER_SEQ, "seq", "pairs_per_s", 1.2,
               (CLUSTER,), peer="etcd"),
        Target("par >= 3x etcd's lock API (shared client)", _CLUSTER_MANY, "par",
               "pairs_per_s", 3, (CLUSTER,), peer="etcd"),
        Target("par >= 3x etcd's lock API (client each)", _CLUSTER_MANY, "par",
               "pairs_per_s", 3, (CLUSTER_EACH,), peer=ETCD_EACH),
        Target("cont >= 3x etcd's lock API (shared client)", _CLUSTER_MANY, "cont",
               "grants_per_s", 3, (CLUSTER,), peer="etcd"),
        Target("cont >= 3x etcd's lock API (client each)", _CLUSTER_MANY, "cont",
               "grants_per_s", 3, (CLUSTER_EACH,), peer=ETCD_EACH),
        Target("cont: zero overtakes (shared client)", _FIFO, "cont", "max_overtaken", 0,
               (CLUSTER,), at_most=True),
        Target("cont: zero overtakes (client each)", _FIFO, "cont", "max_overtaken", 0,
               (CLUSTER_EACH,), at_most=True),
        Target("seq vs tenure serve --fsync always", _CLUSTER_SINGLE, "seq", "pairs_per_s",
               None, (CLUSTER,), peer=ALWAYS),
        Target("par vs tenure serve --fsync always (shared client)", _CLUSTER_SINGLE, "par",
               "pairs_per_s", None, (CLUSTER,), peer=ALWAYS),
        Target("par vs tenure serve --fsync always (client each)", _CLUSTER_SINGLE, "par",
               "pairs_per_s", None, (CLUSTER_EACH,), peer=ALWAYS_EACH),
        Target("cont vs tenure serve --fsync always (shared client)", _CLUSTER_SINGLE, "cont",
               "grants_per_s", None, (CLUSTER,), peer=ALWAYS),
        Target("cont vs tenure serve --fsync always (client each)", _CLUSTER_SINGLE, "cont",
               "grants_per_s", None, (CLUSTER_EACH,), peer=ALWAYS_EACH),
    ),
    "seq, par, cont on redis://": (
        Target("seq >= redis-py Lock", _REDIS, "seq", "pairs_per_s", 1, ON_REDIS,
               peer="redis"),
        Target("par >= redis-py Lock", _REDIS, "par", "pairs_per_s", 1, ON_REDIS,
               peer="redis"),
        Target("cont >= 2x redis-py Lock", _REDIS_PUSH, "cont", "grants_per_s", 2, ON_REDIS,
               peer="redis"),
        Target("cont: zero overtakes", _FIFO, "cont", "max_overtaken", 0, ON_REDIS,
               at_most=True),
        Target("seq, release awaited, vs redis-py Lock", _REDIS_AWAITED, "seq-awaited",
               "pairs_per_s", None, ON_REDIS, peer="redis"),
    ),
    "seq, par, cont on postgres://": (
        Target("seq >= 0.5x pg_advisory_lock", _PG_HALF, "seq", "pairs_per_s", 0.5, ON_PG,
               peer="postgres"),
        Target("par >= 0.5x pg_advisory_lock", _PG_HALF, "par", "pairs_per_s", 0.5, ON_PG,
               peer="postgres"),
        Target("par >= 5x its own seq", _PG_SCALE, "par", "pairs_per_s", 5, ON_PG,
               peer="tenure-postgres", peer_workload="seq"),
        Target("cont vs pg_advisory_lock", _PG, "cont", "grants_per_s", None, ON_PG,
               peer="postgres"),
    ),
}  # fmt: skip


def target(workload: str, label: str) -> Target:
    """The target of ``label`` under ``workload`` in :data:`TARGETS` (KeyError if none)."""
    for t in TARGETS[workload]:
        if t.label == label:
            return t
    raise KeyError(f"no target {label!r} under {workload!r}")


def find(measures: list[Measure], workload: str, system: str, metric: str) -> Measure | None:
    """The measure of (workload, system, metric) that has a value, if any."""
    for m in measures:
        if (m.workload, m.system, m.metric) == (workload, system, metric) and m.value == m.value:
            return m  # (nan != nan: a failed run is no value)
    return None


def judge(t: Target, measures: list[Measure]) -> Verdict:
    """Whether ``measures`` (one run) meet ``t``: the first of its systems measured."""
    mine = next((m for s in t.systems if (m := find(measures, t.workload, s, t.metric))), None)
    other = t.peer or t.context
    peer = (
        find(measures, t.peer_workload or t.workload, other, t.peer_metric or t.metric)
        if other
        else None
    )
    if mine is None or (t.peer and (peer is None or peer.value == 0)):
        return Verdict(t, mine, peer, None, None)  # not run, or no ratio to take
    value = mine.value * t.scale / peer.value if t.peer and peer else mine.value
    if t.goal is None:
        return Verdict(t, mine, peer, value, None)
    return Verdict(t, mine, peer, value, value <= t.goal if t.at_most else value >= t.goal)
