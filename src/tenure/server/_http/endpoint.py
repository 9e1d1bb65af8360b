"""Everything ``--http-port`` runs, as :mod:`tenure.server._startup` drives it.

An :class:`Endpoint` is made and started before the data directory is recovered
(``/healthz`` and ``/readyz`` answer during recovery), is told when the server
serves, and is stopped after the server has stopped (``/readyz`` answers 503 while
clients are told to go).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from prometheus_client import GCCollector, ProcessCollector

from tenure._core import Engine
from tenure.server import _faces
from tenure.server._audit import AuditLog
from tenure.server._config.serve_config import ServeConfig
from tenure.server._http.admin import RELOADS, add_admin_routes
from tenure.server._http.application import ROUTE_SETS, STATE, HttpApplication
from tenure.server._http.backup import add_backup_routes
from tenure.server._http.collector import StateCollector
from tenure.server._http.dashboard import add_dashboard_routes
from tenure.server._http.listener import HttpLimits, http_tls_context
from tenure.server._http.login import add_login_routes
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.readiness import Phase, Readiness
from tenure.server._long_holds import LongHolds
from tenure.server._net.throttle import Throttle
from tenure.server._role import STANDALONE, Role
from tenure.server._serve import Server

__all__ = ["Endpoint"]


class Endpoint:
    """The readiness, the metrics and the HTTP application of one server."""

    def __init__(self, version: str) -> None:
        self.readiness = Readiness()
        # Every face's counters, on or off: /metrics lists the same series either way.
        self.metrics = ServerMetrics(version=version, faces=_faces.observers())
        self.application = HttpApplication(
            self.readiness,
            self.metrics,
            (
                *ROUTE_SETS,
                add_dashboard_routes,
                add_login_routes,
                add_admin_routes,
                partial(add_backup_routes, version=version),
            ),
        )
        registry = self.metrics.registry
        state = StateCollector(
            self.readiness,
            self.metrics,
            self._engine,
            self._connections,
            self._role,
            self._throttle,
            self._audit,
            self._long_holds,
        )
        registry.register(state)
        self.application.app[STATE] = state  # (/metrics counts with it before a scrape)
        self.application.app[RELOADS] = (self.prepare_tls,)  # (POST /admin/reload's)
        self._config: ServeConfig | None = None
        self._limits = HttpLimits()
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds...
        ProcessCollector(registry=registry)
        # python_gc_collections_total, python_gc_objects_collected_total (by generation)
        GCCollector(registry=registry)

    async def start(
        self, host: str, port: int, config: ServeConfig | None = None
    ) -> tuple[str, int]:
        """Listen (before recovery), as ``config``'s ``--http-*`` settings say (their
        defaults without it); the address bound.

        Raises:
            OSError: the address cannot be bound.
            ConfigError: the TLS files cannot be loaded (checked at start-up already).
        """
        config = ServeConfig() if config is None else config
        self._config = config
        self.application.app[STATE].contention_series = config.contention_series
        limits = self._limits = HttpLimits(
            max_connections=config.http_max_connections,
            idle_timeout=config.http_idle_timeout,
            header_timeout=config.http_header_timeout,
            tls=http_tls_context(config.http_tls_cert, config.http_tls_key),
        )
        return await self.application.start(host, port, limits, metrics_auth=config.metrics_auth)

    def prepare_tls(self) -> tuple[str, Callable[[], None]] | None:
        """A reload's step (:data:`tenure.server._reload.Prepare`): the HTTP port's TLS
        files loaded and checked again, and what takes them: the listening context
        loads them in place, so that the next handshake gets them and a connection
        made before keeps its own. None: plain HTTP.

        Raises:
            ConfigError: a file does not load (nothing changes).
        """
        config, live = self._config, self._limits.tls
        if config is None or live is None or config.http_tls_cert is None:
            return None
        http_tls_context(config.http_tls_cert, config.http_tls_key)  # (checked first)
        return "http_tls", partial(live.load_cert_chain, config.http_tls_cert, config.http_tls_key)

    def recovering(self) -> None:
        """The data directory is being replayed."""
        self.readiness.advance(Phase.RECOVERING)

    def serving(self, server: Server) -> None:
        """``server`` listens and serves: ready until it stops (a cluster's member tells
        of each term's server, a standby's and a leader's, on the same endpoint)."""
        self.application.serving.server = server
        self.metrics.identify(server.instance_id.hex())
        if server.role.name != STANDALONE:
            self.metrics.in_cluster()
        self.readiness.serving(lambda: server.stopping, lambda: server.role.leading)

    async def stop(self) -> None:
        """The server has stopped: so does the endpoint."""
        self.readiness.advance(Phase.STOPPING)
        await self.application.stop()

    def _engine(self) -> Engine | None:
        server = self.application.serving.server
        return None if server is None else server.host.engine

    def _role(self) -> Role | None:
        server = self.application.serving.server
        return None if server is None else server.role

    def _throttle(self) -> Throttle | None:
        server = self.application.serving.server
        tokens = None if server is None else server.gate.tokens
        return None if tokens is None else tokens.throttle

    def _audit(self) -> AuditLog | None:
        server = self.application.serving.server
        return None if server is None or not server.audit.on else server.audit

    def _long_holds(self) -> LongHolds | None:
        server = self.application.serving.server
        return None if server is None else server.long_holds

    def _connections(self) -> dict[str, int]:
        server = self.application.serving.server
        return {} if server is None else server.connections()
