"""Semaphore watches on PostgreSQL: the latest state after each watched change.

A watch subscribes to its semaphore's notifications (``s<name>`` on the node's
channel) *before* it reads the first state, so no change between them is missed.
After each notification (or a reconnect of the LISTEN connection, after which
everything is read again) it reads the semaphore: that is the latest state, so a
busy consumer gets the newest state, never a queue of old ones. A state that does
not differ from the last one yielded in what is watched (data, owners, waiters;
existence and limit always) is not yielded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from tenure._core.values import SemaphoreDescription
from tenure.backends._readback import ReadbackWatch, first_of
from tenure.backends.postgres import _admin

if TYPE_CHECKING:
    from tenure.backends.postgres._session import PgSession

__all__ = ["PgWatch"]


class PgWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over the node's notifications."""

    def __init__(
        self, session: PgSession, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._session = session
        self._changed = asyncio.Event()
        self._stop: Callable[[], None] | None = None

    async def _arm(self) -> SemaphoreDescription:
        """Subscribe, then read the state."""
        session = self._session
        self._stop = session.backend.listener.subscribe(
            session.channel, "s" + self._name, self._changed.set
        )
        session.watches += 1
        try:
            return await self._read()
        except BaseException:
            await self.aclose()
            raise

    async def _read(self) -> SemaphoreDescription:
        return await _admin.read(
            self._session, self._name, owners=self._owners, waiters=self._waiters, missing_ok=True
        )

    async def _wait(self) -> None:
        self._session.check_alive()
        await first_of(self._changed.wait(), self._session.lost.wait())

    async def _read_back(self) -> SemaphoreDescription:
        self._session.check_alive()
        self._changed.clear()
        return await self._read()

    async def _disarm(self) -> None:
        if self._stop is not None:
            self._stop()
            self._session.watches -= 1
        self._changed.set()  # a consumer waiting in __anext__ ends
