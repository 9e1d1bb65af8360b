"""The HTTP endpoint of ``tenure serve --http-port`` (docs/operations.md, "Metrics,
health and logs"). Needs the ``server`` extra (aiohttp, prometheus-client), so it is
imported only when the endpoint is asked for.

* :mod:`~tenure.server._http.application`: the aiohttp application, its routes
  (``/metrics``, ``/healthz``, ``/readyz``) and how more are added;
* :mod:`~tenure.server._http.metrics`: the counters and histograms the server
  updates as it works (its :class:`~tenure.server._observe.ServerObserver`);
* :mod:`~tenure.server._http.collector`: the gauges, read from the engine at scrape time;
* :mod:`~tenure.server._http.cluster_view`: what a cluster's server shows of its
  cluster (``--cluster``): the ``tenure_cluster_*`` gauges and the dashboard's
  ``cluster`` object, read from its role;
* :mod:`~tenure.server._http.readiness`: the server's phase, what ``/readyz`` says.
* :mod:`~tenure.server._http.dashboard`: the live dashboard at ``/`` (its page in
  ``static/``), :mod:`~tenure.server._http.board` what it shows,
  :mod:`~tenure.server._http.viewer` who may see and do what there,
  :mod:`~tenure.server._http.login` its login and logout, whose cookie holds a
  ticket of :mod:`~tenure.server._http.login_tickets`;
* :mod:`~tenure.server._http.listener`: the port's listener (TLS, the connection
  limit, idle and header timeouts).

A cluster's backup (:mod:`~tenure.server._http.backup`) imports the cluster's package
(etcd's client: the ``etcd`` extra) only when it runs: the endpoint of a lone server
needs ``tenure[server]`` alone (tests/install; issue 57).

Layer (CONTRIBUTING.md): its modules may import each other, tenure._core,
tenure._protocol, tenure.server, tenure._runtime.collector, tenure.server._cluster
(lazily) and tenure.errors.
"""

from __future__ import annotations

from tenure.server._http.application import HttpApplication
from tenure.server._http.collector import StateCollector
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.readiness import Phase, Readiness

__all__ = ["HttpApplication", "Phase", "Readiness", "ServerMetrics", "StateCollector"]
