"""Watches of the engine-driven backends: one-shot engine watches made into a stream.

The engine's watch fires with the state a change left and, being repeating, stays
armed. :class:`WatchFeed` keeps the latest state a firing brought for one watcher;
:class:`EngineWatch` turns feeds into the contract's
:class:`~tenure.backends._base.WatchStream`, arming a new engine watch whenever the
old one is gone (after a re-attach, a firing may have been lost, and a restarted
server keeps no watches).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Self

from tenure._core.values import SemaphoreDescription

__all__ = ["EngineWatch", "WatchFeed"]


class WatchFeed:
    r"""What one armed engine watch reports: the latest state it was sent.

    The session :meth:`put`\s each state a firing carries, keeping only the latest
    (a watcher that is busy gets the newest state, never a queue of old ones), or
    ``None`` when the watch is gone and a new one must be armed. :meth:`close`
    disarms it.
    """

    __slots__ = ("_error", "_has_news", "_latest", "_on_close", "_waiter", "closed")

    def __init__(self, on_close: Callable[[], None]) -> None:
        self._on_close = on_close
        self._latest: SemaphoreDescription | None = None
        self._has_news = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def put(self, description: SemaphoreDescription | None) -> None:
        """A firing's state (None: arm a new watch); replaces one not taken yet."""
        if self.closed or (self._has_news and self._latest is None):
            return  # closed, or already gone: nothing after that counts
        self._latest, self._has_news = description, True
        self._wake()

    def fail(self, error: BaseException) -> None:
        """The session is gone: :meth:`take` raises ``error`` once the news is taken."""
        if self._error is None:
            self._error = error
            self._wake()

    async def take(self) -> SemaphoreDescription | None:
        """Wait for news: the latest state, or None (arm a new watch)."""
        while not self._has_news:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        self._has_news = False
        return self._latest

    def close(self) -> None:
        """Disarm the watch (once)."""
        if not self.closed:
            self.closed = True
            self._on_close()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


#: Arms one engine watch: the state now, and the feed of its firings.
Arm = Callable[[], Awaitable[tuple[SemaphoreDescription, WatchFeed]]]


class EngineWatch:
    """A :class:`~tenure.backends._base.WatchStream` over engine watches, re-armed as needed."""

    def __init__(self, arm: Arm, first: SemaphoreDescription, feed: WatchFeed) -> None:
        self._arm = arm
        self._first: SemaphoreDescription | None = first
        self._feed: WatchFeed | None = feed
        self._closed = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SemaphoreDescription:
        """The state the watch was armed with, then the latest after each firing."""
        if self._closed:
            raise StopAsyncIteration
        if self._first is not None:
            first, self._first = self._first, None
            return first
        while True:
            if self._feed is None:
                # The describe of a new watch is the latest state (the session raises
                # its loss error here if it is gone).
                description, self._feed = await self._arm()
                if self._closed:  # closed while arming: disarm what was just armed
                    self._feed.close()
                    raise StopAsyncIteration
                return description
            pushed = await self._feed.take()
            if pushed is not None:
                return pushed
            self._feed.close()
            self._feed = None

    async def aclose(self) -> None:
        """Disarm the watch (idempotent)."""
        self._closed = True
        if self._feed is not None:
            self._feed.close()
            self._feed = None
