"""The live dashboard at ``/`` of the HTTP endpoint (docs/operations.md, "Dashboard").

One page (``static/dashboard.html``, its script and style) that shows nodes,
semaphores with their owners and waiters, sessions, and the grant and expiry rates,
kept up to date by server-sent events: ``/dashboard/api/events`` pushes a view
(:mod:`tenure.server._http.board`) whenever it changed, at most ``--dashboard-rate``
times per second, never more often than the views are built. Views are built from
the engine on the server's loop, at most once per update interval per viewer kind
(one per token name), however many pages are open.

Who may see and do what (:mod:`tenure.server._net.auth`'s rules, as on the wire):

* without ``--auth-file`` anybody who reaches the HTTP port sees every node, and the
  page is read-only unless ``--dashboard-actions`` is set: the HTTP port is often
  reachable by more than the client port (scrapers), and a browser can be made to
  send requests to it by other sites, so ending sessions is something to ask for;
* with ``--auth-file`` every request needs a token: ``Authorization: Bearer
  SECRET``, or the cookie the login form sets (HttpOnly, SameSite=Strict, Secure
  over TLS), which holds a signed, expiring ticket naming the token, never its
  secret (:mod:`tenure.server._http.login`, :mod:`tenure.server._http.login_tickets`:
  refused once expired, logged out, or its token gone). A token sees only the nodes
  it may touch, and "end session" is offered, and allowed, only where the wire
  protocol would let it send KillSession (read-write, node allowed): else 403.

On a cluster's server (``--cluster``) the view has a ``cluster`` object
(:func:`~tenure.server._http.cluster_view.cluster_view`: this server's role, the
leader and its dashboard's URL, the term, the log index, each member's applied index
and lag; null on a standalone server). A standby shows its replica of the state (the
follower's engine) and offers no action: it serves no request, so ending a session
there is refused (503, naming the leader's dashboard) before it is tried.

Changing requests (login, logout, kill) must be ``application/json``: a cross-site
form cannot send that without the browser asking first (CORS), and SameSite=Strict
keeps the cookie off cross-site requests. The page renders every name, description
and identity as text (``textContent``), and its Content-Security-Policy allows no
inline script: a description ``<img src=x onerror=...>`` stays text.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Final

from aiohttp import web

from tenure._core import KillSession
from tenure.errors import ErrorCode, TenureError, code_of
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
from tenure.server._http.board_rates import waited
from tenure.server._http.cluster_view import cluster_view, dashboard_url
from tenure.server._http.host_check import check_host_and_origin
from tenure.server._http.login_tickets import LOGOUTS_FILE, LoginTickets
from tenure.server._http.viewer import Viewer, bearer, cookie_ticket
from tenure.server._net.auth import Access
from tenure.server._net.throttle import peer_host
from tenure.server._serve import Server

__all__ = [
    "DASHBOARD",
    "KEEPALIVE_SECONDS",
    "STREAM_SECONDS",
    "Dashboard",
    "add_dashboard_routes",
    "error_response",
    "json_body",
    "unauthorized",
]

log = logging.getLogger("tenure.server")

#: An event stream ends after this many seconds; the page's EventSource reconnects at
#: once (``retry``), so a stream is a bounded loop and a page never sees a gap.
STREAM_SECONDS: Final = 300.0
#: A stream with nothing new sends a comment this often (proxies keep it open, and a
#: page that left is noticed).
KEEPALIVE_SECONDS: Final = 15.0
#: Largest request body accepted by the dashboard's POSTs, in bytes.
MAX_BODY: Final = 4096
#: How often the page's EventSource reconnects after a stream ended, in milliseconds.
RETRY_MS: Final = 1000

_STATIC: Final = {
    "/": ("dashboard.html", "text/html"),
    "/dashboard/app.js": ("dashboard.js", "text/javascript"),
    "/dashboard/app.css": ("dashboard.css", "text/css"),
}
_HEADERS: Final = {
    # No inline script, nothing from elsewhere, no framing (clickjacking of "end session").
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


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
        #: Event streams open now (at most ``--dashboard-max-streams``).
        self.streams = 0
        #: Event streams open now by holder (:func:`_stream_holder`; at most
        #: ``--dashboard-max-streams-per-token`` each); a holder with none is removed.
        self.streams_of: dict[str, int] = {}
        self._tickets: LoginTickets | None = None

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
    return False


def error_response(status: int, message: str, **more: object) -> web.Response:
    return web.json_response({"error": message, **more}, status=status, headers=_HEADERS)


def unauthorized() -> web.Response:
    return error_response(
        401, "a token is needed: log in, or send Authorization: Bearer", login=True
    )


@functools.cache
def _static_text(name: str) -> str:
    """A file of ``static/`` (package data, shipped in the wheel), read once."""
    return resources.files("tenure.server._http").joinpath("static", name).read_text("utf-8")


async def static(request: web.Request) -> web.Response:
    """The page, its script and its style."""
    name, content_type = _STATIC[request.path]
    return web.Response(text=_static_text(name), content_type=content_type, headers=_HEADERS)


async def no_icon(request: web.Request) -> web.Response:
    """No icon (204): a browser asks for one with every page."""
    return web.Response(status=204, headers=_HEADERS)


async def board_now(request: web.Request) -> web.Response:
    """One view, as JSON (what the event stream pushes; for scripts and curl)."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    return web.Response(text=_message(await dashboard.view(viewer)), headers=_HEADERS)


def _stream_holder(viewer: Viewer, request: web.Request) -> str:
    """Whose share of the event streams a request's counts against: its token's, or
    without tokens its address's."""
    if viewer.token is not None:
        return "token:" + viewer.token.name
    return "address:" + (request.remote or "")


def _message(view: str) -> str:
    """A view with the server's time now (kept out of the view: it would always change)."""
    return f'{{"now":{time.time()!r},"view":{view}}}'


async def events(request: web.Request) -> web.StreamResponse:
    """Server-sent events: a view whenever it changed, for :data:`STREAM_SECONDS`."""
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    server = dashboard.server
    most = server.config.dashboard_max_streams if server is not None else 1
    if dashboard.streams >= most:
        # The page's EventSource tries again after ``retry`` (its last one, or its own).
        why = f"dashboard_max_streams ({most}) event streams are open; try again later"
        return error_response(503, why)
    holder = _stream_holder(viewer, request)
    per_holder = server.config.dashboard_max_streams_per_token if server is not None else 1
    if dashboard.streams_of.get(holder, 0) >= per_holder:
        # One token (one address without tokens) must not take every stream.
        who = "this token" if viewer.token is not None else "this address"
        why = (
            f"dashboard_max_streams_per_token ({per_holder}) event streams are open for "
            f"{who}; close a page or try again later"
        )
        return error_response(429, why)
    response = web.StreamResponse(
        headers={**_HEADERS, "Content-Type": "text/event-stream", "X-Accel-Buffering": "no"}
    )
    dashboard.streams += 1
    dashboard.streams_of[holder] = dashboard.streams_of.get(holder, 0) + 1
    loop = asyncio.get_running_loop()
    started = last_write = loop.time()
    sent = None
    try:
        await response.prepare(request)
        await response.write(f"retry: {RETRY_MS}\n\n".encode())
        # Bounded: at most STREAM_SECONDS * rate turns (the rate is at most 20).
        while loop.time() - started < STREAM_SECONDS:
            if request.app[READINESS].state == "stopping":
                break
            if request.transport is None or request.transport.is_closing():
                break  # the page left: give its slot back now, not at the next write
            view = await dashboard.view(viewer)
            if view != sent:
                await response.write(f"data: {_message(view)}\n\n".encode())
                sent, last_write = view, loop.time()
            elif loop.time() - last_write >= KEEPALIVE_SECONDS:
                await response.write(b": keep-alive\n\n")
                last_write = loop.time()
            await asyncio.sleep(dashboard.interval())
    except ConnectionError:
        pass  # the page left
    finally:
        dashboard.streams -= 1
        left = dashboard.streams_of[holder] - 1
        if left:
            dashboard.streams_of[holder] = left
        else:
            del dashboard.streams_of[holder]
    return response


async def json_body(request: web.Request) -> dict[str, object] | web.Response:
    """The JSON object a changing request sends (see the module docstring), or the 4xx."""
    if request.content_type != "application/json":
        return error_response(415, "send application/json")
    if request.content_length is None or request.content_length > MAX_BODY:
        return error_response(413, f"the body must be given and at most {MAX_BODY} bytes")
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeError):
        return error_response(400, "the body is not JSON")
    except RecursionError:  # e.g. 4,000 "[": deeper than Python's JSON reader goes
        return error_response(400, "the body is JSON nested too deeply")
    if not isinstance(body, dict):
        return error_response(400, "the body must be a JSON object")
    return body


async def kill(request: web.Request) -> web.Response:
    """End a session (KillSession) as an operator: ``{"node": ..., "session_id": ...}``.

    Answered only once the kill is committed to the journal, as the wire would.
    """
    dashboard = request.app[DASHBOARD]
    viewer = dashboard.viewer(request)
    if not isinstance(viewer, Viewer):
        return viewer
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    node, session_id = body.get("node"), body.get("session_id")
    if not isinstance(node, str) or type(session_id) is not int or session_id <= 0:
        return error_response(400, "send a node (a string) and a session_id (a positive integer)")
    server = dashboard.server
    if server is None or server.stopping:
        return error_response(503, "the server is not serving")
    if not server.role.leading:
        url = dashboard_url(server.role.leader("http"))
        where = f"on the leader's dashboard, {url}" if url else "on the leader (none known now)"
        return error_response(503, f"this server is a standby: end sessions {where}", leader=url)
    token = viewer.token.name if viewer.token is not None else None
    audited = functools.partial(
        server.audit.record,
        "kill_session",
        token=token,
        address=peer_host(request.remote or ""),
        command="KillSession",
        node=node,
        session_id=session_id,
        via="dashboard",
    )
    why = viewer.kill_denial(node, session_id)
    if why is not None:
        audited(outcome="permission_denied", why=why)
        return error_response(403, why)
    try:
        if token is not None:  # (a request of its token's, as on the wire: its rate)
            server.host.admit_request(token)
        server.host.execute(KillSession(node, session_id))
        await server.host.committed()  # durable before it is acknowledged
    except TenureError as error:
        audited(outcome=code_of(error).name.lower(), why=str(error))
        return error_response(_STATUS.get(code_of(error), 409), str(error))
    if server.host.dead:
        audited(outcome="unavailable", why="the server failed to log the change")
        return error_response(503, "the server failed to log the change")
    audited(outcome="ok")
    fields = {
        "node": node,
        "session_id": session_id,
        "token": viewer.token.name if viewer.token is not None else None,
        "peer": request.remote,
    }
    log.info("session ended by an operator", extra={"event": "session_killed", "fields": fields})
    return web.json_response({"ended": session_id}, headers=_HEADERS)


_STATUS: Final = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.PERMISSION_DENIED: 403,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.NOT_LEADER: 503,  # (it stopped leading since the check above)
    ErrorCode.LIMIT_EXCEEDED: 429,  # (its token's requests_per_second)
}


def add_dashboard_routes(app: web.Application) -> None:
    """``/`` (the page), its files, and its API under ``/dashboard/api/``."""
    dashboard = app[DASHBOARD] = Dashboard(app)
    app.cleanup_ctx.append(dashboard.sample_forever)
    app.middlewares.append(check_host_and_origin(dashboard.allowed_hosts))
    for path in _STATIC:
        app.router.add_get(path, static)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/dashboard/api/board", board_now)
    app.router.add_get("/dashboard/api/events", events)
    app.router.add_post("/dashboard/api/kill", kill)
