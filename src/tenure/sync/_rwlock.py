"""The sync readers-writer lock: ``with session.rwlock("catalog").read() as r:``."""

from __future__ import annotations

from tenure import client as aio
from tenure._core.values import RWLockDescription
from tenure.client._args import Data
from tenure.sync._calls import opened, opened_or_none
from tenure.sync._leases import ReadLock, RecipeSession, WriteLock
from tenure.sync._recipe import SyncRecipe


class RWLock(SyncRecipe[RecipeSession, aio.RWLock]):
    """A named readers-writer lock (see :class:`tenure.RWLock`).

    Readers share it, a writer holds it alone; both wait in one queue, in arrival
    order, across threads, sessions and processes.
    """

    @property
    def max_hold(self) -> float | None:
        """Seconds each hold lasts at most after its grant (None: the node's, if any)."""
        return self._recipe.max_hold

    def read(self, *, timeout: float | None = None, data: Data = b"") -> ReadLock:
        """Wait for a reader's share (``timeout`` seconds at most); plain or in ``with``.

        Raises:
            TimeoutError: not held within ``timeout``.
        """
        return self.session.portal.call(
            opened, lambda: self._recipe.read(timeout=timeout, data=data), self._reader
        )

    def write(self, *, timeout: float | None = None, data: Data = b"") -> WriteLock:
        """Wait for the whole lock (``timeout`` seconds at most); plain or in ``with``.

        Raises:
            TimeoutError: not held within ``timeout``.
        """
        return self.session.portal.call(
            opened, lambda: self._recipe.write(timeout=timeout, data=data), self._writer
        )

    def try_read(self, *, data: Data = b"") -> ReadLock | None:
        """A reader's share if it can be had right now, else None."""
        return self.session.portal.call(
            opened_or_none, lambda: self._recipe.try_read(data=data), self._reader
        )

    def try_write(self, *, data: Data = b"") -> WriteLock | None:
        """The whole lock if it is free right now, else None."""
        return self.session.portal.call(
            opened_or_none, lambda: self._recipe.try_write(data=data), self._writer
        )

    def describe(self, *, max_staleness: float | None = None) -> RWLockDescription:
        """Who reads, who writes, who waits (see :meth:`tenure.RWLock.describe`)."""
        return self.session.portal.call(self._recipe.describe, max_staleness=max_staleness)

    def _reader(self, lease: aio.ReadLock) -> ReadLock:
        return self.session.keep_lease(ReadLock(self.session, lease))

    def _writer(self, lease: aio.WriteLock) -> WriteLock:
        return self.session.keep_lease(WriteLock(self.session, lease))
