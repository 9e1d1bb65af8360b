"""The live dashboard at ``/`` of the HTTP endpoint (docs/operations.md, "Dashboard").

One page (``static/dashboard.html``, its script and style) that shows nodes, the
busiest first and the idle ones folded (:mod:`tenure.server._http.board_activity`),
semaphores with their owners and waiters (a holder whose client is disconnected
marked so), sessions, and the grant and expiry rates; and the contention view, the
most contended names and a chosen name's chain of holders that wait, drawn as a graph
(:mod:`tenure.server._http.dashboard_contention`). The page comes with the view
in it, drawn before its first paint (:mod:`tenure.server._http.dashboard_page`), and
is kept up to date by server-sent events (:mod:`tenure.server._http.dashboard_stream`):
a view (:mod:`tenure.server._http.board`) whenever it changed, at most
``--dashboard-rate`` times per second, never more often than the views are built.
Views are built from the engine on the server's loop, at most once per update
interval per viewer kind (one per token name), however many pages are open
(:mod:`tenure.server._http.dashboard_views`).

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
  protocol would let it send KillSession (read-write, node allowed): else 403
  (:mod:`tenure.server._http.dashboard_kill`).

On a cluster's server (``--cluster``) the view has a ``cluster`` object
(:func:`~tenure.server._http.cluster_view.cluster_view`: this server's role, the
leader and its dashboard's URL, the term, the log index, each member's applied index
and lag; null on a standalone server). A standby shows its replica of the state (the
follower's engine) and offers no action: it serves no request, so ending a session
there is refused (503, naming the leader's dashboard) before it is tried.

Changing requests (login, logout, kill) must be ``application/json``
(:mod:`tenure.server._http.dashboard_answers`): a cross-site form cannot send that
without the browser asking first (CORS), and SameSite=Strict keeps the cookie off
cross-site requests. The page renders every name, description
and identity as text (``textContent``), and its Content-Security-Policy allows no
inline script: a description ``<img src=x onerror=...>`` stays text.
"""

from __future__ import annotations

from aiohttp import web

from tenure.server._http.dashboard_contention import top_answer, why_answer
from tenure.server._http.dashboard_kill import kill
from tenure.server._http.dashboard_page import STATIC, board_now, no_icon, page, static
from tenure.server._http.dashboard_stream import events
from tenure.server._http.dashboard_views import DASHBOARD, Dashboard
from tenure.server._http.host_check import check_host_and_origin

__all__ = ["DASHBOARD", "add_dashboard_routes"]


def add_dashboard_routes(app: web.Application) -> None:
    """``/`` (the page), its files, and its API under ``/dashboard/api/``."""
    dashboard = app[DASHBOARD] = Dashboard(app)
    app.cleanup_ctx.append(dashboard.sample_forever)
    app.middlewares.append(check_host_and_origin(dashboard.allowed_hosts))
    app.router.add_get("/", page)
    for path in STATIC:
        app.router.add_get(path, static)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/dashboard/api/board", board_now)
    app.router.add_get("/dashboard/api/events", events)
    app.router.add_post("/dashboard/api/kill", kill)
    app.router.add_get("/dashboard/api/top", top_answer)
    app.router.add_get("/dashboard/api/why", why_answer)
