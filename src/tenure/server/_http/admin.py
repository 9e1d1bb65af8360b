"""``POST /admin/reload``: ``tenure reload`` over the HTTP endpoint, with an admin token.

The server reads its TLS files and its auth file again (:mod:`tenure.server._reload`,
as on SIGHUP) and answers what changed (200, JSON: the names of the tokens added,
removed, rotated and changed, the connections closed), or why nothing did (409, JSON
``error``: the file that does not load, and why; the server serves on as before).

An **admin token** is a read-write token of the auth file whose ``nodes`` are not
limited (every node): whoever may touch every node may change who gets in. It comes
as ``Authorization: Bearer SECRET``, throttled as every secret of the HTTP port is
(:mod:`tenure.server._http.guessing`). Without an auth file there is no token to
check, and the route refuses (403): such a server reloads on SIGHUP only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aiohttp import web

from tenure.server._http import guessing
from tenure.server._http.application import SERVING
from tenure.server._http.viewer import bearer
from tenure.server._net.auth import Access, Token
from tenure.server._reload import Prepare, reload_logged

__all__ = ["RELOADS", "add_admin_routes", "is_admin"]

#: What a reload reads besides the server's own files (the HTTP port's TLS files).
RELOADS: Final = web.AppKey("reloads", Sequence[Prepare])


def is_admin(token: Token) -> bool:
    """Whether ``token`` may reload the server: read-write, every node."""
    return token.access is Access.READ_WRITE and token.nodes is None


async def reload_files(request: web.Request) -> web.Response:
    """Reload the TLS and auth files (module docstring)."""
    server = request.app[SERVING].server
    if server is None:
        return _error(503, "not serving yet: nothing to reload")
    tokens = server.gate.tokens
    if tokens is None:
        return _error(403, "this server has no auth file: send it SIGHUP to reload")
    refusal = guessing.blocked(request, tokens)
    if refusal is not None:
        return refusal
    token = tokens.authenticate(bearer(request))
    guessing.attempt(request, tokens, token is not None)
    if token is None:
        response = _error(401, "send Authorization: Bearer with an admin token's secret")
        response.headers["WWW-Authenticate"] = 'Bearer realm="tenure admin"'
        return response
    if not is_admin(token):
        return _error(
            403, f"token {token.name!r} may not reload: that takes read-write on every node"
        )
    done = reload_logged(
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
