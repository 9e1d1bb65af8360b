"""The sync prefix cache: ``with client.cache("app", prefix="config/") as cache:``."""

from __future__ import annotations

from tenure import client as aio
from tenure._core.values import SemaphoreDescription
from tenure.client import CacheChange
from tenure.sync._calls import now
from tenure.sync._held import ClosesOnExit
from tenure.sync._portal import Portal
from tenure.sync._stream import Stream, same


class Cache(ClosesOnExit):
    """Every semaphore under a prefix of a node, mirrored here (see :class:`tenure.Cache`);
    ``with`` closes it at the end."""

    def __init__(self, portal: Portal, cache: aio.Cache) -> None:
        self._portal = portal
        self._cache = cache
        self.node = cache.node
        """The node the cache mirrors."""
        self.prefix = cache.prefix
        """The prefix of the names it mirrors."""
        self.max_size = cache.max_size
        """The most semaphores it holds (LimitExceededError past it)."""
        self.owners = cache.owners
        """Whether it keeps owners (and counts) current, or data alone."""

    def __repr__(self) -> str:
        return f"<sync Cache {self.prefix!r} of node {self.node!r}>"

    def get(self, name: str) -> SemaphoreDescription | None:
        """The semaphore ``name`` as the cache shows it now, or None if it does not exist
        or is not under the cache's prefix (see :meth:`tenure.Cache.get`).

        Raises:
            InvalidArgumentError: ``name`` is not a str.
            LimitExceededError: the cache ended past ``max_size``.
        """
        return self._portal.call(now, lambda: self._cache.get(name))

    def items(self) -> list[tuple[str, SemaphoreDescription]]:
        """Every semaphore the cache shows now, as (name, view), sorted by name."""
        return self._portal.call(now, self._cache.items)

    def changes(self) -> Stream[CacheChange]:
        """The changes the cache applies from now on (see :meth:`tenure.Cache.changes`);
        each ``next()`` blocks until there is one; close the stream (or ``with``) when done."""
        return Stream(self._portal, self._portal.call(now, self._cache.changes), same)

    def close(self) -> None:
        """Stop mirroring: the cache's watch and session end. Idempotent."""
        if not self._portal.closed:
            self._portal.call(self._cache.aclose)
