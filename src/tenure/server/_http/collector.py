"""The gauges of ``/metrics``: read from the engine when Prometheus scrapes, not kept.

Nothing on the hot path maintains them: :meth:`StateCollector.collect` walks the
engine's nodes and semaphores once per scrape (on the event loop, like everything
that touches the engine; a few milliseconds per 10,000 semaphores). The series:

* ``tenure_ready``: 1 while the server serves (what ``/readyz`` says), else 0;
* ``tenure_nodes``, ``tenure_semaphores``, ``tenure_sessions``: how many exist;
* ``tenure_holds``: grants held (a session's hold on a semaphore is one);
* ``tenure_waiters``: acquires queued; ``tenure_watches``: watches armed;
* ``tenure_connections{protocol}``: client connections open (``native``, ``dflockd``);
* ``tenure_quota_refusals_total{quota,token}``: commands refused by each quota of each
  token (``memory_budget`` too: :mod:`tenure._core.quotas`), and
  ``tenure_state_estimate_bytes``: the state's size as the memory budget counts it;
* with an auth file, the throttle of authentication failures
  (:mod:`tenure.server._net.throttle`): ``tenure_auth_blocks_total`` (addresses
  blocked since the start), ``tenure_auth_refused_total`` (attempts refused while
  their address was blocked) and ``tenure_auth_blocked_addresses`` (blocked now);
* on a cluster's server, the ``tenure_cluster_*`` gauges
  (:mod:`tenure.server._http.cluster_view`), read from its role; on a standby the
  engine's gauges are those of its replica, the follower's engine.

Totals over the whole server: per-node series would be up to ``max_nodes`` (10,000)
of each, too many for a metrics system; the listing API answers per node.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from tenure._core import Engine
from tenure.server._http.cluster_view import cluster_families
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.readiness import Readiness
from tenure.server._net.throttle import Throttle
from tenure.server._role import Role

__all__ = ["StateCollector"]


class StateCollector:
    """Reads the gauges at scrape time (module docstring).

    ``engine()`` is the running engine, None while it is being recovered;
    ``connections()`` the open client connections by protocol; ``role()`` the running
    server's role (None before it serves); ``throttle()`` the throttle of its
    authentication failures (None: no auth file, or not serving yet).
    """

    def __init__(
        self,
        readiness: Readiness,
        metrics: ServerMetrics,
        engine: Callable[[], Engine | None],
        connections: Callable[[], dict[str, int]],
        role: Callable[[], Role | None] = lambda: None,
        throttle: Callable[[], Throttle | None] = lambda: None,
    ) -> None:
        self._readiness = readiness
        self._metrics = metrics
        self._engine = engine
        self._connections = connections
        self._role = role
        self._throttle = throttle

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
        engine = self._engine()
        if engine is None:
            return  # recovering: nothing to read yet
        self._metrics.forget_sessions_except(engine.sessions)
        semaphores = holds = waiters = 0
        for node in engine.nodes.values():
            semaphores += len(node.semaphores)
            for sem in node.semaphores.values():
                holds += sum(1 for _ in sem.each_owner())
                waiters += sem.queue_length()
        counts = {
            "nodes": (len(engine.nodes), "Nodes that exist."),
            "semaphores": (semaphores, "Semaphores that exist (mutexes included)."),
            "sessions": (len(engine.sessions), "Live sessions, attached or detached."),
            "holds": (holds, "Grants held: each session's hold on a semaphore counts once."),
            "waiters": (waiters, "Acquires queued, waiting for a grant."),
            "watches": (len(engine.watches), "Watches armed (one-shot, until they fire)."),
        }
        for name, (value, documentation) in counts.items():
            yield GaugeMetricFamily(f"tenure_{name}", documentation, value=float(value))
        yield from _quota_families(engine)
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
