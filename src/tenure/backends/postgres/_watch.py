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

from collections.abc import Callable
from typing import Protocol

from tenure._core.values import SemaphoreDescription
from tenure.backends._readback import ReadbackWatch

__all__ = ["PgWatch", "WatchHost"]


class WatchHost(Protocol):
    """What a watch needs of its session's store."""

    #: The session's armed watches (the store fails them when the session ends).
    watches: set[PgWatch]

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""

    async def read(self, name: str, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """The semaphore now (``exists=False`` if missing)."""


class PgWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over the node's notifications."""

    def __init__(
        self, host: WatchHost, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._host = host
        self._stop: Callable[[], None] | None = None

    async def _arm(self) -> SemaphoreDescription:
        """Subscribe, then read the state."""
        self._stop = self._host.subscribe("s" + self._name, self.poke)
        self._host.watches.add(self)
        try:
            return await self._read()
        except BaseException:
            await self.aclose()
            raise

    async def _read(self) -> SemaphoreDescription:
        return await self._host.read(self._name, owners=self._owners, waiters=self._waiters)

    async def _disarm(self) -> None:
        if self._stop is not None:
            self._stop()
            self._stop = None
        self._host.watches.discard(self)
