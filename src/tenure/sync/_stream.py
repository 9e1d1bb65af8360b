"""``Stream``: a blocking iterator over one of the client's async iterators (watches,
an election's observe), each ``next()`` pulled through the portal."""

from __future__ import annotations

import enum
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Generic, Self, TypeVar

from tenure.errors import LostError
from tenure.sync._held import ClosesOnExit
from tenure.sync._portal import Portal

A = TypeVar("A")
T = TypeVar("T")


class _End(enum.Enum):
    END = enum.auto()


def same(value: T) -> T:
    """The wrap of a stream of values (descriptions, views, changes): each as it is."""
    return value


async def _next(iterator: AsyncIterator[A], wrap: Callable[[A], T]) -> T | _End:
    try:
        return wrap(await anext(iterator))
    except StopAsyncIteration:
        return _End.END


async def _aclose(iterator: AsyncIterator[Any]) -> None:
    aclose: Callable[[], Awaitable[None]] | None = getattr(iterator, "aclose", None)
    if aclose is not None:
        await aclose()


class Stream(ClosesOnExit, Generic[T]):
    """A blocking iterator over an async one, each ``next()`` pulled through the portal.

    ``close()`` it (or use ``with``) to stop early; it is closed for you when
    exhausted, and when its client closes.
    """

    def __init__(self, portal: Portal, iterator: AsyncIterator[Any], wrap: Callable[[Any], T]):
        self._portal = portal
        self._iterator = iterator
        self._wrap = wrap
        self._done = False

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        try:
            item = self._portal.call(_next, self._iterator, self._wrap)
        except LostError:
            self._done = True
            raise
        if item is _End.END:
            self._done = True
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop iterating and free what the iterator holds. Idempotent."""
        self._done = True
        if not self._portal.closed:
            self._portal.call(_aclose, self._iterator)
