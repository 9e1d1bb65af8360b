"""Who looks at the dashboard, and what they may do there: the wire protocol's rules.

A :class:`Viewer` is the token a request carries (an ``Authorization: Bearer``
header with the token's secret, :func:`bearer`, else the login cookie's ticket,
:func:`cookie_ticket`: :mod:`tenure.server._http.login_tickets`), or None without
``--auth-file``; :mod:`tenure.server._http.dashboard` says why the page is read-only
without tokens unless ``--dashboard-actions`` is set. A token sees the nodes it may
touch and may end a session where :func:`tenure.server._net.auth.denial` would let it
send KillSession.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from aiohttp import web

from tenure._core import KillSession
from tenure.server._net.auth import Token, denial

__all__ = ["COOKIE", "Viewer", "bearer", "cookie_ticket"]

#: The login cookie: a signed, expiring ticket naming the token, never its secret.
COOKIE: Final = "tenure_dashboard"


@dataclass(frozen=True, slots=True)
class Viewer:
    """Who looks: their token (None without ``--auth-file``) and whether the dashboard
    may end sessions for them at all (per node: :meth:`may_kill`)."""

    token: Token | None
    actions: bool

    @property
    def key(self) -> str:
        """Viewers with the same key see the same view (its cache key)."""
        return "" if self.token is None else "token:" + self.token.name

    @property
    def access(self) -> str:
        """What the page says about the viewer's rights."""
        if self.token is not None:
            return self.token.access.value
        return "open, actions enabled" if self.actions else "open, read-only"

    @property
    def prefixes(self) -> tuple[str, ...] | None:
        """What the names of the nodes the viewer may see start with (a token's
        patterns' prefixes); None: every node."""
        if self.token is None or self.token.nodes is None:
            return None
        return self.token.prefixes

    def may_see(self, node: str) -> bool:
        """Whether the viewer may see ``node`` (a token's node patterns)."""
        return self.token is None or self.token.may_touch(node)

    def may_kill(self, node: str) -> bool:
        """Whether the viewer may end sessions of ``node`` (as KillSession on the wire)."""
        return self.kill_denial(node, 0) is None

    def kill_denial(self, node: str, session_id: int) -> str | None:
        """Why the viewer may not end session ``session_id`` of ``node``, or None."""
        if self.token is not None:
            return denial(self.token, KillSession(node, session_id), node)
        if not self.actions:
            return (
                "the dashboard is read-only: start the server with --auth-file (and use a "
                "read-write token) or with --dashboard-actions to end sessions from it"
            )
        return None


def bearer(request: web.Request) -> str | None:
    """The secret of an ``Authorization: Bearer`` header (API clients, scrapers), or None."""
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return None


def cookie_ticket(request: web.Request) -> str | None:
    """The login ticket the request's cookie holds, or None."""
    return request.cookies.get(COOKIE) or None
