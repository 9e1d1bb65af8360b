"""The dashboard's views: one per kind of viewer, built at most once per update
interval however many pages are open (:class:`Dashboard`), and who is asking
(:meth:`Dashboard.viewer`). :mod:`tenure.server._http.dashboard` says what the
dashboard is and who may see and do what.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from collections.abc import AsyncIterator
from typing import Final

from aiohttp import web

from tenure._core.top_report import TopReport
from tenure.server._config.hosts import LOOPBACK, allowed_hosts
from tenure.server._http import guessing
from tenure.server._http.application import METRICS, READINESS, SERVING
from tenure.server._http.board import (
    RATE_SAMPLE_INTERVAL,
    BoardLimits,
    BoardWork,
    RateMeter,
    board_in_slices,
    counters,
    shown_view,
)
from tenure.server._http.board_activity import NodeActivity
from tenure.server._http.board_rates import waited
from tenure.server._http.cluster_view import cluster_view
from tenure.server._http.dashboard_answers import unauthorized
from tenure.server._http.login_tickets import LOGOUTS_FILE, LoginTickets
from tenure.server._http.viewer import Viewer, bearer, cookie_ticket
from tenure.server._net.auth import Access
from tenure.server._serve import Server

__all__ = ["DASHBOARD", "Dashboard"]


class Dashboard:
    """The dashboard of one HTTP endpoint: its views, built at most once per interval."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.rates = RateMeter()
        #: viewer key -> (monotonic time built, the view's JSON text).
        self._views: dict[str, tuple[float, str]] = {}
        #: viewer key -> the view being built for it (in slices: every request for it
        #: meanwhile awaits this one).
        self._building: dict[str, asyncio.Future[str]] = {}
        #: What building the latest view did (:class:`BoardWork`: its scan, slices, bytes).
        self.work = BoardWork()
        #: Its nodes' recent grants and places (the busiest first: ``board_activity``).
        self.activity = NodeActivity()
        #: Event streams open now (at most ``--dashboard-max-streams``).
        self.streams = 0
        #: Event streams open now by holder (:func:`_stream_holder`; at most
        #: ``--dashboard-max-streams-per-token`` each); a holder with none is removed.
        self.streams_of: dict[str, int] = {}
        self._tickets: LoginTickets | None = None
        #: (window, sort) -> (monotonic time read, every node's most contended names):
        #: the contention view's reads, at most one each per interval
        #: (:mod:`tenure.server._http.dashboard_contention`).
        self.tops: dict[tuple[int, str], tuple[float, TopReport]] = {}

    @property
    def server(self) -> Server | None:
        """The running server (None while it starts or recovers)."""
        return self.app[SERVING].server

    def allowed_hosts(self) -> frozenset[str] | None:
        """The hosts a request may name in Host and Origin (None: any); loopback only
        until the server runs (its configuration says the rest)."""
        server = self.server
        if server is None:
            return LOOPBACK
        config = server.config
        return allowed_hosts(config.http_allowed_hosts, config.http_host or config.host)

    def interval(self) -> float:
        """Seconds between two updates of a page (1 / ``--dashboard-rate``)."""
        server = self.server
        return 1.0 / (server.config.dashboard_rate if server is not None else 2.0)

    def viewer(self, request: web.Request) -> Viewer | web.Response:
        """Who sends ``request``; or the answer: 401, a token is needed and none (valid)
        was given; 429, its address is blocked (:mod:`tenure.server._http.guessing`)."""
        server = self.server
        if server is None:
            return Viewer(None, actions=False)  # nothing to see or do until it serves
        tokens = server.gate.tokens
        if tokens is None:
            return Viewer(None, actions=server.config.dashboard_actions)
        refusal = guessing.blocked(request, tokens)
        if refusal is not None:
            return refusal
        secret = bearer(request)
        if secret is not None:
            token = tokens.authenticate(secret)
            guessing.attempt(request, tokens, token is not None)
        else:
            tickets = self.tickets()
            token = None if tickets is None else tickets.check(cookie_ticket(request), tokens)
        if token is None:
            return unauthorized()
        return Viewer(token, actions=token.access is Access.READ_WRITE)

    def tickets(self) -> LoginTickets | None:
        """The login tickets of the running server (None while it starts or recovers).

        Kept across a cluster's terms (each its own :class:`Server`, all with the
        cluster's secret), so that a logout is not forgotten at a new term.
        """
        server = self.server
        if server is None:
            return None
        config = server.config
        if self._tickets is None or not self._tickets.signs_with(server.secret):
            # A cluster's servers share no data directory: each keeps its logouts
            # in memory (login_tickets' docstring).
            logouts = None if config.cluster else config.data_dir / LOGOUTS_FILE
            self._tickets = LoginTickets(
                server.secret, config.dashboard_ticket_ttl, logouts=logouts
            )
        return self._tickets

    async def view(self, viewer: Viewer) -> str:
        """The view ``viewer`` sees now, as JSON text (rebuilt at most once per interval,
        in slices of ``--step-budget`` items: :func:`board_in_slices`)."""
        now = time.monotonic()
        key = viewer.key
        cached = self._views.get(key)
        if cached is not None and now - cached[0] < self.interval():
            return cached[1]
        building = self._building.get(key)
        if building is None:
            building = self._building[key] = asyncio.ensure_future(self._text(viewer, now))
            building.add_done_callback(functools.partial(self._built, key))
        # (Shielded: a page that leaves does not cancel the view others await.)
        return await asyncio.shield(building)

    def _built(self, key: str, building: asyncio.Future[str]) -> None:
        """The view for ``key`` is built (or failed: its error is raised to whoever
        awaits it, and marked seen here, should every page have left meanwhile)."""
        self._building.pop(key, None)
        if not building.cancelled():
            building.exception()

    async def _text(self, viewer: Viewer, now: float) -> str:
        text = json.dumps(await self._build(viewer, now), separators=(",", ":"))
        self._views[viewer.key] = (now, text)
        return text

    def sample_rates(self) -> None:
        """Read the server's counters for the rates (:meth:`sample_forever` does, each
        :data:`RATE_SAMPLE_INTERVAL`)."""
        families = list(self.app[METRICS].collect())
        grants, expired = counters(families)
        self.rates.sample(time.monotonic(), grants, expired, waited(families))
        server = self.server
        if server is not None and not server.stopping:
            # Each node's grant counter too: the views' nodes, and the first names
            # (what a page sees first), so that a page opened finds their recent grants.
            engine = server.host.engine
            first = engine.node_index.page("", server.config.dashboard_max_nodes)
            self.activity.sample(engine, server.host.clock.now(), first)

    async def sample_forever(self, app: web.Application) -> AsyncIterator[None]:
        """The sampler, for as long as the endpoint runs (an aiohttp cleanup context:
        cancelled when it stops). Sampling from the start, the rates are there as soon
        as a page opens."""
        sampler = asyncio.ensure_future(self._sample_while_running())
        yield
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler

    async def _sample_while_running(self) -> None:
        while True:  # ends when cancelled (the endpoint stops), at once
            self.sample_rates()
            await asyncio.sleep(RATE_SAMPLE_INTERVAL)

    async def _build(self, viewer: Viewer, now: float) -> dict[str, object]:
        grant_rate, expiry_rate = self.rates.rates()
        view: dict[str, object] = {
            "state": self.app[READINESS].state,
            "access": viewer.access,
            "token": viewer.token.name if viewer.token is not None else None,
            "rates": {"grants": round(grant_rate, 2), "expiries": round(expiry_rate, 2)},
            "history": self.rates.history(),
            "board": None,
            "cluster": None,
        }
        server = self.server
        if server is not None:
            view["cluster"] = cluster_view(server.role)
        if server is not None and not server.stopping:
            config = server.config
            view["limits"] = {
                "nodes": config.dashboard_max_nodes,
                "semaphores": config.dashboard_max_semaphores,
                "sessions": config.dashboard_max_sessions,
                "holders": config.dashboard_max_holders,
                "scan": config.dashboard_max_scan,
                "bytes": config.dashboard_max_bytes,
            }
            self.work = BoardWork()
            # (Shown as text entry by entry, as it is built.)
            built = await board_in_slices(
                server.host.engine,
                now=server.host.clock.now(),
                shift=server.host.wall_shift(),
                limits=BoardLimits.of(config),
                may_see=viewer.may_see,
                # A standby serves nothing: its page offers no action.
                may_kill=viewer.may_kill if server.role.leading else _never,
                prefixes=viewer.prefixes,
                budget=config.step_budget,
                work=self.work,
                activity=self.activity,
            )
        else:
            built = None
        # Every string is shown as text, escaped as the CLI escapes it: a description
        # with a bidi override cannot turn the holder line around, nor one with a
        # newline add a line.
        shown = shown_view(view)
        assert isinstance(shown, dict)
        shown["board"] = built
        return shown


DASHBOARD: Final = web.AppKey("dashboard", Dashboard)


def _never(node: str) -> bool:
    """May end no session of ``node`` (a standby's page)."""
    return False
