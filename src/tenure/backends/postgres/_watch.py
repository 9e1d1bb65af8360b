"""Semaphore watches on PostgreSQL: the latest state after each watched change.

A watch subscribes to its semaphore's notifications (``s<name>`` on the node's
channel), then registers itself in the database (a change notifies only a
registered semaphore: :mod:`._sql_watches`), *before* it reads the first state,
so no change between them is missed. Closed, it unregisters (best effort: a row
left behind costs only unheard notifications until its session ends).
After each notification (or a reconnect of the LISTEN connection, after which
everything is read again) it reads the semaphore: that is the latest state, so a
busy consumer gets the newest state, never a queue of old ones. A state that does
not differ from the last one yielded in what is watched (data, owners, waiters;
existence and limit always) is not yielded.
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Callable
from typing import Protocol

from tenure._core.values import SemaphoreDescription
from tenure.backends._readback import ReadbackWatch
from tenure.errors import TenureError

__all__ = ["PgWatch", "WatchHost"]


class WatchHost(Protocol):
    """What a watch needs of its session's store."""

    #: The session's armed watches (the store fails them when the session ends).
    watches: set[PgWatch]

    def subscribe(self, payload: str, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` on each ``payload`` on the node's channel; the stop function."""

    async def read(self, name: str, *, owners: bool, waiters: bool) -> SemaphoreDescription:
        """The semaphore now (``exists=False`` if missing)."""

    async def register_watch(self, name: str, watch_id: int) -> None:
        """Register a watch of ``name``: from its commit on, changes of it notify."""

    async def unregister_watch(self, name: str, watch_id: int) -> None:
        """Remove a registration (once the watch stopped listening)."""


class PgWatch(ReadbackWatch):
    """A :class:`~tenure.backends._base.WatchStream` over the node's notifications."""

    def __init__(
        self, host: WatchHost, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        super().__init__(name, data=data, owners=owners, waiters=waiters)
        self._host = host
        self._stop: Callable[[], None] | None = None
        self._id = secrets.randbits(63)
        self._registered = False

    async def _arm(self) -> SemaphoreDescription:
        """Subscribe, register, then read the state."""
        self._stop = self._host.subscribe("s" + self._name, self.poke)
        self._host.watches.add(self)
        try:
            await self._host.register_watch(self._name, self._id)
            self._registered = True
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
        if self._registered and self._error is None:  # a session that ended has none
            self._registered = False
            with contextlib.suppress(TenureError):
                await self._host.unregister_watch(self._name, self._id)
