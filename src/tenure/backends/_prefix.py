"""Prefix watches' streams: what one watch has to tell, coalesced per name, and resets.

Every store's prefix watch is a :class:`PrefixStream` over a :class:`PrefixFeed`.
Whatever hears the store's news puts it in the feed: a changed name, with the state
the change left where the store pushes states (the engine's WatchFired) or alone
where it can only say that it changed (a Redis push, a PostgreSQL notification, an
etcd event), and a reset when news may have been lost. The feed keeps one pending
item per name (the latest), so a busy consumer never works through stale states;
past :data:`MAX_PENDING_NAMES` names pending it gives them up for a reset, so a
consumer that stopped reading costs a bounded amount of memory. A reset that needs
the store's watch armed again (an engine watch gone with a re-attach, an etcd
watch past a compaction) has the stream re-arm it before it yields the reset: the
consumer lists after that, so no change is missed between them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final, Self

from tenure._core.values import SemaphoreDescription
from tenure.backends._base import PrefixChange, PrefixNews, PrefixReset

__all__ = ["MAX_PENDING_NAMES", "PrefixFeed", "PrefixStream"]

#: Names a prefix watch keeps pending for a consumer that does not take them; one
#: more and they are dropped for a reset (the consumer lists the prefix again).
MAX_PENDING_NAMES: Final = 10_000

_RESET: Final = PrefixReset()


class PrefixFeed:
    """The news of one prefix watch that its consumer has not taken yet."""

    __slots__ = ("_error", "_limit", "_pending", "_rearm", "_reset", "_waiter", "closed")

    def __init__(self, limit: int = MAX_PENDING_NAMES) -> None:
        self._limit = limit
        self._pending: dict[str, SemaphoreDescription | None] = {}
        self._reset = False
        self._rearm = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def put(self, name: str, description: SemaphoreDescription | None = None) -> None:
        """``name`` changed (to ``description``; None: read it back). Replaces the name's
        pending item: a pushed state by a later one, anything by a read-back."""
        if self.closed:
            return
        pending = self._pending
        if name in pending and description is not None and pending[name] is None:
            return  # a read-back pending reads this state or a later one
        pending[name] = description
        if len(pending) > self._limit:
            self.reset()
        else:
            self._wake()

    def reset(self, *, rearm: bool = False) -> None:
        """News may have been lost: pending items go, the consumer lists again (after the
        stream re-arms the store's watch, if ``rearm``)."""
        if self.closed:
            return
        self._pending.clear()
        self._reset = True
        self._rearm = self._rearm or rearm
        self._wake()

    def fail(self, error: BaseException) -> None:
        """The session ended: :meth:`take` raises ``error`` (what is pending is moot)."""
        if self._error is None:
            self._error = error
            self._wake()

    def pending(self) -> frozenset[str]:
        """The names with an item not taken yet."""
        return frozenset(self._pending)

    async def take(self) -> tuple[PrefixNews, bool]:
        """Wait for news: a reset first if there was one (with whether the store's watch
        must be armed again), else the oldest pending name's latest item.

        Raises the session's loss; StopAsyncIteration once closed.
        """
        while True:
            if self.closed:
                raise StopAsyncIteration
            if self._error is not None:
                raise type(self._error)(*self._error.args)
            if self._reset:
                rearm, self._reset, self._rearm = self._rearm, False, False
                return _RESET, rearm
            if self._pending:
                name = next(iter(self._pending))
                return PrefixChange(name, self._pending.pop(name)), False
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def close(self) -> None:
        """No more news (a consumer waiting in :meth:`take` stops)."""
        self.closed = True
        self._pending.clear()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class PrefixStream:
    """A :class:`~tenure.backends._base.PrefixWatchStream` over a :class:`PrefixFeed`.

    ``rearm`` arms the store's watch again (awaited before a reset that needs it is
    yielded); ``disarm`` stops it (once, by the first :meth:`aclose`).
    """

    def __init__(
        self,
        feed: PrefixFeed,
        *,
        disarm: Callable[[], Awaitable[None]],
        rearm: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.feed = feed
        self._disarm = disarm
        self._rearm = rearm
        self._closed = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> PrefixNews:
        """The next news (see the contract); the session's loss ends it."""
        if self._closed:
            raise StopAsyncIteration
        news, rearm = await self.feed.take()
        if rearm and self._rearm is not None:
            await self._rearm()
        if self._closed:  # closed while re-arming: what was just armed goes too
            await self._disarm()
            raise StopAsyncIteration
        return news

    def pending(self) -> frozenset[str]:
        """The names whose news is waiting (see the contract)."""
        return self.feed.pending()

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self.feed.close()
        await self._disarm()
