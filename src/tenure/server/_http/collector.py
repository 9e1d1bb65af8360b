"""The gauges of ``/metrics``: read from the engine when Prometheus scrapes, not kept.

Nothing on the hot path maintains them: the engine's nodes and semaphores are
walked once per scrape, on the event loop like everything that touches the engine
(about 2.5 ms per 1,000 semaphores, pure build). ``/metrics`` walks them with
:meth:`StateCollector.count` first, ``--step-budget`` semaphores per turn of the
loop (issue 37: a node of 100,000 semaphores was a 250 ms stall per scrape, open to
anyone who reaches the port), and :meth:`StateCollector.collect` then shows those
counts; any other caller of ``collect`` has them counted there, at once. The series:

* ``tenure_ready``: 1 while the server serves (what ``/readyz`` says), else 0;
* ``tenure_nodes``, ``tenure_semaphores``, ``tenure_sessions``: how many exist;
* ``tenure_holds``: grants held (a session's hold on a semaphore is one);
* ``tenure_waiters``: acquires queued; ``tenure_watches``: watches armed;
* ``tenure_connections{protocol}``: client connections open (``native``, and each face's);
* ``tenure_quota_refusals_total{quota,token}``: commands refused by each quota of each
  token (``memory_budget`` too: :mod:`tenure._core.quotas`), and
  ``tenure_state_estimate_bytes``: the state's size as the memory budget counts it, and
  with ``--memory-budget``, ``tenure_memory_budget_bytes``: the budget (so that an alert
  can say the state nears it: ``deploy/prometheus/alerts.yaml``);
* ``tenure_deadlock_search_work_total{token}``: holds, queued requests and set members
  the deadlock checks of each token's acquires looked at (each check at most
  ``--deadlock-search-limit``), and ``tenure_deadlock_checks_total{outcome,token}``:
  those that refused an acquire (``refused``) or stopped at the limit (``cut``): a
  refused acquire costs its sender no quota and may be asked again at once, so this
  is what says whose acquires make the server search (:mod:`tenure._core.deadlocks`);
* with an auth file, the throttle of authentication failures
  (:mod:`tenure.server._net.throttle`): ``tenure_auth_blocks_total`` (addresses
  blocked since the start), ``tenure_auth_refused_total`` (attempts refused while
  their address was blocked) and ``tenure_auth_blocked_addresses`` (blocked now);
* with ``--audit-log``, ``tenure_audit_lines_dropped_total``: audit lines dropped
  because the writer's queue was full or the file could not be written
  (:mod:`tenure.server._audit`: the server never waits on its disk);
* the statistics per name: ``tenure_name_wait_seconds{node,name}`` and the rest, at
  most ``--contention-series`` names and ``other``
  (:mod:`tenure.server._http.contention_series`);
* on a serving server, ``tenure_long_holds_total``: holds held their node's
  ``long_hold`` or ``--long-hold-seconds`` or longer, each counted once
  (:mod:`tenure.server._long_holds`; 0 while neither is set);
* ``tenure_gc_frozen_objects`` and ``tenure_gc_freezes_total``: what the cyclic
  collector no longer walks, and the long full collections that froze it
  (``--gc-freeze-after``: :mod:`tenure._runtime.collector`);
* on a cluster's server, the ``tenure_cluster_*`` gauges
  (:mod:`tenure.server._http.cluster_view`), read from its role; on a standby the
  engine's gauges are those of its replica, the follower's engine.

Totals over the whole server (but for the statistics per name, bounded): per-node
series would be up to ``max_nodes`` (10,000) of each, too many for a metrics system;
the listing API answers per node.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from tenure._core import Engine
from tenure._core.deadlocks import LOOKED
from tenure._runtime import collector as gc_collector
from tenure.server._audit import AuditLog
from tenure.server._http.cluster_view import cluster_families
from tenure.server._http.contention_series import CONTENTION_SERIES, contention_families
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.readiness import Readiness
from tenure.server._long_holds import LongHolds
from tenure.server._net.throttle import Throttle
from tenure.server._role import Role
from tenure.server._state_walk import semaphore_pages

__all__ = ["Counts", "StateCollector"]


@dataclass(slots=True)
class Counts:
    """What a walk of the engine's semaphores counted."""

    semaphores: int = 0
    holds: int = 0
    waiters: int = 0


class StateCollector:
    """Reads the gauges at scrape time (module docstring).

    ``engine()`` is the running engine, None while it is being recovered;
    ``connections()`` the open client connections by protocol; ``role()`` the running
    server's role (None before it serves); ``throttle()`` the throttle of its
    authentication failures (None: no auth file, or not serving yet); ``audit()`` the
    audit log (None: no ``--audit-log``, or not serving yet); ``long_holds()`` what
    tells of long holds (None: no ``--long-hold-seconds``, or not serving yet).
    """

    def __init__(
        self,
        readiness: Readiness,
        metrics: ServerMetrics,
        engine: Callable[[], Engine | None],
        connections: Callable[[], dict[str, int]],
        role: Callable[[], Role | None] = lambda: None,
        throttle: Callable[[], Throttle | None] = lambda: None,
        audit: Callable[[], AuditLog | None] = lambda: None,
        long_holds: Callable[[], LongHolds | None] = lambda: None,
    ) -> None:
        self._readiness = readiness
        self._metrics = metrics
        self._engine = engine
        self._connections = connections
        self._role = role
        self._throttle = throttle
        self._audit = audit
        self._long_holds = long_holds
        #: Counted by :meth:`count` for the next :meth:`collect` (None: count there).
        self._counted: tuple[Engine, Counts] | None = None
        #: How many names the statistics per name show (``--contention-series``).
        self.contention_series = CONTENTION_SERIES

    async def count(self, budget: int) -> None:
        """Walk the engine's semaphores ``budget`` at a time, letting the loop serve
        others between, for the next :meth:`collect`
        (:func:`~tenure.server._state_walk.semaphore_pages`: the totals are those of a
        state a few turns old, each semaphore counted once at most)."""
        engine = self._engine()
        if engine is None:
            return
        counts = Counts()
        async for node, names in semaphore_pages(self._engine, budget):
            semaphores = node.semaphores
            for name in names:
                sem = semaphores[name]
                counts.semaphores += 1
                counts.holds += sum(1 for _ in sem.each_owner())
                counts.waiters += sem.queue_length()
        self._counted = (engine, counts)

    def _counts(self, engine: Engine) -> Counts:
        """The counts :meth:`count` left for this engine, or counted here and now."""
        counted, self._counted = self._counted, None
        if counted is not None and counted[0] is engine:
            return counted[1]
        counts = Counts()
        for node in engine.nodes.values():
            counts.semaphores += len(node.semaphores)
            for sem in node.semaphores.values():
                counts.holds += sum(1 for _ in sem.each_owner())
                counts.waiters += sem.queue_length()
        return counts

    def collect(self) -> Iterator[Metric]:
        """The gauges, as they are now."""
        yield GaugeMetricFamily(
            "tenure_ready",
            "1 while the server is recovered and serving (/readyz answers 200), else 0.",
            value=1.0 if self._readiness.ready else 0.0,
        )
        role = self._role()
        if role is not None:
            yield from cluster_families(role)
        throttle = self._throttle()
        if throttle is not None:
            yield from _throttle_families(throttle)
        audit = self._audit()
        if audit is not None:
            yield CounterMetricFamily(
                "tenure_audit_lines_dropped",
                "Audit log lines dropped (--audit-log): its queue was full (the disk was "
                "slower than the acts) or the file could not be written.",
                value=float(audit.dropped),
            )
        long_holds = self._long_holds()
        if long_holds is not None:
            yield CounterMetricFamily(
                "tenure_long_holds",
                "Holds held their node's long_hold or --long-hold-seconds or longer, "
                "each counted once (its long_hold log line and audit record).",
                value=float(long_holds.told),
            )
        yield from _gc_families()
        engine = self._engine()
        if engine is None:
            return  # recovering: nothing to read yet
        self._metrics.forget_sessions_except(engine.sessions)
        walked = self._counts(engine)
        counts = {
            "nodes": (len(engine.nodes), "Nodes that exist."),
            "semaphores": (walked.semaphores, "Semaphores that exist (mutexes included)."),
            "sessions": (len(engine.sessions), "Live sessions, attached or detached."),
            "holds": (walked.holds, "Grants held: each session's hold on a semaphore counts once."),
            "waiters": (walked.waiters, "Acquires queued, waiting for a grant."),
            "watches": (len(engine.watches), "Watches armed (one-shot, until they fire)."),
        }
        for name, (value, documentation) in counts.items():
            yield GaugeMetricFamily(f"tenure_{name}", documentation, value=float(value))
        yield from _quota_families(engine)
        yield from _deadlock_families(engine)
        yield from contention_families(engine.name_stats, self.contention_series)
        connections = GaugeMetricFamily(
            "tenure_connections",
            "Client connections open, by protocol.",
            labels=["protocol"],
        )
        for protocol, count in sorted(self._connections().items()):
            connections.add_metric([protocol], float(count))
        yield connections


def _quota_families(engine: Engine) -> Iterator[Metric]:
    """The quotas' refusals and the memory budget's estimate (module docstring)."""
    ledger = engine.ledger
    refusals = CounterMetricFamily(
        "tenure_quota_refusals",
        "Commands refused LIMIT_EXCEEDED by a quota of a token, or by the memory budget.",
        labels=["quota", "token"],
    )
    for (quota, token), count in sorted(ledger.refusals.items()):
        refusals.add_metric([quota, token], float(count))
    yield refusals
    yield GaugeMetricFamily(
        "tenure_state_estimate_bytes",
        "The state's size as --memory-budget counts it (a cost per object plus its data).",
        value=float(ledger.estimate()),
    )
    if ledger.budget:
        yield GaugeMetricFamily(
            "tenure_memory_budget_bytes",
            "--memory-budget: the estimate (tenure_state_estimate_bytes) past which "
            "commands that add to the state are refused.",
            value=float(ledger.budget),
        )


def _deadlock_families(engine: Engine) -> Iterator[Metric]:
    """What the deadlock checks of each token's acquires did (module docstring)."""
    work = CounterMetricFamily(
        "tenure_deadlock_search_work",
        "Holds, queued requests and set members deadlock checks looked at, by the token "
        "of the session whose acquire was checked.",
        labels=["token"],
    )
    checks = CounterMetricFamily(
        "tenure_deadlock_checks",
        "Deadlock checks that refused an acquire (refused) or stopped at "
        "--deadlock-search-limit (cut), by the token of the session that asked.",
        labels=["outcome", "token"],
    )
    for (what, token), count in sorted(engine.deadlock_counts.items()):
        if what == LOOKED:
            work.add_metric([token], float(count))
        else:
            checks.add_metric([what, token], float(count))
    yield work
    yield checks


def _gc_families() -> Iterator[Metric]:
    """What the cyclic collector froze (``--gc-freeze-after``; its counts per generation
    are prometheus-client's ``python_gc_*``)."""
    yield GaugeMetricFamily(
        "tenure_gc_frozen_objects",
        "Objects the cyclic garbage collector no longer walks (gc.freeze): the recovered "
        "state's, and what full collections longer than --gc-freeze-after left alive.",
        value=float(gc_collector.frozen()),
    )
    yield CounterMetricFamily(
        "tenure_gc_freezes",
        "Full collections longer than --gc-freeze-after that froze what they left alive.",
        value=float(gc_collector.freezes()),
    )


def _throttle_families(throttle: Throttle) -> Iterator[Metric]:
    """The series of the authentication failures' throttle (module docstring)."""
    yield CounterMetricFamily(
        "tenure_auth_blocks",
        "Addresses blocked for repeated authentication failures, since the start.",
        value=float(throttle.blocks_total),
    )
    yield CounterMetricFamily(
        "tenure_auth_refused",
        "Authentication attempts refused because their address was blocked.",
        value=float(throttle.refused_total),
    )
    yield GaugeMetricFamily(
        "tenure_auth_blocked_addresses",
        "Addresses blocked now for repeated authentication failures.",
        value=float(throttle.blocked(time.monotonic())),
    )
