"""The dashboard's ``Host`` and ``Origin`` check (``--http-allowed-hosts``).

DNS rebinding: a foreign page whose name comes to resolve to 127.0.0.1 can make a
browser send requests to the dashboard as a same-origin page would, with the foreign
name in ``Host``; without an auth file that let it read the state and, with
``--dashboard-actions``, end sessions. A cross-site page can also send requests to
the dashboard's own address, with its own name in ``Origin``. So every dashboard
request (everything but ``/metrics``, ``/healthz``, ``/readyz`` and ``/admin/backup``,
which scrapers, probes and ``tenure backup`` reach by whatever name they are
configured with) must name an allowed
host in ``Host`` (else ``421 Misdirected Request``) and, if it sends ``Origin``, an
allowed host there too (else ``403``). Allowed: the loopback names, the address the
endpoint listens on (``--http-host``, else ``--host``, unless a wildcard), and the
names of ``--http-allowed-hosts``; ``*`` there allows any (behind a proxy that checks).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from aiohttp import web
from aiohttp.typedefs import Middleware
from yarl import URL

from tenure.server._config.hosts import host_of

__all__ = ["UNCHECKED_PATHS", "check_host_and_origin"]

#: Paths that are not the dashboard's: machines reach them by any name. A backup
#: (``/admin/backup``) is asked for by ``tenure backup`` from an operator's host by the
#: name it uses; it takes its secret only from ``Authorization``, which no rebound or
#: cross-site page can send without knowing it (no cookie counts there).
UNCHECKED_PATHS: Final = frozenset({"/metrics", "/healthz", "/readyz", "/admin/backup"})

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _refusal(request: web.Request, allowed: frozenset[str] | None) -> tuple[int, str] | None:
    """The status and reason ``request`` is refused with, or None if its names are allowed."""
    if allowed is None:
        return None
    host = host_of(request.headers.get("Host", ""))
    if host not in allowed:
        return 421, "the Host header names no host in http_allowed_hosts (DNS rebinding?)"
    origin = request.headers.get("Origin")
    if origin is not None:
        try:
            origin_host = URL(origin).host if origin != "null" else None
        except ValueError:
            origin_host = None
        if origin_host is None or origin_host.lower().strip("[]") not in allowed:
            return 403, "the Origin header names no host in http_allowed_hosts (cross-site)"
    return None


def check_host_and_origin(allowed: Callable[[], frozenset[str] | None]) -> Middleware:
    """The middleware: ``allowed()`` is the allowed hosts (read once the server runs)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in UNCHECKED_PATHS:
            refusal = _refusal(request, allowed())
            if refusal is not None:
                status, why = refusal
                return web.json_response({"error": why}, status=status)
        return await handler(request)

    return middleware
