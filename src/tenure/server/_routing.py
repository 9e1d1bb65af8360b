"""Where a server's effects go: each to the connection or face its session is attached to.

The server's host hands :meth:`Routing.route` the effects of each step (stamped in
UNIX time). The :class:`~tenure.server._session_table.SessionTable` says who owns each
session: a native connection's effects are queued as pushes in its outbox (one watch
firing encoded once for all its watchers), a face's are delivered to the face; the
effects of a detached session wait in its queue. A session whose queue overflowed
is closed, at the next turn. Sessions the server ended are logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from tenure._core import CloseSession, Effect, SessionEnded
from tenure._protocol.fanout import FiredPushes
from tenure._runtime import collector
from tenure._runtime.host import Host
from tenure.errors import ErrorCode, TenureError
from tenure.server._net.gate import Conn
from tenure.server._net.outbox import Outboxes
from tenure.server._session_table import SessionTable
from tenure.server.plug import Face

log = logging.getLogger("tenure.server")

__all__ = ["Routing"]


class Routing:
    """See the module docstring."""

    def __init__(self, host: Host, table: SessionTable[Conn | Face], out: Outboxes) -> None:
        self.host = host
        self.table = table
        self.out = out
        # The cyclic collector waits while a fan-out's pushes wait (their effects are
        # short-lived: tenure._runtime.collector).
        out.later.busy = collector.pause
        out.later.idle = collector.resume

    def route(self, effects: list[Effect]) -> None:
        """Deliver one step's effects (queued: they leave after the commit)."""
        for effect in effects:
            if type(effect) is SessionEnded:
                _log_session_ended(effect)
        routed, overflowed = self.table.route(effects)
        fired = FiredPushes()  # a change's watch firings: encoded once for all watchers
        out = self.out
        later = out.later
        if later.waiting:  # (a lone request's step: no call)
            later.bound(len(routed))
        if later.waiting or len(routed) > later.room_per_turn:
            self._route_some_later(routed, fired)
        else:
            for conn, effect in routed:
                if isinstance(conn, Conn):
                    out.push(conn, effect, fired)
                else:
                    conn.deliver(effect)
        for session_id in overflowed:
            log.warning("session %d overflowed its push queue; closing it", session_id)
            asyncio.get_running_loop().call_soon(self._close_overflowed, session_id)

    def _route_some_later(
        self, routed: list[tuple[Conn | Face, Effect]], fired: FiredPushes
    ) -> None:
        """Push a turn's room now, the rest at later turns (module docstring): a push to
        a connection that has pushes waiting waits behind them."""
        out = self.out
        later = out.later
        waiting = later.waiting
        room = later.room_per_turn
        for conn, effect in routed:
            if not isinstance(conn, Conn):
                conn.deliver(effect)
            elif room > 0 and conn not in waiting:
                out.push(conn, effect, fired)
                room -= 1
            else:
                later.defer(conn, effect)

    def _close_overflowed(self, session_id: int) -> None:
        with contextlib.suppress(TenureError):
            self.host.execute(CloseSession(session_id))
            self.table.forget(session_id)


def _log_session_ended(effect: SessionEnded) -> None:
    """Log a session the server ended (its recovery window passed, its node was dropped)."""
    expired = effect.code is ErrorCode.SESSION_EXPIRED
    fields = {"session_id": effect.session_id, "code": effect.code.name, "why": effect.message}
    event = "session_expired" if expired else "session_ended"
    log.info(event.replace("_", " "), extra={"event": event, "fields": fields})
