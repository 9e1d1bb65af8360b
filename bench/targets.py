"""The issues' targets for scripts/bench, and whether one run's Measures meet them.

A :class:`Target` is one goal: tenure's value against a peer's (a ratio), or a
bound. :func:`judge` decides it from the Measures of one run; bench.report renders
the verdicts as the report's targets tables (:data:`TARGET_TABLES`).
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.results import Measure, client_each


@dataclass(frozen=True)
class Target:
    """A goal of an issue: tenure's value against a peer's (a ratio), or a bound.

    ``goal=None`` is a comparison an issue asks to report without a goal.
    """

    label: str
    workload: str
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
#: Issue 15's "Targets", each in both client shapes where it names par or cont.
ISSUE_15 = (
    Target("seq non-durable >= 2x redis-py Lock", "seq", "pairs_per_s", 2, peer="redis"),
    Target("par non-durable >= 3x redis-py Lock (shared client)", "par", "pairs_per_s", 3,
           peer="redis"),
    Target("par non-durable >= 3x redis-py Lock (client each)", "par", "pairs_per_s", 3,
           (OFF_EACH,), peer=REDIS_EACH),
    Target("cont >= 1.5x redis-py Lock (shared client)", "cont", "grants_per_s", 1.5,
           peer="redis"),
    Target("cont: zero overtakes (shared client)", "cont", "max_overtaken", 0, at_most=True),
    Target("cont: Jain >= 0.99 (shared client)", "cont", "jain", 0.99),
    Target("cont >= 1.5x redis-py Lock (client each)", "cont", "grants_per_s", 1.5,
           (OFF_EACH,), peer=REDIS_EACH),
    Target("cont: zero overtakes (client each)", "cont", "max_overtaken", 0, (OFF_EACH,),
           at_most=True),
    Target("cont: Jain >= 0.99 (client each)", "cont", "jain", 0.99, (OFF_EACH,)),
    Target("seq durable >= 3x etcd", "seq", "pairs_per_s", 3, (ALWAYS,), peer="etcd"),
    Target("par durable >= 3x etcd (shared client)", "par", "pairs_per_s", 3, (ALWAYS,),
           peer="etcd"),
    Target("par durable >= 3x etcd (client each)", "par", "pairs_per_s", 3, (ALWAYS_EACH,),
           peer=ETCD_EACH),
    Target("cont durable >= 3x etcd (shared client)", "cont", "grants_per_s", 3, (ALWAYS,),
           peer="etcd"),
    Target("cont durable >= 3x etcd (client each)", "cont", "grants_per_s", 3, (ALWAYS_EACH,),
           peer=ETCD_EACH),
    Target("client CPU <= 100 µs per seq pair", "seq", "client_cpu_us", 100, at_most=True,
           context="redis"),
    Target("server CPU <= 100 µs per seq pair", "seq", "server_cpu_us", 100, at_most=True,
           context="redis"),
    Target("watch p99 <= 25 ms for 1,000 watchers", "watch", "p99_ms", 25, SERVERS,
           at_most=True),
    Target("hold <= 300 B per held lock at 100k", "hold", "bytes_per_lock", 300, SERVERS,
           at_most=True),
    Target("recovery <= 1 s for 100k leases", "recovery", "restart_s", 1, SERVERS,
           at_most=True),
)  # fmt: skip
ON_ETCD, ON_REDIS, ON_PG = ("tenure-etcd",), ("tenure-redis",), ("tenure-postgres",)
#: The backends' own targets, as issue 12 (etcd://) and issue 13 (redis://,
#: postgres://) set them; issue 13 asks PostgreSQL's numbers reported, with no goal.
BACKENDS = (
    Target("seq on etcd >= etcd's lock API", "seq", "pairs_per_s", 1, ON_ETCD, peer="etcd"),
    Target("par on etcd >= etcd's lock API", "par", "pairs_per_s", 1, ON_ETCD, peer="etcd"),
    Target("cont on etcd >= etcd's lock API", "cont", "grants_per_s", 1, ON_ETCD, peer="etcd"),
    Target("cont on etcd: zero overtakes", "cont", "max_overtaken", 0, ON_ETCD, at_most=True),
    Target("seq on redis >= redis-py Lock", "seq", "pairs_per_s", 1, ON_REDIS, peer="redis"),
    Target("cont on redis >= 2x redis-py Lock", "cont", "grants_per_s", 2, ON_REDIS, peer="redis"),
    Target("cont on redis: zero overtakes", "cont", "max_overtaken", 0, ON_REDIS, at_most=True),
    Target("seq on postgres vs pg_advisory_lock", "seq", "pairs_per_s", None, ON_PG,
           peer="postgres"),
    Target("par on postgres vs pg_advisory_lock", "par", "pairs_per_s", None, ON_PG,
           peer="postgres"),
    Target("cont on postgres vs pg_advisory_lock", "cont", "grants_per_s", None, ON_PG,
           peer="postgres"),
)  # fmt: skip
#: Issue 5's targets that issue 15 neither restates nor tightens: still tracked.
EARLIER = (
    Target("seq non-durable >= 0.7x echo ceiling (round trips; a pair is 2)", "seq",
           "pairs_per_s", 0.7, peer="echo-uvloop", peer_workload="ceiling",
           peer_metric="seq_rt_per_s", scale=2),
    Target("sessions: 100k in <= 1 GB", "sessions", "rss_mb", 1024, SERVERS, at_most=True),
    Target("sessions: keepalive <= 10% of a core", "sessions", "keepalive_cpu_pct", 10, SERVERS,
           at_most=True),
)  # fmt: skip
#: The report's targets tables: (heading, targets).
TARGET_TABLES = (
    ("Issue 15 (speed, round two)", ISSUE_15),
    ("The backends' own (issues 12 and 13)", BACKENDS),
    ("Issue 5's, not restated by issue 15", EARLIER),
)


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
