"""What a prefix cache tells its consumers: each one's changes, coalesced per name.

:meth:`tenure.client.Cache.changes` makes a :class:`CacheChanges` for each caller:
every consumer sees every change the cache applies after it asked, on its own; a
consumer that is busy finds one change per name with the latest view (never a queue
of stale views of one name). One that falls more than twice the cache's
``max_size`` names behind ends with LimitExceededError, so a consumer that stopped
reading costs a bounded amount of memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Self

from tenure._core.values import SemaphoreDescription
from tenure.errors import LimitExceededError, TenureError

__all__ = ["CacheChange", "CacheChanges"]


@dataclass(frozen=True, slots=True)
class CacheChange:
    """One change a cache applied: ``name`` now shows ``view``.

    ``view`` is the semaphore as the cache keeps it (its data, limit, count and, if
    the cache keeps them, owners), or None: it is gone from the cache (deleted).
    """

    name: str
    view: SemaphoreDescription | None


class CacheChanges:
    """The async iterator :meth:`tenure.client.Cache.changes` returns (module docstring).

    It ends (StopAsyncIteration) when the cache is closed, and raises the error that
    ended the cache otherwise (LimitExceededError past ``max_size``, the client's
    ClientClosedError...), once the changes before it are taken.
    """

    def __init__(self, limit: int, forget: Callable[[CacheChanges], None]) -> None:
        self._limit = limit
        self._forget = forget
        self._pending: dict[str, SemaphoreDescription | None] = {}
        self._waiter: asyncio.Future[None] | None = None
        self._end: TenureError | None = None
        self._ended = False

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> CacheChange:
        """The next change (the oldest name pending, with its latest view)."""
        while not self._pending:
            if self._ended:
                self._forget(self)
                if self._end is not None:
                    raise type(self._end)(*self._end.args)
                raise StopAsyncIteration
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        name = next(iter(self._pending))
        return CacheChange(name, self._pending.pop(name))

    def tell(self, name: str, view: SemaphoreDescription | None) -> None:
        """The cache applied a change (the cache calls it)."""
        if self._ended:
            return
        self._pending[name] = view
        if len(self._pending) > self._limit:
            self.end(
                LimitExceededError(
                    f"a consumer of the cache's changes() fell more than {self._limit} "
                    "names behind (twice the cache's max_size): it stops"
                ),
                drop=True,
            )
        self._wake()

    def end(self, error: TenureError | None, *, drop: bool = False) -> None:
        """The cache ended (``error`` None: it was closed); ``drop`` what is pending."""
        if self._ended:
            return
        self._ended, self._end = True, error
        if drop:
            self._pending.clear()
        self._wake()

    async def aclose(self) -> None:
        """Stop receiving changes (idempotent)."""
        self.end(None, drop=True)
        self._forget(self)

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
