"""``POST /admin/reload``: ``tenure reload`` over the HTTP endpoint, with an admin token.

The server reads its TLS files and its auth file again (:mod:`tenure.server._reload`,
as on SIGHUP) and answers what changed (200, JSON: the names of the tokens added,
removed, rotated and changed, the connections closed), or why nothing did (409, JSON
``error``: the file that does not load, and why; the server serves on as before).

An **admin token** is a read-write token of the auth file whose ``nodes`` are not
limited (every node): whoever may touch every node may change who gets in. It comes
as ``Authorization: Bearer SECRET``, throttled as every secret of the HTTP port is
(:mod:`tenure.server._http.guessing`). Without an auth file there is no token to
check, and the route refuses (403): such a server reloads on SIGHUP, or for a client on
its own host over the native protocol (:mod:`tenure.server._server_acts`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from aiohttp import web

from tenure.server._http import guessing
from tenure.server._http.application import SERVING
from tenure.server._http.viewer import bearer
from tenure.server._net.auth import Access, Token, Tokens
from tenure.server._reload import Prepare, reload_logged

__all__ = ["RELOADS", "add_admin_routes", "admin_token", "is_admin"]

#: What a reload reads besides the server's own files (the HTTP port's TLS files).
RELOADS: Final = web.AppKey("reloads", Sequence[Prepare])


def is_admin(token: Token) -> bool:
    """Whether ``token`` is an admin token: read-write, every node."""
    return token.access is Access.READ_WRITE and token.nodes is None


def admin_token(
    request: web.Request,
    tokens: Tokens | None,
    act: str,
    render: Callable[[int, str], web.Response],
    without_auth: str,
) -> Token | web.Response:
    """The admin token that asks ``request`` to ``act`` (reload, take a backup), or the
    response that refuses it, made by ``render(status, why)`` (each route its own
    format): no auth file (403, ``without_auth``), too many guesses from its address (the guessing
    throttle's), no or a wrong secret (401), a token that is not an admin's (403).
    The one rule for every admin route, its guesses counted as the HTTP port's are."""
    if tokens is None:
        return render(403, without_auth)
    refusal = guessing.blocked(request, tokens)
    if refusal is not None:
        return refusal
    token = tokens.authenticate(bearer(request))
    guessing.attempt(request, tokens, token is not None)
    if token is None:
        response = render(401, "send Authorization: Bearer with an admin token's secret")
        response.headers["WWW-Authenticate"] = 'Bearer realm="tenure admin"'
        return response
    if not is_admin(token):
        return render(
            403,
            f"token {token.name!r} is not an admin token (read-write on every node): "
            f"it may not {act}",
        )
    return token


async def reload_files(request: web.Request) -> web.Response:
    """Reload the TLS and auth files (module docstring)."""
    server = request.app[SERVING].server
    if server is None:
        return _error(503, "not serving yet: nothing to reload")
    without = (
        "this server has no auth file: send it SIGHUP to reload, or reload it over its native "
        "port from its own host (tenure reload --url tenure://127.0.0.1:PORT)"
    )
    token = admin_token(request, server.gate.tokens, "reload", _error, without)
    if isinstance(token, web.Response):
        return token
    done = await reload_logged(
        server, request.app.get(RELOADS, ()), token=token.name, address=request.remote
    )
    if isinstance(done, Exception):
        return _error(409, str(done))
    return web.json_response({"reloaded": done.fields()}, headers={"Cache-Control": "no-store"})


def _error(status: int, why: str) -> web.Response:
    return web.json_response({"error": why}, status=status, headers={"Cache-Control": "no-store"})


def add_admin_routes(app: web.Application) -> None:
    """``POST /admin/reload``."""
    app.router.add_post("/admin/reload", reload_files)
