"""Semaphore watches on Redis: the latest state after each watched change.

Arming a watch registers the session among the semaphore's watchers
(``<base>wt:<name>``) and reads the state, in one function. Every function that
changes the semaphore (its data, owners, waiters, or existence) pushes a ``W`` to
each watcher's inbox; the watch then reads the state again: that is the latest, so
a consumer that was busy gets the newest state, never a queue of old ones. A state
that does not differ from the last one yielded in what is watched is not yielded
(as the engine backends fire only on a watched change). After pushes were missed
(an inbox gap), every watch reads again.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, Self

from tenure._core.values import SemaphoreDescription
from tenure.backends.redis._codec import decode_description
from tenure.errors import TenureError

if TYPE_CHECKING:
    from tenure.backends.redis._session import RedisSession

__all__ = ["RedisWatch"]


class RedisWatch:
    """A :class:`~tenure.backends._base.WatchStream` over the pushes of one semaphore."""

    def __init__(
        self, session: RedisSession, name: str, *, data: bool, owners: bool, waiters: bool
    ) -> None:
        self._session = session
        self._name = name
        self._what = (data, owners, waiters)
        self._first: SemaphoreDescription | None = None
        self._last: tuple[Any, ...] | None = None
        self._news = asyncio.Event()
        self._error: BaseException | None = None
        self._armed = False
        self._closed = False

    async def start(self) -> None:
        """Register as a watcher and read the state (one call)."""
        session = self._session
        _, owners, waiters = self._what
        session.watches.setdefault(self._name, set()).add(self)  # pushes may come at once
        try:
            raw = await session.call(
                "watch", "", self._name, 1, "1" if owners else "0", "1" if waiters else "0"
            )
        except BaseException:
            self._forget()
            raise
        self._armed = True
        self._first = decode_description(self._name, raw)
        self._last = self._project(self._first)
        self._news.clear()

    def poke(self) -> None:
        """A watched change was pushed (or may have been missed): read again."""
        self._news.set()

    def fail(self, error: BaseException) -> None:
        """The session ended: the stream raises ``error``."""
        self._error = error
        self._news.set()

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
        _, owners, waiters = self._what
        while True:
            await self._news.wait()
            if self._closed:
                raise StopAsyncIteration
            if self._error is not None:
                raise self._error
            self._news.clear()
            raw = await self._session.call(
                "describe_semaphore",
                "",
                self._name,
                "1" if owners else "0",
                "1" if waiters else "0",
            )
            description = decode_description(self._name, raw)
            projection = self._project(description)
            if projection != self._last:
                self._last = projection
                return description

    def _forget(self) -> None:
        watches = self._session.watches.get(self._name)
        if watches is not None:
            watches.discard(self)
            if not watches:
                del self._session.watches[self._name]

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._news.set()
        self._forget()
        if self._armed and self._session.ended is None:
            self._armed = False
            with contextlib.suppress(TenureError):
                await self._session.call("watch", "", self._name, -1, "0", "0")
