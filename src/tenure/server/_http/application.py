"""The HTTP endpoint of ``tenure serve --http-port``: an aiohttp application with routes.

It runs on the server's own event loop (aiohttp's ``AppRunner`` and ``TCPSite``, no
thread), so a handler may read the engine as the rest of the server does: between
two steps, never during one. It listens before the data directory is recovered, so
``/healthz`` and ``/readyz`` answer from the start (while a long log is replayed,
between its steps: :meth:`tenure.server._durability.journal.Journal.replay`).

Routes are added by route sets: functions that take the application and add their
routes, reading what they need from it by the keys below (:data:`READINESS`,
:data:`METRICS`, :data:`SERVING`). :data:`ROUTE_SETS` is the endpoint's list; a new
page (the CLI's, a dashboard at ``/``) is a module with one more route set there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from aiohttp import web
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from tenure._core.engine import DEFAULT_STEP_BUDGET
from tenure.server._http import guessing
from tenure.server._http.collector import StateCollector
from tenure.server._http.contention_series import WithoutNames
from tenure.server._http.listener import GuardedSite, HttpLimits
from tenure.server._http.metrics import ServerMetrics
from tenure.server._http.peer_faults import PeerFaultLog
from tenure.server._http.readiness import Readiness
from tenure.server._http.viewer import bearer
from tenure.server._serve import Server

__all__ = [
    "METRICS",
    "METRICS_AUTH",
    "READINESS",
    "ROUTE_SETS",
    "SERVING",
    "STATE",
    "HttpApplication",
    "RouteSet",
    "Serving",
    "add_health_routes",
    "add_metrics_routes",
]


@dataclass
class Serving:
    """The running server, for routes that read it: None until it serves."""

    server: Server | None = None


#: The server's phase (:class:`Readiness`).
READINESS: Final = web.AppKey("readiness", Readiness)
#: The server's metrics (their registry is what ``/metrics`` shows).
METRICS: Final = web.AppKey("metrics", ServerMetrics)
#: The running server (``app[SERVING].server``; None while it starts or recovers).
SERVING: Final = web.AppKey("serving", Serving)
#: The gauges read from the engine (counted a step budget at a time before a scrape).
STATE: Final = web.AppKey("state", StateCollector)
#: ``--metrics-auth``: whether ``/metrics`` wants a token (set when the endpoint starts).
METRICS_AUTH: Final = web.AppKey("metrics_auth", bool)

#: Adds one module's routes to the application.
RouteSet = Callable[[web.Application], None]

#: How long a stopping endpoint waits for requests in progress, in seconds.
SHUTDOWN_TIMEOUT: Final = 1.0


async def healthz(request: web.Request) -> web.Response:
    """200 while the process runs and its event loop answers."""
    return web.Response(text="ok\n")


async def readyz(request: web.Request) -> web.Response:
    """200 once recovered and serving; 503 while starting, recovering or stopping."""
    readiness = request.app[READINESS]
    if readiness.ready:
        return web.Response(text="ready\n")
    return web.Response(status=503, text=f"{readiness.state}\n")


async def metrics(request: web.Request) -> web.Response:
    """Every series, in the format the scraper asks for (Prometheus text or OpenMetrics).

    Open to anyone who reaches the port (Prometheus's convention), unless
    ``--metrics-auth``: then a token of the auth file is needed, any access (read-only
    suffices), as ``Authorization: Bearer SECRET`` (a scraper's ``authorization``). A
    token limited to some nodes is not shown the statistics per name
    (``tenure_name_*``): they name the semaphores of every node.
    """
    registry: Collector = request.app[METRICS].registry
    if request.app[METRICS_AUTH]:
        server = request.app[SERVING].server
        if server is None:  # the auth file is the running server's
            return web.Response(status=503, text="not serving yet: no token can be checked\n")
        tokens = server.gate.tokens
        assert tokens is not None  # (--metrics-auth needs --auth-file)
        refusal = guessing.blocked(request, tokens)
        if refusal is not None:
            return refusal
        token = tokens.authenticate(bearer(request))
        guessing.attempt(request, tokens, token is not None)
        if token is None:
            return web.Response(
                status=401,
                text="--metrics-auth: send Authorization: Bearer with a token's secret\n",
                headers={"WWW-Authenticate": 'Bearer realm="tenure metrics"'},
            )
        if token.nodes is not None:  # (names of nodes it may not read: left out)
            registry = WithoutNames(registry)
    state = request.app.get(STATE)
    if state is not None:  # (counted in slices, the loop serving others between)
        server = request.app[SERVING].server
        await state.count(DEFAULT_STEP_BUDGET if server is None else server.config.step_budget)
    encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
    body = encoder(registry)  # (any collector: the registry, or the part a token sees)
    return web.Response(body=body, headers={"Content-Type": content_type})


def add_health_routes(app: web.Application) -> None:
    """``/healthz`` and ``/readyz``."""
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)


def add_metrics_routes(app: web.Application) -> None:
    """``/metrics``."""
    app.router.add_get("/metrics", metrics)


#: The routes of the endpoint, in the order they are added.
ROUTE_SETS: Final[tuple[RouteSet, ...]] = (add_health_routes, add_metrics_routes)


class HttpApplication:
    """The HTTP endpoint (module docstring): :attr:`app`, started and stopped here."""

    def __init__(
        self,
        readiness: Readiness,
        server_metrics: ServerMetrics,
        route_sets: Sequence[RouteSet] = ROUTE_SETS,
    ) -> None:
        self.serving = Serving()
        self.app = web.Application()
        self.app[READINESS] = readiness
        self.app[METRICS] = server_metrics
        self.app[SERVING] = self.serving
        self.app[METRICS_AUTH] = False
        for add_routes in route_sets:
            add_routes(self.app)
        self._runner: web.AppRunner | None = None
        #: The listening site (its guard counts the connections); None until started.
        self.site: GuardedSite | None = None

    async def start(
        self,
        host: str,
        port: int,
        limits: HttpLimits | None = None,
        *,
        metrics_auth: bool = False,
    ) -> tuple[str, int]:
        """Listen on ``host:port`` (with TLS if ``limits.tls``); the address bound.

        Raises:
            OSError: the address cannot be bound (in use, not this machine's).
        """
        limits = HttpLimits() if limits is None else limits
        self.app[METRICS_AUTH] = metrics_auth  # (before the runner freezes the app)
        runner = web.AppRunner(
            self.app,
            access_log=None,
            logger=PeerFaultLog(),  # a peer's malformed request: one info line
            shutdown_timeout=SHUTDOWN_TIMEOUT,
            keepalive_timeout=limits.idle_timeout,
        )
        await runner.setup()
        try:
            site = self.site = GuardedSite(runner, host, port, limits)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound = runner.addresses[0]
        return str(bound[0]), int(bound[1])

    async def stop(self) -> None:
        """Stop listening; requests in progress get :data:`SHUTDOWN_TIMEOUT` to finish."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
