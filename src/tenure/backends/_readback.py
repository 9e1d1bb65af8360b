"""Watches that read the semaphore back after each push: the latest state, once.

The etcd, Redis and PostgreSQL backends watch a semaphore the same way: they arm
something that tells them *that* it changed (an etcd watch, a Redis push, a
PostgreSQL notification), read the state when armed, and after each push read
the state again. That read is the latest state, so a consumer that was busy gets
the newest state, never a queue of old ones. A state that does not differ from
the last one yielded in what is watched (data, owners, waiters; existence, limit
and ephemerality always) is not yielded: the engine backends fire only on a
watched change, and so do these.

:class:`ReadbackWatch` is that loop; a backend says how to arm (and read the first
state), how to read after a push, and how to disarm; whatever hears the pushes
calls :meth:`ReadbackWatch.poke`, and the session's end :meth:`ReadbackWatch.fail`.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Awaitable
from typing import Any, Self

from tenure._core.values import SemaphoreDescription

__all__ = ["ReadbackWatch", "first_of", "watched"]


def watched(d: SemaphoreDescription, *, data: bool, owners: bool, waiters: bool) -> tuple[Any, ...]:
    """What of ``d`` a watch of ``data``, ``owners`` and ``waiters`` compares: two
    states with the same projection are one change for it."""
    return (
        d.exists,
        d.limit,
        d.ephemeral,
        d.data if data else None,
        (d.count, d.owners) if owners else None,
        d.waiters if waiters else None,
    )


async def first_of(news: Awaitable[Any], lost: Awaitable[Any]) -> None:
    """Wait until ``news`` or ``lost`` completes (the other is cancelled)."""
    waiting = asyncio.ensure_future(news)
    losing = asyncio.ensure_future(lost)
    try:
        await asyncio.wait({waiting, losing}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        losing.cancel()


class ReadbackWatch(ABC):
    """A :class:`~tenure.backends._base.WatchStream` that reads back after each push.

    Subclasses implement :meth:`_arm`, :meth:`_read` and :meth:`_disarm`;
    :meth:`start` must be awaited before the stream is used.
    """

    def __init__(self, name: str, *, data: bool, owners: bool, waiters: bool) -> None:
        self._name = name
        self._data = data
        self._owners = owners
        self._waiters = waiters
        self._first: SemaphoreDescription | None = None
        self._last: tuple[Any, ...] | None = None
        self._closed = False
        #: Set by a push (or the session's end, or aclose): read again.
        self._news = asyncio.Event()
        self._error: BaseException | None = None

    @abstractmethod
    async def _arm(self) -> SemaphoreDescription:
        """Arm the pushes, then read the state (no change between may be missed)."""

    @abstractmethod
    async def _read(self) -> SemaphoreDescription:
        """Read the state now."""

    @abstractmethod
    async def _disarm(self) -> None:
        """Stop the pushes (called once, by the first :meth:`aclose`)."""

    def poke(self) -> None:
        """A watched change was pushed (or may have been missed): read again."""
        self._news.set()

    def fail(self, error: BaseException) -> None:
        """The session ended: the stream raises ``error``."""
        self._error = error
        self._news.set()

    async def _wait(self) -> None:
        """Wait for a push (or for the session's end, or :meth:`aclose`)."""
        await self._news.wait()

    async def _read_back(self) -> SemaphoreDescription:
        """After a push: raise the session's loss if it ended, else read the state now."""
        if self._error is not None:
            raise type(self._error)(*self._error.args)
        self._news.clear()
        return await self._read()

    def _project(self, d: SemaphoreDescription) -> tuple[Any, ...]:
        return watched(d, data=self._data, owners=self._owners, waiters=self._waiters)

    async def start(self) -> None:
        """Arm the watch and read the state it starts from."""
        self._first = await self._arm()
        self._last = self._project(self._first)

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SemaphoreDescription:
        """The state when armed, then the latest state after each watched change."""
        if self._closed:
            raise StopAsyncIteration
        if self._first is not None:
            first, self._first = self._first, None
            return first
        while True:
            await self._wait()
            if self._closed:
                raise StopAsyncIteration
            description = await self._read_back()
            projection = self._project(description)
            if projection != self._last:
                self._last = projection
                return description

    async def aclose(self) -> None:
        """Stop watching (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._news.set()  # a consumer waiting in __anext__ ends
        await self._disarm()
