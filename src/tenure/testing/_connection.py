"""Simulated connection loss for ``memory://`` sessions."""

from __future__ import annotations

from tenure.backends.memory import MemoryBackend, MemorySession
from tenure.client import Session
from tenure.errors import UnsupportedError


def _memory_backend(session: Session) -> MemoryBackend:
    backend_session = session._backend_session()
    if not isinstance(backend_session, MemorySession):
        raise UnsupportedError("disconnect/reconnect simulate memory:// connections only")
    return backend_session.backend


def disconnect(session: Session) -> None:
    """Act as if ``session``'s connection dropped: its recovery window starts now.

    The session expires (and its holders are told) when the backend's clock passes
    the window, unless :func:`reconnect` comes first.
    """
    _memory_backend(session).detach(session.id)


def reconnect(session: Session) -> None:
    """Act as if ``session``'s client reconnected within the window and re-attached it."""
    _memory_backend(session).reattach(session.id)
