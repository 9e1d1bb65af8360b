"""The dashboard's login and logout (``/dashboard/api/login``, ``/dashboard/api/logout``).

A login sends a token's secret once and gets a ticket in its cookie
(:mod:`tenure.server._http.login_tickets`): HttpOnly (no script reads it),
SameSite=Strict (no other site's request carries it), Secure when the page is served
over TLS (``--http-tls-cert``), and ``Max-Age`` its lifetime. A logout revokes
the ticket on the server as well as deleting the cookie, so a copy of the cookie
taken before is refused too. Failed logins count against the peer's address
(:mod:`tenure.server._http.guessing`: 429 once it is blocked).
"""

from __future__ import annotations

import logging

from aiohttp import web

from tenure.server._http import guessing
from tenure.server._http.dashboard_answers import error_response, json_body
from tenure.server._http.dashboard_views import DASHBOARD
from tenure.server._http.viewer import COOKIE, cookie_ticket

__all__ = ["add_login_routes"]

log = logging.getLogger("tenure.server")


async def login(request: web.Request) -> web.Response:
    """Check a token's secret; answer with a ticket for it in the login cookie."""
    body = await json_body(request)
    if isinstance(body, web.Response):
        return body
    dashboard = request.app[DASHBOARD]
    server = dashboard.server
    tickets = dashboard.tickets()
    if server is None or tickets is None:
        return error_response(503, "the server is not serving yet")
    if server.gate.tokens is None:
        return error_response(400, "this server has no --auth-file: there is nothing to log in to")
    tokens = server.gate.tokens
    refusal = guessing.blocked(request, tokens)
    if refusal is not None:
        return refusal
    secret = body.get("secret")
    token = tokens.authenticate(secret if isinstance(secret, str) else None)
    guessing.attempt(request, tokens, token is not None)
    fields = {"peer": request.remote, "where": "dashboard"}
    if token is None:
        log.warning("authentication failed", extra={"event": "auth_failed", "fields": fields})
        return error_response(401, "no token has that secret", login=True)
    response = web.json_response(
        {"token": token.name, "access": token.access.value, "expires_in": tickets.ttl}
    )
    response.set_cookie(
        COOKIE,
        tickets.issue(token),
        max_age=int(tickets.ttl),
        httponly=True,
        samesite="Strict",
        path="/",
        secure=request.secure,
    )
    return response


async def logout(request: web.Request) -> web.Response:
    """Revoke the cookie's ticket (if it is good) and delete the cookie."""
    dashboard = request.app[DASHBOARD]
    server = dashboard.server
    tickets = dashboard.tickets()
    revoked = False
    if server is not None and tickets is not None and server.gate.tokens is not None:
        revoked = await tickets.log_out(cookie_ticket(request), server.gate.tokens)
    response = web.json_response({"revoked": revoked})
    response.del_cookie(COOKIE, path="/", secure=request.secure, samesite="Strict")
    return response


def add_login_routes(app: web.Application) -> None:
    """The login and logout of the dashboard (after :func:`add_dashboard_routes`)."""
    app.router.add_post("/dashboard/api/login", login)
    app.router.add_post("/dashboard/api/logout", logout)
