"""Stalling a session's own timers, as in a process that froze (for the store tests)."""

from __future__ import annotations

import tenure
from tenure.backends._session import StoreSession


def stall(session: tenure.Session) -> StoreSession:
    """Stop ``session``'s heartbeats and its local deadline, as stalled timers would:
    from now on only the store can end it (its expiry, heard in a push)."""
    backend = session._backend_session()
    assert isinstance(backend, StoreSession)
    backend._liveness.stop()
    return backend
