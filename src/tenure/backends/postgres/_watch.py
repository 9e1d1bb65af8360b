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
from typing import TYPE_CHECKING, Any, Self

from tenure._core.values import SemaphoreDescription
from tenure.backends.postgres import _admin

if TYPE_CHECKING:
    from tenure.backends.postgres._session import PgSession

__all__ = ["PgWatch"]


class PgWatch:
    """A :class:`~tenure.backends._base.WatchStream` over the node's notifications."""

    def __init__(
        self, session: PgSession, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        self._session = session
        self._name = name
        self._what = (data, owners, waiters)
        self._changed = asyncio.Event()
        self._stop: Callable[[], None] | None = None
        self._first: SemaphoreDescription | None = None
        self._last: tuple[Any, ...] | None = None
        self._closed = False

    async def start(self) -> None:
        """Subscribe, then read the state."""
        session = self._session
        self._stop = session.backend.listener.subscribe(
            session.channel, "s" + self._name, self._changed.set
        )
        session.watches += 1
        try:
            self._first = await self._read()
        except BaseException:
            await self.aclose()
            raise
        self._last = self._project(self._first)

    async def _read(self) -> SemaphoreDescription:
        _, owners, waiters = self._what
        return await _admin.read(
            self._session, self._name, owners=owners, waiters=waiters, missing_ok=True
        )

    def _project(self, d: SemaphoreDescription) -> tuple[Any, ...]:
        data, owners, waiters = self._what
        return (
            d.exists,
            d.limit,
            d.ephemeral,
            d.data if data else None,
            (d.count, d.owners) if owners else None,
            d.waiters if waiters else None,
        )

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SemaphoreDescription:
        """The state when armed, then the latest state after each watched change."""
        if self._closed:
            raise StopAsyncIteration
        if self._first is not None:
            first, self._first = self._first, None
            return first
        session = self._session
        while True:
            session.check_alive()
            changed = asyncio.ensure_future(self._changed.wait())
            lost = asyncio.ensure_future(session.lost.wait())
            try:
                await asyncio.wait({changed, lost}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                changed.cancel()
                lost.cancel()
            if self._closed:
                raise StopAsyncIteration
            session.check_alive()
            self._changed.clear()
            description = await self._read()
            projection = self._project(description)
            if projection != self._last:
                self._last = projection
                return description

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
        if not self._closed:
            self._closed = True
            if self._stop is not None:
                self._stop()
                self._session.watches -= 1
            self._changed.set()  # a consumer waiting in __anext__ ends
