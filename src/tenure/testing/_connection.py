"""Simulated connection loss for ``memory://`` sessions."""

from __future__ import annotations

from tenure import lowlevel
from tenure.backends._session import StoreSession
from tenure.backends.memory import MemoryBackend, MemoryStore
from tenure.client import Session
from tenure.errors import UnsupportedError


def _memory_backend(session: Session) -> MemoryBackend:
    backend_session = lowlevel.backend_session(session)
    if not isinstance(backend_session, StoreSession) or not isinstance(
        backend_session.store, MemoryStore
    ):
        raise UnsupportedError("disconnect/reconnect simulate memory:// connections only")
    return backend_session.store.backend


def disconnect(session: Session, *, lose_pushes: bool = False) -> None:
    """Act as if ``session``'s connection dropped: its recovery window starts now.

    The session expires (and its holders are told) when the backend's clock passes
    the window, unless :func:`reconnect` comes first. With ``lose_pushes``, what
    the server pushes meanwhile is lost, as it would be in flight on a dead
    connection (grants, failed acquires, lost leases, watch firings, the session's
    end): :func:`reconnect` must then learn it all from the session's state.
    """
    _memory_backend(session).detach(session.id, lose_pushes=lose_pushes)


def reconnect(session: Session) -> None:
    """Act as if ``session``'s client reconnected within the window and re-attached it.

    As a client of a server does, it reads the session's state back and settles
    whatever it has not heard: waiting acquires granted or failed, leases lost.
    """
    _memory_backend(session).reattach(session.id)
