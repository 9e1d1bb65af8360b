"""Test helpers for sync sessions: tenure.testing's disconnect/reconnect through the portal.

Move a :class:`~tenure.testing.FakeClock` with ``client.portal.call(clock.advance, seconds)``.

Layer (CONTRIBUTING.md): this module may also import tenure.sync._objects.
"""

from __future__ import annotations

from tenure import testing
from tenure.sync._objects import Session

__all__ = ["disconnect", "reconnect"]


async def _disconnect(session: Session) -> None:
    testing.disconnect(session.async_session)


async def _reconnect(session: Session) -> None:
    testing.reconnect(session.async_session)


def disconnect(session: Session) -> None:
    """Act as if ``session``'s connection dropped: its recovery window starts now."""
    session.portal.call(_disconnect, session)


def reconnect(session: Session) -> None:
    """Act as if ``session``'s client reconnected within the window and re-attached it."""
    session.portal.call(_reconnect, session)
